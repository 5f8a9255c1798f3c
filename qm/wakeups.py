"""The wake-up port: how a waiting receive learns that its queue may have a message.

Waiters that take the queue's first message ("takers": plain receives) are woken one per
message made available, in the order they began watching, so that a message does not wake
every receiver of its queue only for all but one to find nothing. Every other waiter (peeks,
cursors, receives by position) is woken by every change. A taker that got a message after a
wake-up passes one on (`pass_on`): whatever under-counted, a queue with messages left always
has a waiter woken for them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol


class Watch(Protocol):
    async def wait(self, within: float) -> bool:
        """Return True when woken for a change after this watch began, False after `within` s
        (or the poll interval) without one."""
        ...

    def close(self) -> None:
        """Stop watching. A taker's wake-up it did not wait for goes to the next taker."""
        ...


class WakeUps(Protocol):
    def watch(self, queue_id: int, takes: bool = False) -> Watch:
        """Start watching before looking, so that no change between look and wait is missed.
        `takes`: the watcher will take the queue's first message (it counts as one wake-up)."""
        ...

    def signal(self, queue_ids: Iterable[int]) -> None:
        """Each occurrence of a queue ID: one message became available there."""
        ...

    def pass_on(self, queue_id: int) -> None:
        """Wake one more taker of the queue: in this process, or, where processes share
        wake-ups and none is waiting here, in another."""
        ...
