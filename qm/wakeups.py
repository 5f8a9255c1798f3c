"""The wake-up port: how a waiting receive learns that its queue may have a message."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol


class Watch(Protocol):
    async def wait(self, within: float) -> None:
        """Return when the watched queue changed after this watch began, or after `within` s."""
        ...


class WakeUps(Protocol):
    def watch(self, queue_id: int) -> Watch:
        """Start watching before looking, so that no change between look and wait is missed."""
        ...

    def signal(self, queue_ids: Iterable[int]) -> None: ...
