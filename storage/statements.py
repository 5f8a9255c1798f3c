"""The hot-path SQL, named: which rows are available, how a selector finds one, and the
statements every send and receive runs.

The statements are built once, their values bound at execution (`sa.bindparam`): building
a Core statement and computing its cache key cost several times what executing it does,
and a statement object computes its cache key once (a profile of the gateway had a quarter
of its time in SQLAlchemy, mostly there; 500 -> 70 µs for the receive's DELETE)."""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.sql.dml import ReturningDelete

from qm.model import INFINITE, MAX_PRIORITY, Acknowledgment
from qm.rules import COUNTER_BITS, COUNTER_MASK, SEQUENCE_MASK, lookup_id_for
from qm.store import Seek, Selector
from storage.tables import AVAILABLE, message_counter, messages, queue_manager, queues, received_message_ids

m = messages.c
q = queues.c


def _constant(value: int) -> sa.ColumnElement[int]:
    """An integer of ours written into the SQL: a bound value would take the other operand's
    type (a counter's bigint mask bound as int32, a shift's count as bigint)."""
    return sa.literal_column(str(int(value)), sa.BigInteger)


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


# -- sends ---------------------------------------------------------------------------------

QUEUE_ROOM = (
    sa.select(
        q.id,
        q.path_key,
        q.byte_count,
        q.quota_kb,
        queue_manager.c.quota_kb.label("machine_quota_kb"),
        queue_manager.c.throttled,
    )
    .join(queue_manager, sa.true())
    .where(q.id.in_(sa.bindparam("queue_ids", expanding=True)))
    .order_by(q.id)
)
"""The destinations' bytes and quotas with the queue manager's quota and throttle, one
statement (`:queue_ids`)."""
QUEUE_ROOM_LOCKED = QUEUE_ROOM.with_for_update(of=queues)
"""QUEUE_ROOM locking the queues' rows (PostgreSQL; not the queue manager's row)."""

MACHINE_BYTES = sa.select(sa.func.sum(q.byte_count))


def _queues_locked_with_targets(no_key: bool) -> sa.Select[Any]:
    chosen = sa.or_(
        q.id.in_(sa.bindparam("queue_ids", expanding=True)),
        q.path_key.in_(sa.bindparam("target_keys", expanding=True)),
    )
    return sa.select(q.id).where(chosen).order_by(q.id).with_for_update(of=queues, key_share=no_key)


QUEUES_LOCKED_WITH_TARGETS = _queues_locked_with_targets(no_key=False)
"""PostgreSQL: the rows of the queues `:queue_ids` and of the queues `:target_keys` names,
locked FOR UPDATE in one sweep in ID order: a send batch's queues and the queues its arrivals
place into, before QUEUE_ROOM takes its part of them again; a deleted queue with the queues
its messages place into (no insert into it commits after this)."""
QUEUES_LOCKED_WITH_TARGETS_NO_KEY = _queues_locked_with_targets(no_key=True)
"""QUEUES_LOCKED_WITH_TARGETS taking FOR NO KEY UPDATE, as the totals do (a purge)."""


def _counters(taken: sa.ColumnElement[Any], one: bool = False) -> sa.Select[Any]:
    """`:count` counters (`one`: a single one, with no series, so that a generic plan expects
    one row as the custom plans do; a series to a parameter is guessed at 1,000 rows)."""
    chosen = sa.select(taken).where(sa.func.pg_current_xact_id().is_not(None))
    if one:
        return chosen
    return chosen.select_from(sa.func.generate_series(1, sa.bindparam("count", type_=sa.Integer)))


NEXT_COUNTERS = _counters(message_counter.next_value())
"""PostgreSQL: `:count` counters. The transaction takes its ID before its first counter (the
condition is evaluated once, before the series): the commit fence (CommitFence) sees every
allocator."""

