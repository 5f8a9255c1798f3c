"""Housekeeping: idle transactions, expired two-phase locks and idle cursors ended; forgotten
duplicate keys; outbox rows left by a crash placed; messages past their time to be received
removed (the sweeper)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from qm.disposal import Placement, Reason
from qm.store import ReleaseReport
from storage import holds, outbox, rows
from storage.consequences import Consequences, remove_past_deadline
from storage.database import Database
from storage.tables import AVAILABLE, cursors, messages, received_message_ids, transactions
from storage.transaction_ends import TransactionEnds

m = messages.c
t = transactions.c
Row = Mapping[Any, Any]


class Housekeeping:
    def __init__(self, db: Database, ends: TransactionEnds) -> None:
        self._db = db
        self._ends = ends

    async def release_expired(
        self, now: datetime, forget_ids_before: datetime | None = None
    ) -> ReleaseReport:
        now_us = rows.to_us(now)
        if forget_ids_before is not None:
            await self._forget_duplicate_keys(forget_ids_before)
        async with self._db.transaction() as connection:
            consequences = Consequences(self._db, connection, now)
            gone: list[Row] = []
            placements: list[Placement] = []
            touched: set[int] = set()
            # Idle transactions first, in ID order, as a deletion locks them: each locks its
            # transaction row, then its message rows. The expired locks after them never wait.
            idle = sa.select(t.id).where(t.expires_at <= now_us).order_by(t.id)
            expired = (await connection.execute(idle)).scalars().all()
            for transaction_id in expired:  # every message row first, then one settlement
                ended = await self._ends.end_rows(connection, transaction_id, False, consequences, now)
                if ended is not None:
                    touched |= ended[0]
                    gone.extend(ended[1])
                    placements.extend(ended[2])
            locked = (await connection.execute(self._expired_locks(now_us))).mappings().all()
            purged = [row for row in locked if row["purge_pending"]]
            await holds.delete_rows(connection, purged)
            await holds.unlock(connection, [row for row in locked if not row["purge_pending"]])
            gone.extend(purged)
            placements.extend(await consequences.earned(purged, Reason.PURGED))
            touched.update(row["queue_id"] for row in locked)
            # What receives wrote down and did not place (a crash, a cancelled call): never
            # waiting (SKIP LOCKED), placed in the one settlement below.
            placements.extend(await outbox.take_left_over(self._db, connection, consequences))
            await consequences.settle(gone, placements)
            closed = await connection.execute(sa.delete(cursors).where(cursors.c.expires_at <= now_us))
        return ReleaseReport(len(locked), len(expired), int(closed.rowcount), frozenset(touched))

    async def _forget_duplicate_keys(self, before: datetime) -> None:
        """The duplicate keys remembered before `before`, forgotten in a transaction of their
        own. A keyed send holds its queue's row and then writes its key (docs/store.md, lock
        order); deleting keys in the pass's transaction, which then locks queue rows, made a
        send resending a message at its key's expiry and the pass wait for each other."""
        async with self._db.transaction() as connection:
            old = received_message_ids.c.received_at < rows.to_us(before)
            await connection.execute(sa.delete(received_message_ids).where(old))

    def _expired_locks(self, now_us: int) -> sa.Select[Any]:
        """The two-phase locks past their expiry, their rows locked (PostgreSQL), skipping rows
        another transaction holds: what this pass then removes or puts back is what it read.
        Read without the lock, a row could be ended by its holder, or removed and placed by
        another process's pass, before this pass acted on it again (a message dead-lettered
        twice, or made available again under a later claim and received twice). A row skipped
        is left to the next pass. Never waiting, the pass needs no order among these rows; an
        ORDER BY lookup_id made SQLite walk the whole table by its primary key instead of the
        expiry index (a second of CPU per pass behind a million messages)."""
        statement = sa.select(messages).where(m.lock_tag.is_not(None), m.lock_expires_at <= now_us)
        return statement if self._db.sqlite else statement.with_for_update(skip_locked=True)

    async def expire_due(self, now: datetime, limit: int) -> int:
        """One set-based batch: the available messages whose TTBR deadline passed, oldest
        deadline first, found through the deadline index (never by scanning a queue)."""
        now_us = rows.to_us(now)
        due = (
            sa.select(m.lookup_id)
            .where(m.ttbr_deadline <= now_us, m.state == AVAILABLE)
            .order_by(m.ttbr_deadline)
            .limit(limit)
        )
        return await remove_past_deadline(self._db, due, "ttbr_deadline", Reason.EXPIRED, now)
