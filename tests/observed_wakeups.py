"""Wake-ups wrapped so that a test can wait until readers are really blocked (no sleeps)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from qm.wakeups import WakeUps, Watch

WAIT_LIMIT_S = 10.0
"""How long a test waits for readers to block; a missed wake-up fails it instead of hanging."""


class _ObservedWatch:
    def __init__(self, inner: Watch, owner: ObservedWakeUps) -> None:
        self._inner = inner
        self._owner = owner

    async def wait(self, within: float) -> bool:
        self._owner.changed(+1)
        try:
            return await self._inner.wait(within)
        finally:
            self._owner.changed(-1)

    def close(self) -> None:
        self._inner.close()


class ObservedWakeUps:
    """Another WakeUps, counting the readers blocked in it."""

    def __init__(self, inner: WakeUps) -> None:
        self._inner = inner
        self.waiting = 0
        self._change = asyncio.Event()

    def watch(self, queue_id: int, takes: bool = False) -> Watch:
        return _ObservedWatch(self._inner.watch(queue_id, takes), self)

    def signal(self, queue_ids: Iterable[int]) -> None:
        self._inner.signal(queue_ids)

    def pass_on(self, queue_id: int) -> None:
        self._inner.pass_on(queue_id)

    def changed(self, delta: int) -> None:
        self.waiting += delta
        self._change.set()
        self._change = asyncio.Event()

    async def until_waiting(self, count: int = 1) -> None:
        """Return once at least `count` readers are blocked waiting for a change."""
        async with asyncio.timeout(WAIT_LIMIT_S):
            while self.waiting < count:
                await self._change.wait()

    async def until_none_waiting(self) -> None:
        """Return once no reader is blocked any more."""
        async with asyncio.timeout(WAIT_LIMIT_S):
            while self.waiting > 0:
                await self._change.wait()