COUNTERS = "counters"
"""QUEUE_ROOM_WITH_COUNTERS's column of the counters taken."""
QUEUE_ROOM_WITH_COUNTERS = QUEUE_ROOM_LOCKED.add_columns(
    _counters(sa.func.array_agg(message_counter.next_value())).scalar_subquery().label(COUNTERS)
)
"""QUEUE_ROOM_LOCKED that also takes `:count` counters (PostgreSQL sends): one round trip
instead of two. The counters are an uncorrelated subquery (an InitPlan, run once, the same
array on every row) that keeps NEXT_COUNTERS's condition: PostgreSQL may run it before it
locks the first row, and a row lock gives the transaction its ID only once the lock is
granted, so without the condition a send waiting for a queue's row would hold counters the
commit fence cannot see (tests/contract/test_send_statements.py)."""

RAISE_COUNTER = (
    sa.update(queue_manager)
    .values(counter=queue_manager.c.counter + sa.bindparam("count", type_=sa.BigInteger))
    .returning(queue_manager.c.counter)
)
"""SQLite: `:count` counters, up to the one returned."""

INSERT_MESSAGES = sa.insert(messages)

ADD_TO_TOTALS = (
    sa.update(queues)
    .where(q.id == sa.bindparam("queue", type_=sa.Integer))
    .values(
        message_count=q.message_count + sa.bindparam("number", type_=sa.BigInteger),
        byte_count=q.byte_count + sa.bindparam("bytes", type_=sa.BigInteger),
    )
)
"""A queue's message count and bytes (`:queue`) change by `:number` and `:bytes`."""


def _onto_totals(changed: sa.CTE, sign: int) -> sa.Update:
    """The rows of a data-modifying CTE (with their `queue_id` and `body_size`) counted and
    summed per queue onto its totals, added (sign 1) or subtracted (-1)."""
    added = (
        sa.select(
            changed.c.queue_id,
            (sa.func.count() * sign).label("number"),
            (sa.cast(sa.func.sum(changed.c.body_size), sa.BigInteger) * sign).label("bytes"),
        )
        .group_by(changed.c.queue_id)
        .subquery("added")
    )
    return (
        sa.update(queues)
        .where(q.id == added.c.queue_id)
        .values(message_count=q.message_count + added.c.number, byte_count=q.byte_count + added.c.bytes)
    )


def _adding_to_totals(insert: sa.Insert) -> sa.Update:
    """The insert as a data-modifying CTE whose rows are summed per queue onto its totals."""
    return _onto_totals(insert.returning(m.queue_id, m.body_size).cte("inserted"), sign=1)


def _unbounded(type_: Any) -> Any:
    """A cast's type without its length: an explicit cast to VARCHAR(n) cuts a longer value
    silently, where the INSERT's own assignment to the column refuses it, as a plain value is."""
    return sa.String() if isinstance(type_, sa.String) else type_


def _arrays() -> sa.Insert:
    # Untyped values cast in SQL: asyncpg encodes the lists itself, and a typed ARRAY's bind
    # processor would walk every list in Python (a quarter of a one-message send's CPU).
    arrays = [sa.cast(sa.bindparam(column.name), postgresql.ARRAY(_unbounded(column.type))) for column in m]
    arrived = (
        sa.func.unnest(*arrays)
        .table_valued(*(sa.column(column.name, column.type) for column in m))
        .render_derived(name="arrived")
    )
    return sa.insert(messages).from_select([column.name for column in m], sa.select(*arrived.c))


ROWS_AS_VALUES = 8
"""Rows up to which a merged insert is a VALUES list (insert_values_adding_to_totals), and
above which arrays (INSERT_ARRAYS_ADDING_TO_TOTALS). For one message, asyncpg encodes 40
values in about half the CPU it takes for 40 one-element arrays (0.15 ms a send, under
cProfile); arrays keep one form whatever the number of rows and stay under the driver's 32,767
values per statement (40 columns: 819 rows)."""


@functools.cache
def insert_values_adding_to_totals(count: int, keys: tuple[str, ...]) -> sa.Update:
    """INSERT_ARRAYS_ADDING_TO_TOTALS for `count` rows as a VALUES list, the values named
    `{column}_{row}` (driver_sql.numbered); `keys`: the columns given."""
    rows = [
        {name: sa.bindparam(f"{name}_{index}", type_=messages.c[name].type) for name in keys}
        for index in range(count)
    ]
    return _adding_to_totals(sa.insert(messages).values(rows))


