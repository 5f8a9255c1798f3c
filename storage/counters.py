"""Lookup-ID counters: taken inside the writing transaction, never reused; the commit fence
that says which counters are settled; message IDs for messages sent without being stored."""

from __future__ import annotations

import asyncio

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from qm import rules
from qm.rules import COUNTER_MASK
from storage import driver_sql, send_statements
from storage.database import Database
from storage.tables import TXN_ENQUEUE, messages, queue_manager

m = messages.c


async def allocate_counters(db: Database, connection: AsyncConnection, count: int) -> list[int]:
    """`count` counters, ascending, in the connection's transaction."""
    if db.sqlite:
        [top] = await driver_sql.scalars(connection, send_statements.RAISE_COUNTER, {"count": count})
        return list(range(top - count + 1, top + 1))
    return sorted(await driver_sql.scalars(connection, send_statements.NEXT_COUNTERS, {"count": count}))


class Counters:
    """The counter's reading side: settled counters and fresh message IDs."""

    def __init__(self, db: Database) -> None:
        self._db = db
        self._fence = CommitFence()

    async def new_message_id(self) -> str:
        async with self._db.transaction() as connection:
            [counter] = await allocate_counters(self._db, connection, 1)
        return rules.message_id_for(self._db.identity(), counter)

    async def counter_high_water(self) -> int:
        """A settled counter (qm.store.MessageRepository): SQLite commits in counter order (one
        writer), PostgreSQL needs the commit fence; either way, not at or above a message
        that is still waiting for its transaction's commit."""
        async with self._db.engine.connect() as connection:
            if self._db.sqlite:
                settled = int((await connection.execute(sa.select(queue_manager.c.counter))).scalar_one())
            else:
                settled = await self._fence.settled(connection)
            pending = (await connection.execute(_PENDING_SENDS)).scalar()
        return settled if pending is None else min(settled, int(pending) - 1)


_PENDING_SENDS = sa.select(sa.func.min(m.lookup_id.op("&")(COUNTER_MASK))).where(
    m.transaction_id.is_not(None), m.txn_op == TXN_ENQUEUE
)
"""The lowest counter of a message sent in a transaction that is still open (via the
transaction_id index): it becomes available at that commit, under its old lookup ID."""

_LAST_COUNTER = sa.text("SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM message_counter")
_SNAPSHOT = sa.text(
    "SELECT CAST(pg_current_snapshot() AS text) AS taken,"
    " NOT EXISTS (SELECT FROM pg_snapshot_xip(pg_current_snapshot())) AS idle,"
    " (SELECT coalesce(bool_and(pg_visible_in_snapshot(x, pg_current_snapshot())), true)"
    "  FROM pg_snapshot_xip(CAST(CAST(:before AS text) AS pg_snapshot)) AS x) AS ended"
)

FIRST_SETTLE_TRIES = 100
FIRST_SETTLE_PAUSE_S = 0.01


class CommitFence:
    """PostgreSQL: the highest counter below which no transaction is still in flight.

    The sequence hands out counters before the commit, and transactions commit in any order
    (group-commit batches of two gateway processes, dead-letter and journal copies), so the
    last value handed out may belong to a transaction that commits later, and lower ones
    too. The fence: read the sequence's value V, then take a snapshot S. Every transaction
    that took a counter up to V had its transaction ID by then (`allocate_counters`, the
    send's room statement), so it is finished or in S's in-progress list; once all of those
    have ended, V is settled. Nothing is written and senders never wait: a candidate (V, S)
    is kept until a later call sees its transactions ended (usually the next call,
    milliseconds later), then the next candidate is taken, so a steady stream of new
    transactions cannot starve it."""

    def __init__(self) -> None:
        self._settled = 0
        self._candidate: tuple[int, str] | None = None

    async def settled(self, connection: AsyncConnection) -> int:
        settled = await self._step(connection)
        for _ in range(FIRST_SETTLE_TRIES):  # the first value only: 0 would count every
            if self._settled or self._candidate is None:  # message as possibly new
                break
            await asyncio.sleep(FIRST_SETTLE_PAUSE_S)
            settled = await self._step(connection)
        return settled

    async def _step(self, connection: AsyncConnection) -> int:
        value = int((await connection.execute(_LAST_COUNTER)).scalar_one())
        candidate = self._candidate
        before = "1:1:" if candidate is None else candidate[1]
        row = (await connection.execute(_SNAPSHOT, {"before": before})).one()
        if candidate is not None and row.ended:
            self._settled = max(self._settled, candidate[0])
            if self._candidate == candidate:
                self._candidate = None
        if row.idle:
            self._settled = max(self._settled, value)
        elif self._candidate is None:
            self._candidate = (value, row.taken)
        return self._settled
