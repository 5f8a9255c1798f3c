"""The SQL of sends, named: the room and counters of a send that needs admission, its insert
with the queues' totals, duplicate keys, and the one statement of a plain send on
PostgreSQL (ENQUEUE_PLAIN). Built once, values bound at execution (statements.py says why)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.dialects import sqlite as sqlite_dialect

from qm.disposal import Reason
from qm.model import NewMessage
from qm.rules import COUNTER_MASK
from storage import rows, sql_rules
from storage.tables import message_counter, messages, outbox, queue_manager, queues, received_message_ids
from storage.totals import onto_totals

m = messages.c
q = queues.c

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
QUEUE_ROOM_LOCKED = QUEUE_ROOM.with_for_update(of=queues, key_share=True)
"""QUEUE_ROOM locking the queues' rows (PostgreSQL; not the queue manager's row) FOR NO KEY
UPDATE, as the totals take them: FOR UPDATE would also wait for the key-share lock of any
insert referring to the queue (docs/store.md, "The one lock order")."""

MACHINE_BYTES = sa.select(sa.func.sum(q.byte_count))


def _queues_locked_with_targets(no_key: bool) -> sa.Select[Any]:
    chosen = sa.or_(
        q.id.in_(sa.bindparam("queue_ids", expanding=True)),
        q.path_key.in_(sa.bindparam("target_keys", expanding=True)),
    )
    return sa.select(q.id).where(chosen).order_by(q.id).with_for_update(of=queues, key_share=no_key)


QUEUES_LOCKED_WITH_TARGETS = _queues_locked_with_targets(no_key=False)
"""PostgreSQL: the rows of the queues `:queue_ids` and of the queues `:target_keys` names,
locked FOR UPDATE in one sweep in ID order: a deleted queue with the queues its messages place
into (FOR UPDATE: the row is deleted, and no insert referring to it commits after this)."""
QUEUES_LOCKED_WITH_TARGETS_NO_KEY = _queues_locked_with_targets(no_key=True)
"""QUEUES_LOCKED_WITH_TARGETS taking FOR NO KEY UPDATE, as the totals do (a purge)."""


def _counters(taken: sa.ColumnElement[Any], one: bool = False) -> sa.Select[Any]:
    """`:count` counters (`one`: a single one, with no series, so that a generic plan expects
    one row as the custom plans do; a series to a parameter is guessed at 1,000 rows)."""
    chosen = sa.select(taken).where(sa.func.pg_current_xact_id().is_not(None))
    if one:
        return chosen
    return chosen.select_from(
        sa.func.generate_series(sql_rules.constant(1), sa.bindparam("count", type_=sa.Integer))
    )


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


def _adding_to_totals(insert: sa.Insert) -> sa.Update:
    """The insert as a data-modifying CTE whose rows are summed per queue onto its totals."""
    return onto_totals(insert.returning(m.queue_id, m.body_size).cte("inserted"), sign=1)


def value_name(column: str) -> str:
    """The parameter that carries a message column's value (or array of values) in a statement
    with a data-modifying CTE: never a column's own name. Executed through SQLAlchemy with a
    parameter named like a column of `queues` (label, transactional, journal), the statement's
    UPDATE of the totals would also SET that column from it (SQLAlchemy takes the parameters'
    names as the columns a DML statement writes); only the driver path, which compiles without
    them, ran it right (tests/contract/test_driver_sql.py runs both)."""
    return f"new_{column}"


def values_named(row: dict[str, Any]) -> dict[str, Any]:
    """A message row's values under their value_name."""
    return {value_name(column): value for column, value in row.items()}


def _unbounded(type_: Any) -> Any:
    """A cast's type without its length: an explicit cast to VARCHAR(n) cuts a longer value
    silently, where the INSERT's own assignment to the column refuses it, as a plain value is."""
    return sa.String() if isinstance(type_, sa.String) else type_


