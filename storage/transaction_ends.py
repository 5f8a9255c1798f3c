"""The end of an MSMQ transaction's message rows (commit or abort), shared by its owner's
commit and abort, housekeeping's timeout and the deletion of a queue it holds messages of."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from qm.disposal import Placement, Reason
from storage import rows
from storage.consequences import Consequences
from storage.database import Database
from storage.holds import delete_rows
from storage.tables import AVAILABLE, TXN_DEQUEUE, TXN_ENQUEUE, messages, transactions

m = messages.c
t = transactions.c
Row = Mapping[Any, Any]


class TransactionEnds:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def end_rows(
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
        if not self._db.sqlite:  # SQLite has one writer: nothing changes the rows once read
            statement = statement.with_for_update()
        held = (await connection.execute(statement)).mappings().all()
        if commit:
            removed, placements = await self._commit_rows(connection, held, consequences, now)
        else:
            removed, placements = await self._abort_rows(connection, held, consequences)
        Database.changed(connection, (row["queue_id"] for row in held))  # one wake-up per message
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
        await delete_rows(connection, [*received, *purged, *late])
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
        await delete_rows(connection, leaving)
        if returning:
            await connection.execute(
                sa.update(messages)
                .where(m.lookup_id.in_(returning))
                .values(state=AVAILABLE, transaction_id=None, txn_op=None, abort_count=m.abort_count + 1)
            )
        purged = [row for row in leaving if row["txn_op"] == TXN_DEQUEUE]
        return list(leaving), await consequences.earned(purged, Reason.PURGED)


def _past(deadline_us: int | None, now: datetime) -> bool:
    return deadline_us is not None and deadline_us <= rows.to_us(now)
