"""In-process wake-ups for waiting receives, with a poll as the cross-process fallback."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable


class _EventWatch:
    def __init__(self, event: asyncio.Event, poll_interval: float) -> None:
        self._event = event
        self._poll_interval = poll_interval

    async def wait(self, timeout: float) -> None:
        try:
            await asyncio.wait_for(self._event.wait(), min(timeout, self._poll_interval))
        except TimeoutError:
            pass


class LocalWakeUps:
    """One event per queue, replaced at each signal.

    A watch holds the event current when it began: a signal between the caller's look
    and its wait has already set that event, so the wait returns at once. Another process
    writing the same database is noticed within `poll_interval` seconds.
    """

    def __init__(self, poll_interval: float = 1.0) -> None:
        self._events: dict[int, asyncio.Event] = {}
        self._poll_interval = poll_interval

    def watch(self, queue_id: int) -> _EventWatch:
        event = self._events.get(queue_id)
        if event is None:
            event = self._events[queue_id] = asyncio.Event()
        return _EventWatch(event, self._poll_interval)

    def signal(self, queue_ids: Iterable[int]) -> None:
        for queue_id in queue_ids:
            event = self._events.pop(queue_id, None)
            if event is not None:
                event.set()
