"""Timers and leftovers (reference §7.6, §7.7): the sweeper's expiry passes and housekeeping."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from qm.store import ReleaseReport

if TYPE_CHECKING:
    from qm.manager import QueueManager

FORGET_INTERVAL = timedelta(minutes=1)
"""How often housekeeping looks for idle SRMP stream state and outgoing queues."""


class Expiry:
    """The timer operations of a queue manager."""

    def __init__(self, qm: QueueManager) -> None:
        self._qm = qm
        self._next_forget: datetime | None = None

    async def release_expired(self) -> ReleaseReport:
        """Abort expired locks and idle transactions, close idle cursors, wake readers."""
        now = self._qm.clock.now()
        forget_before = now - timedelta(seconds=self._qm.config.duplicate_window_s)
        report = await self._qm.store.housekeeping.release_expired(now, forget_before)
        await self._forget_idle_srmp_state()
        return report

    async def _forget_idle_srmp_state(self) -> None:
        """What anonymous SRMP senders made the gateway keep, once unused: incoming stream state
        that owes nothing, and empty outgoing queues (both made again when needed)."""
        config, now = self._qm.config, self._qm.clock.now()
        if self._next_forget is not None and now < self._next_forget:
            return  # housekeeping runs every second; these deadlines are hours and days long
        self._next_forget = now + FORGET_INTERVAL
        await self._qm.store.streams.forget_idle_streams(
            now - timedelta(seconds=config.stream_idle_s), config.sweep_batch
        )
        await self._qm.store.outgoing.remove_idle_outgoing_queues(
            now - timedelta(seconds=config.outgoing_idle_s), now, config.sweep_batch
        )

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
