"""Transactions, cursors, and housekeeping: expired locks, idle transactions, TTBR expiry."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from qm.disposal import Placement, Reason
from qm.store import CursorRecord, ReleaseReport, TransactionRecord
from storage import rows
from storage.base import StoreBase
from storage.consequences import Consequences, remove_past_deadline
from storage.tables import (
    AVAILABLE,
    TXN_DEQUEUE,
    TXN_ENQUEUE,
    cursors,
    messages,
    received_message_ids,
    transactions,
)

m = messages.c
t = transactions.c
Row = Mapping[Any, Any]


class TransactionStore(StoreBase):
    async def create_transaction(self, record: TransactionRecord) -> None:
        async with self._transaction() as connection:
            await connection.execute(
                sa.insert(transactions).values(
                    id=record.id,
                    created_at=rows.to_us(record.created_at),
                    expires_at=rows.to_us(record.expires_at),
                )
            )

    async def get_transaction(self, transaction_id: str) -> TransactionRecord | None:
        async with self.engine.connect() as connection:
            statement = sa.select(transactions).where(t.id == transaction_id)
            row = (await connection.execute(statement)).mappings().first()
        return None if row is None else rows.transaction_from_row(row)

    async def touch_transaction(self, transaction_id: str, expires_at: datetime) -> bool:
        async with self._transaction() as connection:
            result = await connection.execute(
                sa.update(transactions)
                .where(t.id == transaction_id)
                .values(expires_at=rows.to_us(expires_at))
            )
        return bool(result.rowcount)

    async def transaction_ttbr(self, transaction_id: str, seconds: int) -> int:
        async with self._transaction() as connection:
            await connection.execute(
                sa.update(transactions)
                .where(t.id == transaction_id, t.first_ttbr_seconds.is_(None))
                .values(first_ttbr_seconds=seconds)
            )
            first = await connection.execute(sa.select(t.first_ttbr_seconds).where(t.id == transaction_id))
            value = first.scalar()
        return seconds if value is None else int(value)

    async def finish_transaction(
        self, transaction_id: str, commit: bool, now: datetime
    ) -> frozenset[int] | None:
        async with self._transaction() as connection:
            return await self._finish(connection, transaction_id, commit, now)

    async def _finish(
        self, connection: AsyncConnection, transaction_id: str, commit: bool, now: datetime
    ) -> frozenset[int] | None:
        consequences = Consequences(self, connection, now)
        ended = await self._end_rows(connection, transaction_id, commit, consequences, now)
        if ended is None:
            return None
        touched, gone, placements = ended
        await consequences.settle(gone, placements)
        return touched

    async def _end_rows(
        self,
        connection: AsyncConnection,
        transaction_id: str,
        commit: bool,
        consequences: Consequences,
        now: datetime,
    ) -> tuple[frozenset[int], list[Row], list[Placement]] | None:
        """The transaction's message rows changed (deleted, made available, returned); what the
        change leaves and earns, for Consequences.settle once every message row is done.

        PostgreSQL: all the transaction's rows are locked first, by one statement in lookup-ID
        order, and only the rows it returned are changed. The changes take several statements
        (received rows, then sent ones), which would lock the rows out of that order and
        deadlock with a purge marking them. A row read without a lock may be removed meanwhile
        by a deletion of its queue, and that queue then looked up for the row's consequences
        (a KeyError); a locked row keeps its queue until this commits, and a row removed before
        the lock is simply not returned."""
        gone = await connection.execute(sa.delete(transactions).where(t.id == transaction_id))
        if not gone.rowcount:
            return None
        statement = sa.select(messages).where(m.transaction_id == transaction_id).order_by(m.lookup_id)
        if not self._sqlite:  # SQLite has one writer: nothing changes the rows once read
            statement = statement.with_for_update()
        held = (await connection.execute(statement)).mappings().all()
        if commit:
            removed, placements = await self._commit_rows(connection, held, consequences, now)
        else:
            removed, placements = await self._abort_rows(connection, held, consequences)
        self.changed(connection, (row["queue_id"] for row in held))  # one wake-up per message
        return frozenset(row["queue_id"] for row in held), removed, placements

    async def _commit_rows(
        self, connection: AsyncConnection, held: Sequence[Row], consequences: Consequences, now: datetime
    ) -> tuple[list[Row], list[Placement]]:
        """Received messages leave (journaled, acknowledged); sent ones reach their queues —
        unless their time to reach the queue ran out first — with first/last marked."""
        received = [row for row in held if row["txn_op"] == TXN_DEQUEUE]
        purged = [row for row in held if row["txn_op"] == TXN_ENQUEUE and row["purge_pending"]]
        sent = [row for row in held if row["txn_op"] == TXN_ENQUEUE and not row["purge_pending"]]
        late = [row for row in sent if _past(row["ttrq_deadline"], now)]
        arriving = [row for row in sent if not _past(row["ttrq_deadline"], now)]
        await self._delete_rows(connection, [*received, *purged, *late])
        if arriving:
            ids = [row["lookup_id"] for row in arriving]
            await connection.execute(
                sa.update(messages)
                .where(m.lookup_id.in_(ids))
                .values(
                    state=AVAILABLE,
                    transaction_id=None,
                    txn_op=None,
                    first_in_xact=m.lookup_id == ids[0],
                    last_in_xact=m.lookup_id == ids[-1],
                )
            )
        placements = [
            *await consequences.earned(received, Reason.RECEIVED),
            *await consequences.earned(purged, Reason.PURGED),
            *await consequences.earned(late, Reason.REACH_QUEUE_TIMEOUT),
            *await consequences.earned(arriving, Reason.ARRIVED),
        ]
        return [*received, *purged, *late], placements

    async def _abort_rows(
        self, connection: AsyncConnection, held: Sequence[Row], consequences: Consequences
    ) -> tuple[list[Row], list[Placement]]:
        """Sent messages vanish; received ones return to their place, abort count + 1."""
        leaving = [row for row in held if row["txn_op"] == TXN_ENQUEUE or row["purge_pending"]]
        returning = [row["lookup_id"] for row in held if row not in leaving]
        await self._delete_rows(connection, leaving)
        if returning:
            await connection.execute(
                sa.update(messages)
                .where(m.lookup_id.in_(returning))
                .values(state=AVAILABLE, transaction_id=None, txn_op=None, abort_count=m.abort_count + 1)
            )
        purged = [row for row in leaving if row["txn_op"] == TXN_DEQUEUE]
        return list(leaving), await consequences.earned(purged, Reason.PURGED)

    # -- cursors ----------------------------------------------------------------------

    async def create_cursor(self, record: CursorRecord) -> None:
        async with self._transaction() as connection:
            await connection.execute(sa.insert(cursors).values(rows.cursor_values(record)))

    async def get_cursor(self, cursor_id: str) -> CursorRecord | None:
        async with self.engine.connect() as connection:
            statement = sa.select(cursors).where(cursors.c.id == cursor_id)
            row = (await connection.execute(statement)).mappings().first()
        return None if row is None else rows.cursor_from_row(row)

    async def save_cursor(self, record: CursorRecord) -> None:
        async with self._transaction() as connection:
            await connection.execute(
                sa.update(cursors).where(cursors.c.id == record.id).values(rows.cursor_values(record))
            )

    async def delete_cursor(self, cursor_id: str) -> bool:
        async with self._transaction() as connection:
            result = await connection.execute(sa.delete(cursors).where(cursors.c.id == cursor_id))
        return bool(result.rowcount)

    # -- housekeeping -----------------------------------------------------------------

    async def release_expired(
        self, now: datetime, forget_ids_before: datetime | None = None
    ) -> ReleaseReport:
        now_us = rows.to_us(now)
        async with self._transaction() as connection:
            if forget_ids_before is not None:
                old = received_message_ids.c.received_at < rows.to_us(forget_ids_before)
                await connection.execute(sa.delete(received_message_ids).where(old))
            consequences = Consequences(self, connection, now)
            gone: list[Row] = []
            placements: list[Placement] = []
            touched: set[int] = set()
            # Idle transactions first, in ID order, as a deletion locks them: each locks its
            # transaction row, then its message rows. The expired locks after them never wait.
            idle = sa.select(t.id).where(t.expires_at <= now_us).order_by(t.id)
            expired = (await connection.execute(idle)).scalars().all()
            for transaction_id in expired:  # every message row first, then one settlement
                ended = await self._end_rows(connection, transaction_id, False, consequences, now)
                if ended is not None:
                    touched |= ended[0]
                    gone.extend(ended[1])
                    placements.extend(ended[2])
            locked = (await connection.execute(self._expired_locks(now_us))).mappings().all()
            purged = [row for row in locked if row["purge_pending"]]
            await self._delete_rows(connection, purged)
            await self._unlock(connection, [row for row in locked if not row["purge_pending"]])
            gone.extend(purged)
            placements.extend(await consequences.earned(purged, Reason.PURGED))
            touched.update(row["queue_id"] for row in locked)
            await consequences.settle(gone, placements)
            closed = await connection.execute(sa.delete(cursors).where(cursors.c.expires_at <= now_us))
        return ReleaseReport(len(locked), len(expired), int(closed.rowcount), frozenset(touched))

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
        return statement if self._sqlite else statement.with_for_update(skip_locked=True)

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
        return await remove_past_deadline(self, due, "ttbr_deadline", Reason.EXPIRED, now)


def _past(deadline_us: int | None, now: datetime) -> bool:
    return deadline_us is not None and deadline_us <= rows.to_us(now)