INSERT_ARRAYS_ADDING_TO_TOTALS = _adding_to_totals(_arrays())
"""PostgreSQL: INSERT_MESSAGES and ADD_TO_TOTALS in one statement: the rows as one array per
column (`:lookup_id`, `:queue_id`, ... in `messages`' columns), inserted in a data-modifying
CTE whose rows are summed per queue. The UPDATE ... FROM may lock the queues' rows in any
order, so only for a transaction that holds them all already (the send after
QUEUE_ROOM_WITH_COUNTERS) or that changes one queue: elsewhere a second row could be locked
before a lower ID, against the lock order (tests/contract/test_lock_order.py)."""


def _remember(insert: Any) -> Any:
    column = received_message_ids.c.message_id
    return insert(received_message_ids).on_conflict_do_nothing().returning(column)


REMEMBER_POSTGRESQL: sa.Insert = _remember(postgresql.insert)
REMEMBER_SQLITE: sa.Insert = _remember(sqlite_dialect.insert)
"""Duplicate keys written unless present (one row of values per key); returns those written."""

FORGET = sa.delete(received_message_ids).where(
    received_message_ids.c.message_id.in_(sa.bindparam("keys", expanding=True))
)

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


def _take_first(pinned: bool) -> ReturningDelete[Any]:
    queue_id = sa.bindparam("queue", type_=sa.Integer)
    still_there = sa.exists().where(
        q.id == queue_id, q.path_key == sa.bindparam("key", type_=q.path_key.type)
    )
    first = (
        sa.select(m.lookup_id)
        .where(available(pinned), still_there)
        .order_by(*queue_order(queue_first=pinned))
        .limit(sa.bindparam("limit", type_=sa.Integer))
    )
    if pinned:
        first = first.with_for_update(skip_locked=True)
    journal = sa.select(q.journal).where(q.id == m.queue_id).scalar_subquery().label(QUEUE_JOURNAL)
    chosen = _one_of(first) if pinned else m.lookup_id.in_(first)
    return sa.delete(messages).where(chosen).returning(*messages.c, journal)


def _one_of(lookup_ids: sa.Select[Any]) -> sa.ColumnElement[bool]:
    """PostgreSQL: `lookup_id = ANY(ARRAY(subquery))`, the rows found through the primary key.
    With `lookup_id IN (subquery)` the generic plan, which cannot see `:limit`, expects a tenth
    of the table and joins against a scan of all of it; the plan cache would then keep
    planning every execution anew (tests/contract/test_query_plans.py)."""
    return m.lookup_id == sa.any_(sa.func.array(lookup_ids.scalar_subquery()))


TAKE_FIRST_POSTGRESQL = _take_first(pinned=True)
"""Delete the first `:limit` available messages (available_values) of the queue `:queue` if its
path key is still `:key`; return their rows and the queue's journaling. One statement: the
queue's check and the claim. It locks message rows only: the queues' totals are changed
afterwards, every queue row of the transaction locked in ascending ID order as sends lock
them (tests/contract/test_lock_order.py)."""
TAKE_FIRST_SQLITE = _take_first(pinned=False)
"""TAKE_FIRST_POSTGRESQL without pinning the queue in the plan."""


def _plain_receipt() -> sa.ColumnElement[bool]:
    """A received message whose removal can place nothing (qm.disposal.DisposalPolicy.
    consequences for Reason.RECEIVED), judged from its row alone and on the safe side: no
    receive acknowledgment it asks for (no admin queue, or no MQMSG_ACKNOWLEDGMENT_POS_RECEIVE:
    qm.acks.requested) and no incoming SRMP stream (a final receipt). The queue's own
    journaling is checked apart."""
    asks_on_receipt = m.acknowledge.op("&")(_constant(Acknowledgment.POS_RECEIVE)) != 0
    no_acknowledgment = sa.or_(m.admin_queue.is_(None), ~asks_on_receipt)
    return sa.and_(no_acknowledgment, m.srmp_stream_id.is_(None))


