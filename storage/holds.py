"""Row operations every removal and claim shares, inside the caller's transaction: holding
MSMQ transactions' rows, deleting message rows, ending two-phase locks."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from qm.errors import MqError, MqErrorCode
from storage.database import Database
from storage.tables import AVAILABLE, messages, transactions

m = messages.c


async def hold_transactions(
    db: Database, connection: AsyncConnection, transaction_ids: Iterable[str]
) -> None:
    """Hold the MSMQ transactions' rows for the rest of this database transaction (FOR KEY
    SHARE on PostgreSQL; SQLite has one writer), or fail with MQ_ERROR_TRANSACTION_SEQUENCE
    if one has ended. The queue manager looks a transaction up before a receive or send in
    it, in a database transaction of its own; one committed, aborted or timed out between
    that look and the claim or insert left its message held by nobody, for ever (the
    stress: a message locked for a transaction with no row). Its end deletes its row first
    (storage/transactions.py), so it now waits for this, and then sees the row gone."""
    wanted = sorted(set(transaction_ids))
    if not wanted:
        return
    statement = sa.select(transactions.c.id).where(transactions.c.id.in_(wanted)).order_by(transactions.c.id)
    if not db.sqlite:
        statement = statement.with_for_update(key_share=True)
    found = set((await connection.execute(statement)).scalars().all())
    for transaction_id in wanted:
        if transaction_id not in found:
            raise MqError(
                MqErrorCode.MQ_ERROR_TRANSACTION_SEQUENCE,
                f"no active transaction {transaction_id!r} (it ended or timed out)",
            )


def locked_in_lookup_order(chosen: sa.ColumnElement[bool], keeps_key: bool) -> sa.ColumnElement[bool]:
    """PostgreSQL: the message rows `chosen` selects, as a condition on their lookup IDs, whose
    rows one subquery (an InitPlan, run before the statement changes any row) locks first in
    lookup-ID order, FOR NO KEY UPDATE for a statement that `keeps_key` (else FOR UPDATE). A
    statement that locks many rows by a scan (UPDATE … WHERE queue_id = …) takes them in the
    order the scan meets them (by state, then lookup ID, or the table's order: a row received
    meanwhile is met through its old entry), and deadlocks with one that takes some of them in
    lookup-ID order (a commit's)."""
    return m.lookup_id == sa.any_(sa.func.array(locking_in_lookup_order(chosen, keeps_key).scalar_subquery()))


def locking_in_lookup_order(chosen: sa.ColumnElement[bool], keeps_key: bool = False) -> sa.Select[Any]:
    """The lookup IDs of the message rows `chosen` selects, locking them in lookup-ID order
    (locked_in_lookup_order says why)."""
    return sa.select(m.lookup_id).where(chosen).order_by(m.lookup_id).with_for_update(key_share=keeps_key)


async def delete_rows(connection: AsyncConnection, leaving: Iterable[Mapping[Any, Any]]) -> None:
    ids = [row["lookup_id"] for row in leaving]
    if ids:
        await connection.execute(sa.delete(messages).where(m.lookup_id.in_(ids)))


async def unlock(connection: AsyncConnection, held: Sequence[Mapping[Any, Any]]) -> None:
    """End two-phase locks: the messages are available again at their places."""
    if held:
        await connection.execute(
            sa.update(messages)
            .where(m.lookup_id.in_([row["lookup_id"] for row in held]))
            .values(state=AVAILABLE, lock_tag=None, lock_expires_at=None)
        )
        Database.changed(connection, (row["queue_id"] for row in held))
