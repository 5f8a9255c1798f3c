"""The hot-path SQL of reads and receives, named: which rows are available, how a selector
finds one, and the statements a receive runs (sends: storage/send_statements.py).

The statements are built once, their values bound at execution (`sa.bindparam`): building
a Core statement and computing its cache key cost several times what executing it does,
and a statement object computes its cache key once (a profile of the gateway had a quarter
of its time in SQLAlchemy, mostly there; 500 -> 70 µs for the receive's DELETE)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.sql.dml import ReturningDelete

from qm.model import MAX_PRIORITY
from qm.rules import COUNTER_MASK, lookup_id_for
from qm.store import Budget, Footprint, Seek, Selector
from storage.tables import AVAILABLE, messages, queues

m = messages.c
q = queues.c


def available(pinned: bool = False) -> sa.ColumnElement[bool]:
    """Available in queue `:queue` and not past its time-to-be-received at `:now`, even if
    the sweeper is late.

    `pinned` (PostgreSQL claims): `queue_id = ANY(ARRAY[id])` instead of `=`, so that the
    planner does not treat the queue as a constant and, with ORDER BY queue_id first, must
    read the queue's range of ix_messages_receive_order. With `=` it walks the primary key
    and filters, stepping over every earlier message of other queues: 580 ms per receive
    behind 300,000 messages of another queue, against 0.3 ms (EXPLAIN ANALYZE)."""
    queue_id = sa.bindparam("queue", type_=sa.Integer)
    queue = m.queue_id == sa.any_(postgresql.array([queue_id])) if pinned else m.queue_id == queue_id
    now = sa.bindparam("now", type_=sa.BigInteger)
    return sa.and_(queue, m.state == AVAILABLE, sa.or_(m.ttbr_deadline.is_(None), m.ttbr_deadline > now))


def available_values(queue_id: int, now_us: int) -> dict[str, Any]:
    return {"queue": queue_id, "now": now_us}


class TargetShape(NamedTuple):
    """What a selector's statement looks like; its values are bound at execution."""

    seek: Seek
    by_message_id: bool
    by_correlation_id: bool
    skips_known: bool
    lock_rows: bool

    @classmethod
    def of(cls, selector: Selector, lock_rows: bool) -> TargetShape:
        skips_known = selector.seek is Seek.ARRIVED_AFTER and bool(selector.known)
        return cls(
            selector.seek,
            selector.message_id is not None,
            selector.correlation_id is not None,
            skips_known,
            lock_rows,
        )


@functools.cache
def select_target(shape: TargetShape) -> sa.Select[tuple[int]]:
    """The lookup ID of the one available message a selector of this shape addresses
    (values: target_values)."""
    statement = sa.select(m.lookup_id).where(available(pinned=shape.lock_rows))
    statement = _narrow(statement, shape).limit(1)
    if shape.lock_rows:
        statement = statement.with_for_update(skip_locked=True)
    return statement


def target_values(queue_id: int, selector: Selector, now_us: int) -> dict[str, Any]:
    values = available_values(queue_id, now_us)
    values |= {"message": selector.message_id, "correlation": selector.correlation_id}
    values["reference"] = selector.lookup_id
    if selector.seek is Seek.ARRIVED_AFTER:
        values |= arrived_after_values(selector.lookup_id)
        values["known"] = sorted(selector.known)
    return values


def queue_order(descending: bool = False, queue_first: bool = False) -> list[sa.ColumnElement[int]]:
    """ORDER BY for queue order; `queue_first` with a pinned queue (see available)."""
    columns = [m.queue_id, m.lookup_id] if queue_first else [m.lookup_id]
    return [column.desc() for column in columns] if descending else list(columns)


def _narrow(statement: sa.Select[tuple[int]], shape: TargetShape) -> sa.Select[tuple[int]]:
    forward, backward = queue_order(False, shape.lock_rows), queue_order(True, shape.lock_rows)
    if shape.by_message_id:
        statement = statement.where(m.message_id == sa.bindparam("message", type_=m.message_id.type))
    if shape.by_correlation_id:
        correlation_id = sa.bindparam("correlation", type_=m.correlation_id.type)
        statement = statement.where(m.correlation_id == correlation_id)
    reference = sa.bindparam("reference", type_=sa.BigInteger)
    seek = shape.seek
    if seek is Seek.CURRENT:
        return statement.where(m.lookup_id == reference)
    if seek is Seek.NEXT:
        return statement.where(m.lookup_id > reference).order_by(*forward)
    if seek is Seek.PREVIOUS:
        return statement.where(m.lookup_id < reference).order_by(*backward)
    if seek is Seek.LAST:
        return statement.order_by(*backward)
    if seek is Seek.ARRIVED_AFTER:
        statement = statement.where(arrived_after())
        if shape.skips_known:
            statement = statement.where(m.lookup_id.not_in(sa.bindparam("known", expanding=True)))
        return statement.order_by(*forward)
    return statement.order_by(*forward)


