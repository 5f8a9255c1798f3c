"""Messages: the store's message repository, composed of the send path (storage/sending.py),
the receive path (storage/receiving.py) and the reads and two-phase lock ends here."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from qm.disposal import Placement, Reason
from qm.model import Message, NewMessage, Queue
from qm.store import (
    NO_FILTER,
    Budget,
    Claim,
    EnqueueResult,
    MessageFilter,
    Moved,
    PositionState,
    Reshape,
    Selector,
)
from storage import rows, statements
from storage.consequences import Consequences
from storage.counters import Counters
from storage.database import Database
from storage.group_commit import GroupCommit
from storage.holds import delete_rows, unlock
from storage.receiving import Receiver, ReceiveRequest
from storage.relocation import Relocation
from storage.sending import EnqueueRequest, Sender
from storage.tables import LOCKED, TXN_ENQUEUE, messages

m = messages.c


class SqlMessages:
    def __init__(self, db: Database, sender: Sender, receiver: Receiver, counters: Counters) -> None:
        self._db = db
        self.sender = sender
        self.receiver = receiver
        self._counters = counters
        self._relocation = Relocation(db)

    @property
    def group_commit(self) -> GroupCommit[EnqueueRequest, list[EnqueueResult]]:
        """The sends' group commit (its `stats`)."""
        return self.sender.group_commit

    @property
    def receive_group(self) -> GroupCommit[ReceiveRequest, Message | None]:
        """The plain receives' group commit (its `stats`)."""
        return self.receiver.receive_group

    async def enqueue(self, batch: Sequence[NewMessage]) -> list[EnqueueResult]:
        """Insert in one transaction, applying the §7.3 quota rules (the queue manager's as
        stored, then each queue's) message by message; the transaction may hold other
        callers' messages too (group commit)."""
        return await self.sender.enqueue(batch)

    async def enqueue_request(self, request: EnqueueRequest) -> list[EnqueueResult]:
        """`enqueue` with a `within` callback in the same transaction (storage.sending.WithinEnqueue)."""
        return await self.sender.enqueue_request(request)

    async def take(self, queue: Queue, selector: Selector, now: datetime, claim: Claim) -> Message | None:
        return await self.receiver.take(queue, selector, now, claim)

    def may_have_more(self, queue_id: int) -> bool:
        return self.receiver.may_have_more(queue_id)

    async def take_many(
        self, queue: Queue, limit: int, now: datetime, budget: Budget | None = None
    ) -> list[Message]:
        return await self.receiver.take_many(queue, limit, now, budget)

    async def new_message_id(self) -> str:
        return await self._counters.new_message_id()

    async def counter_high_water(self) -> int:
        return await self._counters.counter_high_water()

    async def arrived_since(self, queue_id: int, counter: int) -> frozenset[int]:
        values = statements.arrived_after_values(counter) | {"queue": queue_id}
        async with self._db.reading() as connection:
            return frozenset((await connection.execute(_ARRIVED_SINCE, values)).scalars())

    async def move(
        self, queue_id: int, lookup_ids: Sequence[int], reshape: Reshape, now: datetime
    ) -> list[Moved]:
        return await self._relocation.move(queue_id, lookup_ids, reshape, now)

    async def insert_all(self, batch: Sequence[NewMessage]) -> list[Message]:
        return await self._relocation.insert_all(batch)

    async def place(self, placements: Sequence[Placement], now: datetime) -> None:
        async with self._db.transaction() as connection:
            await Consequences(self._db, connection, now).place(placements)

    async def peek(self, queue_id: int, selector: Selector, now: datetime) -> Message | None:
        statement = _peek(statements.TargetShape.of(selector, lock_rows=False))
        values = statements.target_values(queue_id, selector, rows.to_us(now))
        async with self._db.reading() as connection:
            row = (await connection.execute(statement, values)).mappings().first()
        return None if row is None else rows.message_from_row(row)

    async def browse(
        self, queue_id: int, after: int, limit: int, now: datetime, where: MessageFilter = NO_FILTER
    ) -> list[Message]:
        values = statements.available_values(queue_id, rows.to_us(now)) | {"after": after, "limit": limit}
        statement = _BROWSE if where.empty else _BROWSE.where(*_kept(where))
        async with self._db.reading() as connection:
            found = (await connection.execute(statement, values)).mappings().all()
        return [rows.message_from_row(row) for row in found]

    async def browse_within(
        self,
        queue_id: int,
        after: int,
        limit: int,
        now: datetime,
        budget: Budget,
        where: MessageFilter = NO_FILTER,
    ) -> tuple[list[Message], bool]:
        """Two reads: the footprints of the page's messages, then the rows of those that fit,
        so bodies past the budget are never loaded."""
        values = statements.available_values(queue_id, rows.to_us(now)) | {"after": after, "limit": limit}
        sizes_read, browse = statements.FIRST_SIZES_READ, _BROWSE
        if not where.empty:
            sizes_read, browse = sizes_read.where(*_kept(where)), browse.where(*_kept(where))
        async with self._db.reading() as connection:
            sizes = statements.footprints((await connection.execute(sizes_read, values)).all())
            count = budget.fitting(sizes)
            found = (await connection.execute(browse, values | {"limit": count})).mappings().all()
        return [rows.message_from_row(row) for row in found], count < len(sizes) or len(sizes) == limit

    async def position_state(self, queue_id: int, lookup_id: int, now: datetime) -> PositionState:
        statement = sa.select(m.state, m.ttbr_deadline).where(
            m.lookup_id == lookup_id, m.queue_id == queue_id
        )
        async with self._db.reading() as connection:
            row = (await connection.execute(statement)).first()
        if row is None:
            return PositionState.MISSING
        if row.state == LOCKED:
            return PositionState.LOCKED
        if row.ttbr_deadline is not None and row.ttbr_deadline <= rows.to_us(now):
            return PositionState.EXPIRED
        return PositionState.AVAILABLE

    async def end_lock(
        self, lookup_id: int, tag: str, commit: bool, now: datetime
    ) -> tuple[PositionState, int]:
        async with self._db.transaction() as connection:
            statement = sa.select(messages).where(m.lookup_id == lookup_id)
            if not self._db.sqlite:
                statement = statement.with_for_update()
            row = (await connection.execute(statement)).mappings().first()
            if row is None:
                return PositionState.MISSING, 0
            if row["lock_tag"] != tag:
                return PositionState.AVAILABLE, row["queue_id"]
            if row["lock_expires_at"] <= rows.to_us(now):
                await self._release(connection, row, now)  # as housekeeping would have
                return PositionState.EXPIRED, row["queue_id"]
            if commit or row["purge_pending"]:
                await delete_rows(connection, [row])
                reason = Reason.RECEIVED if commit else Reason.PURGED
                await Consequences(self._db, connection, now).removed([row], reason)
            else:
                await unlock(connection, [row])
            return PositionState.LOCKED, row["queue_id"]

    async def _release(self, connection: AsyncConnection, row: Mapping[Any, Any], now: datetime) -> None:
        """End an expired lock: a message a purge marked meanwhile is purged, any other is
        available again. Put back still marked, it would be removed by the next purge without
        being marked, and so locked, first."""
        if row["purge_pending"]:
            await delete_rows(connection, [row])
            await Consequences(self._db, connection, now).removed([row], Reason.PURGED)
        else:
            await unlock(connection, [row])