def _arrays() -> sa.Insert:
    # Untyped values cast in SQL: asyncpg encodes the lists itself, and a typed ARRAY's bind
    # processor would walk every list in Python (a quarter of a one-message send's CPU).
    arrays = [
        sa.cast(sa.bindparam(value_name(column.name)), postgresql.ARRAY(_unbounded(column.type)))
        for column in m
    ]
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
column (`:new_lookup_id`, `:new_queue_id`, ... in `messages`' columns: value_name), inserted
in a data-modifying CTE whose rows are summed per queue. The UPDATE ... FROM may lock the queues' rows in any
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

# -- plain sends ---------------------------------------------------------------------------

PLAIN_SEND_COLUMNS = tuple(column.name for column in m if column.name != "lookup_id")
"""The columns ENQUEUE_PLAIN takes as arrays, one value per message, in message order
(`message_id` empty where the statement makes it from the counter, as insert_messages does)."""
MESSAGE_ID_PREFIX = "message_id_prefix"
"""ENQUEUE_PLAIN's value for the start of the message IDs it makes (rules.message_id_prefix)."""
DUPLICATE_KEY = "duplicate_key"
"""ENQUEUE_PLAIN's value (value_name) for each message's duplicate key (rules.duplicate_key)
or NULL; never one key twice in a statement."""
PLAIN_SEND_VALUES = (*PLAIN_SEND_COLUMNS, DUPLICATE_KEY)
"""ENQUEUE_PLAIN's values of each message (plain_values)."""


def plain_values(message: NewMessage) -> dict[str, Any]:
    """A message's PLAIN_SEND_VALUES: its row and its duplicate key."""
    return rows.message_values(message, 0, message.message_id) | {DUPLICATE_KEY: message.duplicate_key}


def _arrivals(
    stored: Any, queue_row: Any, source: sa.FromClause, *where: sa.ColumnElement[bool]
) -> sa.Insert:
    """An outbox row (reason ARRIVED, `departed_at` the arrival) for each message `source`
    gives (`stored`: its `messages` columns), with its queue as it is under the send's lock
    (`queue_row`: kind, name, journal_of, journal): what the arrival earns is placed after the
    commit (storage/outbox.py), so a send locks no queue's row but its destinations'."""
    columns = [c.key for c in messages.c]
    rows = (
        sa.select(
            sa.literal_column(f"'{Reason.ARRIVED.name}'", sa.String).label("reason"),
            stored.arrived_time,
            queue_row.kind,
            queue_row.name,
            queue_row.journal_of.is_not(None),
            queue_row.journal,
            *(stored[column] for column in columns),
        )
        .select_from(source)
        .where(*where)
    )
    names = ["reason", "departed_at", "queue_kind", "queue_name", "queue_is_journal", "queue_journal"]
    return sa.insert(outbox).from_select(names + columns, rows)


ARRIVALS_TO_OUTBOX = _arrivals(
    m,
    q,
    messages.join(queues, q.id == m.queue_id),
    m.lookup_id.in_(sa.bindparam("lookup_ids", expanding=True)),
)
"""PostgreSQL: the outbox rows of the messages `:lookup_ids` just inserted by an admitted send,
in its transaction (which holds their queues' rows)."""


SIZE = "size"
"""ENQUEUE_PLAIN's value for what its messages count against the quotas together
(rules.stored_size summed)."""
_all_queues = queues.alias("all_queues")
_MACHINE_STORED = sa.select(sa.func.coalesce(sa.func.sum(_all_queues.c.byte_count), 0)).scalar_subquery()
"""The queue manager's bytes (MACHINE_BYTES), read only where it has a quota (sql_rules.admits_all)."""


def _remembered_after(room: sa.CTE, keys: Any) -> sa.CTE:
    """The duplicate keys `keys` gives (`key`, `at`: the arrival), written in key order where
    not there yet, only once `room` holds the queue's row and admits the send: the admission
    transaction's lock order (queue rows, then keys sorted; docs/store.md), so that neither
    holds what the other waits for. Returns the keys written (those of messages stored)."""
    chosen = (
        sa.select(keys.c.key, keys.c.at)
        .where(keys.c.key.is_not(None), sa.exists(sa.select(room.c.id)))
        .order_by(keys.c.key)
    )
    remembered = received_message_ids.c
    insert = postgresql.insert(received_message_ids).from_select(
        [remembered.message_id, remembered.received_at], chosen
    )
    return insert.on_conflict_do_nothing().returning(remembered.message_id).cte("remembered")


def _enqueue_plain(single: bool, arriving: bool = False) -> sa.Select[Any]:
    queue_id = sa.bindparam("queue", type_=sa.Integer)
    room = (
        sa.select(q.id, *((q.kind, q.name, q.journal_of, q.journal) if arriving else ()))
        .join(queue_manager, sa.true())
        .where(
            q.id == queue_id,
            q.path_key == sa.bindparam("key", type_=q.path_key.type),
            sql_rules.admits_all(sa.bindparam(SIZE, type_=sa.BigInteger), _MACHINE_STORED),
        )
        .with_for_update(of=queues, key_share=True)  # FOR NO KEY UPDATE, as QUEUE_ROOM_LOCKED
        .cte("room")
    )
    counters = _counters(message_counter.next_value().label("counter"), one=single)
    numbered = counters.where(sa.exists(sa.select(room.c.id))).cte("numbered")  # none unless locked
    ranked = sa.select(
        numbered.c.counter, sa.func.row_number().over(order_by=numbered.c.counter).label("ordinal")
    ).cte("ranked")
    if single:  # plain values: asyncpg encodes them in about half the CPU of arrays
        values: dict[str, sa.ColumnElement[Any]] = {
            name: sa.cast(sa.bindparam(value_name(name), type_=m[name].type), _unbounded(m[name].type))
            for name in PLAIN_SEND_COLUMNS
        }
        key: sa.ColumnElement[Any] = sa.cast(sa.bindparam(value_name(DUPLICATE_KEY), type_=sa.Text), sa.Text)
        keys: Any = sa.select(key.label("key"), values["arrived_time"].label("at")).subquery("keys")
        source: sa.FromClause = ranked
    else:
        arrays = {
            name: sa.cast(sa.bindparam(value_name(name)), postgresql.ARRAY(_unbounded(m[name].type)))
            for name in PLAIN_SEND_COLUMNS
        }
        key_array = sa.cast(sa.bindparam(value_name(DUPLICATE_KEY)), postgresql.ARRAY(sa.Text))
        columns = (sa.column(name, m[name].type) for name in PLAIN_SEND_COLUMNS)
        arrived = (
            sa.func.unnest(*arrays.values(), key_array)
            .table_valued(*columns, sa.column("duplicate_key", sa.Text), with_ordinality="ordinal")
            .render_derived(name="arrived")
        )
        values = {name: arrived.c[name] for name in PLAIN_SEND_COLUMNS}
        key = arrived.c.duplicate_key
        keys = (
            sa.func.unnest(key_array, arrays["arrived_time"])
            .table_valued(sa.column("key", sa.Text), sa.column("at", sa.BigInteger))
            .render_derived(name="keys")
        )
        source = arrived.join(ranked, ranked.c.ordinal == arrived.c.ordinal)
    remembered = _remembered_after(room, keys)
    given = sa.func.nullif(values["message_id"], sa.literal_column("''", sa.Text))
    prefix = sa.bindparam(MESSAGE_ID_PREFIX, type_=sa.Text)
    values["message_id"] = sa.func.coalesce(given, sql_rules.message_id(prefix, ranked.c.counter))
    lookup_id = sql_rules.lookup_id(values["priority"], ranked.c.counter)
    fresh = sa.or_(key.is_(None), key.in_(sa.select(remembered.c.message_id)))
    rows = sa.select(lookup_id, *values.values()).select_from(source).where(fresh)
    inserted = (
        sa.insert(messages)
        .from_select(["lookup_id", *PLAIN_SEND_COLUMNS], rows)
        .returning(*(messages.c if arriving else (m.lookup_id, m.message_id, m.queue_id, m.body_size)))
        .cte("inserted")
    )
    totals = onto_totals(inserted, sign=1).cte("totals")
    stored_as = inserted.c.lookup_id.op("&")(sql_rules.constant(COUNTER_MASK)) == ranked.c.counter
    answer = (
        sa.select(ranked.c.ordinal, inserted.c.lookup_id, inserted.c.message_id)
        .select_from(ranked.outerjoin(inserted, stored_as))
        .order_by(ranked.c.ordinal)
        .add_cte(totals)
    )
    if not arriving:
        return answer
    arrivals = _arrivals(inserted.c, room.c, inserted.join(room, sa.true()))
    return answer.add_cte(arrivals.cte("arrivals"))


def enqueue_plain(values: Sequence[dict[str, Any]], arriving: bool) -> tuple[sa.Select[Any], dict[str, Any]]:
    """The form of ENQUEUE_PLAIN for a send of these messages (plain_values, in message order)
    and their values in it; the queue's and the send's (`:queue`, `:key`, `:count`, SIZE,
    MESSAGE_ID_PREFIX) to be added."""
    if len(values) == 1:
        return (ENQUEUE_PLAIN_ONE_ARRIVING if arriving else ENQUEUE_PLAIN_ONE), values_named(values[0])
    arrays = {value_name(name): [value[name] for value in values] for name in PLAIN_SEND_VALUES}
    return (ENQUEUE_PLAIN_ARRIVING if arriving else ENQUEUE_PLAIN), arrays


ENQUEUE_PLAIN_ONE = _enqueue_plain(single=True)
"""ENQUEUE_PLAIN for one message, its values plain (`:new_queue_id`, `:new_body`, ...: value_name)."""
ENQUEUE_PLAIN = _enqueue_plain(single=False)
ENQUEUE_PLAIN_ONE_ARRIVING = _enqueue_plain(single=True, arriving=True)
ENQUEUE_PLAIN_ARRIVING = _enqueue_plain(single=False, arriving=True)
"""ENQUEUE_PLAIN_ONE and ENQUEUE_PLAIN that also write an outbox row (_arrivals) for every
message stored, for a batch in which some arrival may place something (the dispatcher's
policy then decides, message by message)."""
"""PostgreSQL, one statement that is its own transaction: `:count` messages for one queue
(`:queue`, if its path key is still `:key`), stored only if every one of them is admitted
(rules.admit, one after the other: sql_rules.admits_all, with their sizes summed in `:size`
and the quotas and the throttle as stored): lock the queue's row, take the counters (the
transaction's ID first, as NEXT_COUNTERS), remember the duplicate keys (`:new_duplicate_key`),
insert the messages whose key was not there yet (or that have none) with the lookup and
message IDs rules.lookup_id_for and message_id_for would give (a message ID given is kept),
add them to the queue's totals. Returns a row per message in message order, its ordinal and
its lookup and message ID, or NULLs for a duplicate (its key remembered already, or committed
meanwhile by a concurrent copy: it took no room, since the whole send fits); no rows when it
stored and remembered nothing (then the transaction path decides, and answers duplicates as
such even when the queue is full). The values of the other columns are arrays, one per
PLAIN_SEND_COLUMNS.

The keys are written after the queue's row is held, in key order, as the admission
transaction writes them (docs/store.md, lock order): a send holding a key uncommitted holds
the row of the queue the key names, so a copy waits for that row first, and a key uncommitted
otherwise (a test's, the housekeeping pass forgetting it) makes the statement wait for that
transaction's end holding the queue's row. A statement that commits by itself waits here
where a receive's claim never does: a caller cancelled meanwhile leaves its message stored or
not, as a send whose answer was lost does, and the sender's retry is caught by the key
(stored: a duplicate; not: stored then)."""