def arrived_after() -> sa.ColumnElement[bool]:
    """Messages enqueued after the counter stood at a value (arrived_after_values), one index
    range per priority."""
    return sa.or_(
        *(
            m.lookup_id.between(
                sa.bindparam(f"arrived_from_{priority}", type_=sa.BigInteger),
                lookup_id_for(priority, COUNTER_MASK),
            )
            for priority in range(MAX_PRIORITY + 1)
        )
    )


def arrived_after_values(counter: int) -> dict[str, int]:
    return {
        f"arrived_from_{priority}": lookup_id_for(priority, counter + 1)
        for priority in range(MAX_PRIORITY + 1)
    }


# -- receives ------------------------------------------------------------------------------

QUEUE_KEYS = sa.select(q.id, q.path_key).where(q.id.in_(sa.bindparam("queue_ids", expanding=True)))
"""The path keys of the queues `:queue_ids` as they are now."""

COUNT_AT_MOST = 64


def _queue_looked_at(pinned: bool) -> sa.Select[Any]:
    first = sa.select(m.lookup_id).where(available(pinned)).order_by(*queue_order(queue_first=pinned))
    some = first.limit(COUNT_AT_MOST).subquery()
    available_count = sa.select(sa.func.count()).select_from(some).scalar_subquery()
    return sa.select(q.path_key, available_count.label("available")).where(
        q.id == sa.bindparam("queue", type_=sa.Integer)
    )


QUEUE_LOOKED_AT_POSTGRESQL = _queue_looked_at(pinned=True)
"""The queue `:queue`'s path key now, and how many messages it has available
(available_values), counted up to COUNT_AT_MOST: one read, no lock, no write transaction.
Pinned and in queue order, as the claim reads them (see available): PostgreSQL's generic
plan otherwise scans the table, 200 ms behind 300,000 messages of another queue (EXPLAIN
ANALYZE)."""
QUEUE_LOOKED_AT_SQLITE = _queue_looked_at(pinned=False)

QUEUE_JOURNAL = "queue_journal"
"""TAKE_FIRST's column for its queue's journaling, as it is now."""


def _take_first() -> ReturningDelete[Any]:
    queue_id = sa.bindparam("queue", type_=sa.Integer)
    still_there = sa.exists().where(
        q.id == queue_id, q.path_key == sa.bindparam("key", type_=q.path_key.type)
    )
    first = (
        sa.select(m.lookup_id)
        .where(available(), still_there)
        .order_by(*queue_order())
        .limit(sa.bindparam("limit", type_=sa.Integer))
    )
    journal = sa.select(q.journal).where(q.id == m.queue_id).scalar_subquery().label(QUEUE_JOURNAL)
    return sa.delete(messages).where(m.lookup_id.in_(first)).returning(*messages.c, journal)


TAKE_FIRST_SQLITE = _take_first()
"""SQLite: delete the first `:limit` available messages (available_values) of the queue `:queue`
if its path key is still `:key`; return their rows and the queue's journaling. (PostgreSQL's
receives are claims: storage/claims.py.)"""


def _text_length(column: sa.ColumnElement[Any]) -> sa.ColumnElement[int]:
    return sa.func.coalesce(sa.func.length(column), 0)


FOOTPRINT = (
    m.body_size,
    sa.func.length(m.extension).label("extension_size"),
    (
        _text_length(m.label)
        + _text_length(m.response_queue)
        + _text_length(m.admin_queue)
        + _text_length(m.destination_queue)
    ).label("text_length"),
)
"""A message's Footprint: LENGTH counts a BLOB's (bytea's) bytes and a text's characters on
both databases."""


def _base64_size(size: sa.ColumnElement[int]) -> sa.ColumnElement[int]:
    return (size + 2) // 3 * 4


WEIGHT = (
    sa.bindparam("per_message", type_=sa.BigInteger)
    + _base64_size(m.body_size)
    + _base64_size(sa.func.coalesce(sa.func.length(m.extension), 0))
    + sa.bindparam("text_character_bytes", type_=sa.BigInteger) * FOOTPRINT[2]
)
"""qm.store.Budget.weigh of a message's row, in SQL (bound from a Budget: budget_values)."""


def budget_values(budget: Budget) -> dict[str, int]:
    return {
        "max_bytes": budget.max_bytes,
        "per_message": budget.per_message,
        "text_character_bytes": budget.text_character_bytes,
    }


def _first_sizes(pinned: bool) -> sa.Select[Any]:
    first = (
        sa.select(*FOOTPRINT)
        .where(available(pinned), m.lookup_id > sa.bindparam("after", type_=sa.BigInteger))
        .order_by(*queue_order(queue_first=pinned))
        .limit(sa.bindparam("limit", type_=sa.Integer))
    )
    return first.with_for_update(skip_locked=True) if pinned else first


FIRST_SIZES_SQLITE = _first_sizes(pinned=False)
"""The footprints of the first `:limit` available messages after lookup ID `:after`, in queue
order, in SQLite's write transaction (PostgreSQL's claim weighs them itself: WEIGHT)."""
FIRST_SIZES_READ = _first_sizes(pinned=False)
"""The footprints a browse looks at: a plain read, nothing locked."""


def footprints(found: Sequence[Any]) -> list[Footprint]:
    return [Footprint(int(row[0]), int(row[1]), int(row[2])) for row in found]
