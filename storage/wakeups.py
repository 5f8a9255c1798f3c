"""In-process wake-ups for waiting receives, and the choice of wake-ups for a database."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Protocol

from qm.wakeups import WakeUps, Watch
from storage.engine import is_sqlite


class EventWatch:
    def __init__(self, event: asyncio.Event, poll_interval: float) -> None:
        self._event = event
        self._poll_interval = poll_interval

    async def wait(self, within: float) -> None:
        try:
            await asyncio.wait_for(self._event.wait(), min(within, self._poll_interval))
        except TimeoutError:
            pass


class LocalWakeUps:
    """One event per queue, replaced at each signal.

    A watch holds the event current when it began: a signal between the caller's look
    and its wait has already set that event, so the wait returns at once. Writers in
    other processes are noticed within `poll_interval` seconds.
    """

    def __init__(self, poll_interval: float = 1.0) -> None:
        self._events: dict[int, asyncio.Event] = {}
        self._poll_interval = poll_interval

    def watch(self, queue_id: int) -> Watch:
        event = self._events.get(queue_id)
        if event is None:
            event = self._events[queue_id] = asyncio.Event()
        return EventWatch(event, self._poll_interval)

    def signal(self, queue_ids: Iterable[int]) -> None:
        for queue_id in queue_ids:
            event = self._events.pop(queue_id, None)
            if event is not None:
                event.set()

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