def _take_plain_first() -> sa.Select[Any]:
    queue_id = sa.bindparam("queue", type_=sa.Integer)
    key = sa.bindparam("key", type_=q.path_key.type)
    # The queue's row first, and without waiting: a statement that commits by itself must not
    # wait (for a send holding the row), or a caller cancelled meanwhile loses its message.
    queue_row = (
        sa.select(q.id)
        .where(q.id == queue_id, q.path_key == key, q.journal.is_(False))
        .with_for_update(key_share=True, skip_locked=True)
        .cte("queue_row")
    )
    unjournaled = sa.exists(sa.select(queue_row.c.id))
    first = (
        sa.select(m.lookup_id, _plain_receipt().label("plain"))
        .where(available(pinned=True), unjournaled)
        .order_by(*queue_order(queue_first=True))
        .limit(sa.bindparam("limit", type_=sa.Integer))
        .with_for_update(skip_locked=True)
        .cte("first_available")
    )
    taken = (
        sa.delete(messages)
        .where(_one_of(sa.select(first.c.lookup_id)), ~sa.exists().where(~first.c.plain), unjournaled)
        .returning(*messages.c)
        .cte("taken")
    )
    totals = _onto_totals(taken, sign=-1).cte("totals")
    queue_now = sa.select(q.path_key).where(q.id == queue_id).subquery("queue_now")
    some = sa.select(m.lookup_id).where(available(pinned=True)).order_by(*queue_order(queue_first=True))
    available_before = sa.select(sa.func.count()).select_from(some.limit(COUNT_AT_MOST).subquery())
    return (
        sa.select(
            queue_now.c.path_key.label(QUEUE_KEY),
            unjournaled.label(QUEUE_LOCKED),
            available_before.scalar_subquery().label(AVAILABLE_BEFORE),
            first.c.lookup_id.label(FIRST_LOCKED),
            *(taken.c[column.key] for column in messages.c),
        )
        .select_from(
            queue_now.outerjoin(first.outerjoin(taken, taken.c.lookup_id == first.c.lookup_id), sa.true())
        )
        .order_by(first.c.lookup_id)
        .add_cte(totals)
    )


QUEUE_KEY = "queue_key"
"""TAKE_PLAIN_FIRST's column for the queue's path key as it is now."""
QUEUE_LOCKED = "queue_locked"
"""TAKE_PLAIN_FIRST's column: whether it locked the queue's row (false: the queue journals,
or another transaction holds the row, and nothing was taken)."""
AVAILABLE_BEFORE = "available_before"
"""TAKE_PLAIN_FIRST's column for how many messages the queue had available when the statement
began (its snapshot: those it took included, and those another receiver is taking),
counted up to COUNT_AT_MOST."""
FIRST_LOCKED = "first_locked"
"""TAKE_PLAIN_FIRST's column for the lookup ID of each first available message it locked."""

TAKE_PLAIN_FIRST = _take_plain_first()
"""PostgreSQL, one statement that is its own transaction (autocommit, no BEGIN or COMMIT round
trips): lock the queue `:queue`'s row if its path key is still `:key`, it does not journal and
no other transaction holds it (never waiting: SKIP LOCKED), then its first `:limit` available
messages; if every one of them is plain (_plain_receipt), delete them and subtract them from
the queue's totals. Rows: none if the queue ID names no queue; else one per message locked
(FIRST_LOCKED; one row with NULL if none), each with the queue's key now (QUEUE_KEY),
whether its row was locked (QUEUE_LOCKED), what was available (AVAILABLE_BEFORE) and the
deleted message's columns, NULL when nothing was deleted: then nothing changed, and the
receive takes the transaction with its consequences. One queue row locked, so the lock-order
rule holds."""


# -- plain sends ---------------------------------------------------------------------------

_COMPUTED = ("lookup_id", "message_id")
PLAIN_SEND_COLUMNS = tuple(column.name for column in m if column.name not in _COMPUTED)
"""The columns ENQUEUE_PLAIN takes as arrays, one value per message, in message order."""
MESSAGE_ID_PREFIX = "message_id_prefix"
"""ENQUEUE_PLAIN's value for the start of the message IDs it makes (rules.message_id_prefix)."""


