"""In-process wake-ups for waiting receives, and the choice of wake-ups for a database."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Protocol

from qm.wakeups import WakeUps, Watch
from storage.engine import is_sqlite


class LocalWatch:
    """One waiter: a future that a signal, the poll interval or the timeout settles."""

    def __init__(self, owner: LocalWakeUps, queue_id: int, takes: bool) -> None:
        self.queue_id = queue_id
        self.takes = takes
        self._owner = owner
        self._woken: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._acted = False

    def wake(self) -> None:
        if not self._woken.done():
            self._woken.set_result(True)

    @property
    def waiting(self) -> bool:
        return not self._woken.done()

    async def wait(self, within: float) -> bool:
        timer = asyncio.get_running_loop().call_later(
            max(0.0, min(within, self._owner.poll_interval)), self._time_out
        )
        try:
            woken = await self._woken
        finally:
            timer.cancel()
        self._acted = True  # not when cancelled: close() then hands the wake-up on
        return woken

    def close(self) -> None:
        self._owner.forget(self)
        woken = self._woken.done() and not self._woken.cancelled() and self._woken.result()
        if self.takes and woken and not self._acted:
            self._owner.pass_on(self.queue_id)

    def _time_out(self) -> None:
        if not self._woken.done():
            self._woken.set_result(False)


Unclaimed = Callable[[int, int], None]
"""Told, per queue signalled here, how many of its messages no taker of this process was
woken for (0 too: the queue changed all the same)."""


class LocalWakeUps:
    """Watchers per queue, in the order they began; signals settle their futures.

    A watch is registered before its owner looks at the queue: a signal between the look and
    the wait has already woken it, so the wait returns at once. Writers in other processes
    are noticed within `poll_interval` seconds (PostgreSQL's LISTEN/NOTIFY wakes sooner).
    `unclaimed` hears of the messages that no taker here was woken for, so that they can be
    announced to other processes (storage.pg_wakeups)."""

    def __init__(self, poll_interval: float = 1.0, unclaimed: Unclaimed | None = None) -> None:
        self._watching: dict[int, dict[LocalWatch, None]] = {}
        self.poll_interval = poll_interval
        self._unclaimed = unclaimed

    def watch(self, queue_id: int, takes: bool = False) -> Watch:
        watch = LocalWatch(self, queue_id, takes)
        self._watching.setdefault(queue_id, {})[watch] = None
        return watch

    def forget(self, watch: LocalWatch) -> None:
        watchers = self._watching.get(watch.queue_id)
        if watchers is not None:
            watchers.pop(watch, None)
            if not watchers:
                del self._watching[watch.queue_id]

    def signal(self, queue_ids: Iterable[int]) -> None:
        for queue_id, messages in Counter(queue_ids).items():
            left = self._wake(queue_id, messages)
            if self._unclaimed is not None:
                self._unclaimed(queue_id, left)

    def signal_from_elsewhere(self, queue_id: int, messages: int | None) -> None:
        """A change another process announced: `messages` takers woken (None: every one), and
        every other watcher. It is not announced again."""
        self._wake(queue_id, messages)

    def wake_every_watcher(self) -> None:
        """Every watcher of every queue looks again (another process asked, storage.pg_wakeups)."""
        for queue_id in list(self._watching):
            self._wake(queue_id, None)

    def pass_on(self, queue_id: int) -> None:
        if self._wake(queue_id, 1) and self._unclaimed is not None:
            self._unclaimed(queue_id, 1)

    def _wake(self, queue_id: int, takers: int | None) -> int:
        """Wake every non-taker, and `takers` takers (None: all), oldest first; return how
        many of `takers` found no waiting taker."""
        for watch in list(self._watching.get(queue_id, {})):
            if not watch.waiting:
                continue
            if watch.takes and takers is not None:
                if takers == 0:
                    continue
                takers -= 1
            watch.wake()
        return takers or 0

    async def start(self) -> None:
        """Nothing to connect: in-process only."""

    async def close(self) -> None:
        """Nothing to release."""


class ManagedWakeUps(WakeUps, Protocol):
    async def start(self) -> None: ...

    async def close(self) -> None: ...


def make_wakeups(url: str, poll_interval: float) -> ManagedWakeUps:
    """SQLite: in-process events plus a poll for other processes; PostgreSQL: LISTEN/NOTIFY."""
    if is_sqlite(url):
        return LocalWakeUps(poll_interval)
    from storage.pg_wakeups import PostgresWakeUps

    return PostgresWakeUps(url, safety_poll_interval=max(poll_interval, 30.0))