_BROWSE = (
    sa.select(messages)
    .where(statements.available(), m.lookup_id > sa.bindparam("after", type_=sa.BigInteger))
    .order_by(m.lookup_id)
    .limit(sa.bindparam("limit", type_=sa.Integer))
)


def _kept(where: MessageFilter) -> list[sa.ColumnElement[bool]]:
    """An operator's filter as conditions (a label part matched as written, any case)."""
    conditions = []
    if where.label:
        conditions.append(sa.func.lower(m.label).contains(where.label.lower(), autoescape=True))
    if where.message_class is not None:
        conditions.append(m.message_class == where.message_class)
    if where.priority is not None:
        conditions.append(m.priority == where.priority)
    if where.arrived_after is not None:
        conditions.append(m.arrived_time >= rows.to_us(where.arrived_after))
    if where.arrived_before is not None:
        conditions.append(m.arrived_time < rows.to_us(where.arrived_before))
    if where.correlation_id is not None:
        conditions.append(m.correlation_id == where.correlation_id)
    return conditions


@functools.cache
def _peek(shape: statements.TargetShape) -> sa.Select[Any]:
    target = statements.select_target(shape).scalar_subquery()
    return sa.select(messages).where(m.lookup_id == target)


_ARRIVED_SINCE = sa.select(m.lookup_id).where(
    m.queue_id == sa.bindparam("queue", type_=sa.Integer),
    statements.arrived_after(),
    sa.or_(m.txn_op.is_(None), m.txn_op != TXN_ENQUEUE),
)
