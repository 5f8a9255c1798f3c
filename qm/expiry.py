"""Timers and leftovers (reference §7.6, §7.7): the sweeper's expiry passes and housekeeping."""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from qm.store import ReleaseReport

if TYPE_CHECKING:
    from qm.manager import QueueManager


class Expiry:
    """The timer operations of a queue manager."""

    def __init__(self, qm: QueueManager) -> None:
        self._qm = qm

    async def release_expired(self) -> ReleaseReport:
        """Abort expired locks and idle transactions, close idle cursors, wake readers."""
        now = self._qm.clock.now()
        forget_before = now - timedelta(seconds=self._qm.config.duplicate_window_s)
        return await self._qm.store.housekeeping.release_expired(now, forget_before)

    async def expire_due(self) -> int:
        """The sweeper's pass: remove messages past their TTBR, in batches, until none is due."""
        total = 0
        while True:  # in transit first: a message past both deadlines never reached its queue
            expired = await self._qm.store.outgoing.expire_in_transit(
                self._qm.clock.now(), self._qm.config.sweep_batch
            )
            total += expired
            if expired < self._qm.config.sweep_batch:
                break
        while True:
            expired = await self._qm.store.housekeeping.expire_due(
                self._qm.clock.now(), self._qm.config.sweep_batch
            )
            total += expired
            if expired < self._qm.config.sweep_batch:
                return total