def _enqueue_plain(single: bool) -> sa.Select[Any]:
    queue_id = sa.bindparam("queue", type_=sa.Integer)
    room = (
        sa.select(q.id)
        .join(queue_manager, sa.true())
        .where(
            q.id == queue_id,
            q.path_key == sa.bindparam("key", type_=q.path_key.type),
            q.quota_kb == INFINITE,
            queue_manager.c.quota_kb == INFINITE,
            queue_manager.c.throttled.is_(False),
        )
        .with_for_update(of=queues)
        .cte("room")
    )
    counters = _counters(message_counter.next_value().label("counter"), one=single)
    numbered = counters.where(sa.exists(sa.select(room.c.id))).cte("numbered")  # none unless locked
    ranked = sa.select(
        numbered.c.counter, sa.func.row_number().over(order_by=numbered.c.counter).label("ordinal")
    ).subquery("ranked")
    if single:  # plain values: asyncpg encodes them in about half the CPU of arrays
        values: list[sa.ColumnElement[Any]] = [
            sa.cast(sa.bindparam(name, type_=m[name].type), _unbounded(m[name].type))
            for name in PLAIN_SEND_COLUMNS
        ]
        source: sa.FromClause = ranked
        priority: sa.ColumnElement[Any] = sa.bindparam("priority", type_=m.priority.type)
    else:
        arrays = [
            sa.cast(sa.bindparam(name), postgresql.ARRAY(_unbounded(m[name].type)))
            for name in PLAIN_SEND_COLUMNS
        ]
        columns = (sa.column(name, m[name].type) for name in PLAIN_SEND_COLUMNS)
        arrived = (
            sa.func.unnest(*arrays)
            .table_valued(*columns, with_ordinality="ordinal")
            .render_derived(name="arrived")
        )
        values = [arrived.c[name] for name in PLAIN_SEND_COLUMNS]
        source = arrived.join(ranked, ranked.c.ordinal == arrived.c.ordinal)
        priority = arrived.c.priority
    rank = sa.cast(sa.literal(MAX_PRIORITY) - priority, sa.BigInteger)
    counter = ranked.c.counter.op("&")(_constant(COUNTER_MASK))
    lookup_id = rank.op("<<")(_constant(COUNTER_BITS)).op("|")(counter)
    sequence = sa.cast(ranked.c.counter.op("&")(_constant(SEQUENCE_MASK)), sa.Text)
    message_id = sa.bindparam(MESSAGE_ID_PREFIX, type_=sa.Text).concat(sequence)
    rows = sa.select(lookup_id, message_id, *values).select_from(source)
    inserted = (
        sa.insert(messages)
        .from_select([*_COMPUTED, *PLAIN_SEND_COLUMNS], rows)
        .returning(m.lookup_id, m.message_id, m.queue_id, m.body_size)
        .cte("inserted")
    )
    totals = _onto_totals(inserted, sign=1).cte("totals")
    return (
        sa.select(inserted.c.lookup_id, inserted.c.message_id)
        .order_by(inserted.c.lookup_id.op("&")(_constant(COUNTER_MASK)))
        .add_cte(totals)
    )


ENQUEUE_PLAIN_ONE = _enqueue_plain(single=True)
"""ENQUEUE_PLAIN for one message, its values plain (`:queue_id`, `:body`, ...)."""
ENQUEUE_PLAIN = _enqueue_plain(single=False)
"""PostgreSQL, one statement that is its own transaction: `:count` messages for one queue
(`:queue`, if its path key is still `:key`), stored only if neither the queue nor the queue
manager has a quota and the queue manager is not throttled, so that every one of them is
admitted (rules.admit): lock the queue's row, take the counters (the transaction's ID
first, as NEXT_COUNTERS), insert with the lookup and message IDs rules.lookup_id_for and
message_id_for would give, add to the queue's totals. Returns each message's lookup and
message ID in message order, or no rows when it stored nothing (then the transaction path
decides). The values of the other columns are arrays, one per PLAIN_SEND_COLUMNS."""
