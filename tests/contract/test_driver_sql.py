"""The hot statements on the driver connection (storage/driver_sql.py): the same rows as
through SQLAlchemy, inside SQLAlchemy's transaction, and SQLAlchemy's errors when they fail."""

from __future__ import annotations

import asyncio
import sqlite3
from collections import Counter
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import anyio
import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from qm.clock import SettableClock
from qm.config import ManagerConfig
from qm.manager import QueueManager
from qm.model import MessageProperties, QueueSettings
from qm.reading import QueueReader
from qm.store import Budget, Claim, ClaimKind, Seek, Selector
from qm.wakeups import WakeUps
from storage import claims, driver_sql, rows, send_statements, statements
from storage.claims import Aim, Target
from storage.counters import allocate_counters
from storage.engine import make_engine
from storage.errors import is_unavailable
from storage.inserts import insert_messages
from storage.receiving import _hold, _take
from storage.statements import TargetShape
from storage.store import SqlStore
from storage.wakeups import LocalWakeUps
from tests.contract.support import store_message

pytestmark = pytest.mark.anyio

BODY = MessageProperties(body=b"driver", label="on the driver")
NEVER = 3600.0


class _RolledBack(Exception):
    """Ends a test's transaction with a rollback."""


def _typed(found: Sequence[Mapping[str, Any]]) -> list[list[tuple[str, type, Any]]]:
    """Rows with each value's type: True and 1 are equal, but the store relies on booleans."""
    return [[(key, type(value), value) for key, value in row.items()] for row in found]


async def _through_sqlalchemy(
    connection: AsyncConnection, statement: Any, values: Any
) -> list[dict[str, Any]]:
    return [dict(row) for row in (await connection.execute(statement, values)).mappings()]


async def _both_ways(store: SqlStore, statement: Any, values: Any) -> tuple[list[Any], list[Any]]:
    """The statement's rows through SQLAlchemy and on the driver, each in a transaction of
    its own that is rolled back (the statement may change rows)."""
    found: list[list[Any]] = []
    for run in (_through_sqlalchemy, driver_sql.fetch):
        with pytest.raises(_RolledBack):
            async with store.db.transaction() as connection:
                found.append(_typed(await run(connection, statement, values)))
                raise _RolledBack
    return found[0], found[1]


@pytest.fixture
def store(manager: QueueManager) -> SqlStore:
    assert isinstance(manager.store, SqlStore)
    return manager.store


async def _stocked(manager: QueueManager) -> list[int]:
    """Two queues, with messages; their IDs."""
    ids = []
    for path in ("private$/driver-a", "private$/driver-b"):
        queue = await manager.create_queue(path, QueueSettings(journal=path.endswith("a")))
        ids.append(queue.id)
        for _ in range(2):
            await manager.send(path, BODY)
    return ids


async def test_the_send_and_receive_statements_give_on_the_driver_what_they_give_through_sqlalchemy(
    manager: QueueManager, store: SqlStore, clock: SettableClock
) -> None:
    first, second = await _stocked(manager)
    room = send_statements.QUEUE_ROOM if store.db.sqlite else send_statements.QUEUE_ROOM_LOCKED
    take = statements.TAKE_FIRST_SQLITE if store.db.sqlite else claims.claim(Target(Aim.FIRST))
    key = (await manager.get_queue("private$/driver-a")).path.key
    now = rows.to_us(clock.now())
    cases: list[tuple[Any, dict[str, Any]]] = [
        (room, {"queue_ids": [first]}),
        (room, {"queue_ids": [first, second]}),  # another length of the IN list: another form
        (room, {"queue_ids": [second]}),
        (statements.QUEUE_KEYS, {"queue_ids": [first, second, second + 100]}),
        (take, statements.available_values(first, now) | {"key": key, "limit": 2}),
        (take, statements.available_values(first, now) | {"key": "private$/other", "limit": 1}),
        *_claims(store, first, now),
        *_postgresql_claims(store, first, key, now),
    ]
    for statement, values in cases:
        through_sqlalchemy, on_the_driver = await _both_ways(store, statement, values)
        assert on_the_driver == through_sqlalchemy
        assert through_sqlalchemy or values.get("key") == "private$/other"


def _claims(store: SqlStore, queue_id: int, now: int) -> list[tuple[Any, dict[str, Any]]]:
    """Claims of a selector's target (the first arrival that is not among known lookup IDs,
    an IN list): a receive and a two-phase lock."""
    selector = Selector(Seek.ARRIVED_AFTER, known=frozenset({1, 2}))
    shape = TargetShape.of(selector, lock_rows=not store.db.sqlite)
    values = statements.target_values(queue_id, selector, now)
    lock = Claim(ClaimKind.LOCK, "tag", rows.from_us(now + 1_000_000))
    return [(_take(shape, ClaimKind.RECEIVE), values), (_take(shape, ClaimKind.LOCK), values | _hold(lock))]


def _postgresql_claims(
    store: SqlStore, queue_id: int, key: str, now: int
) -> list[tuple[Any, dict[str, Any]]]:
    """PostgreSQL's receive claims of as many first messages as fit, and of a selector's
    target, each also in the form that waits for the queue's row (storage/claims.py)."""
    if store.db.sqlite:
        return []
    selector = Selector(Seek.ARRIVED_AFTER, known=frozenset({1, 2}))
    selected = Target(Aim.SELECTED, TargetShape.of(selector, lock_rows=True))
    budget = statements.budget_values(Budget(max_bytes=1, per_message=0, text_character_bytes=6))
    fitting = statements.available_values(queue_id, now) | {"key": key, "limit": 2} | budget
    return [
        (claims.claim(Target(Aim.FITTING)), fitting),
        (claims.claim(Target(Aim.FITTING), wait=True), fitting),
        (claims.claim(selected), statements.target_values(queue_id, selector, now) | {"key": key}),
        (
            claims.claim(Target(Aim.FIRST), wait=True),
            statements.available_values(queue_id, now) | {"key": key, "limit": 1},
        ),
    ]


async def test_counters_and_duplicate_keys_on_the_driver(store: SqlStore, manager: QueueManager) -> None:
    remember = send_statements.REMEMBER_SQLITE if store.db.sqlite else send_statements.REMEMBER_POSTGRESQL
    async with store.db.transaction() as connection:
        counters = await allocate_counters(store.db, connection, 3)
        assert counters == list(range(counters[0], counters[0] + 3))
        keys = [{"message_id": f"key-{index}", "received_at": 1} for index in range(3)]
        written = await driver_sql.insert_returning(connection, remember, keys[:2])
        assert sorted(row["message_id"] for row in written) == ["key-0", "key-1"]
        again = await driver_sql.insert_returning(connection, remember, keys)
        assert [row["message_id"] for row in again] == ["key-2"]
    async with store.db.transaction() as connection:
        [later] = await allocate_counters(store.db, connection, 1)
    assert later > counters[-1]


async def test_statements_on_the_driver_are_rolled_back_with_sqlalchemys_transaction(
    manager: QueueManager, store: SqlStore
) -> None:
    """The driver's first statement comes before any through SQLAlchemy: it must already be
    inside the transaction (asyncpg's adapter would begin only at its own first statement)."""
    queue = await manager.create_queue("private$/rolled-back", QueueSettings())
    with pytest.raises(_RolledBack):
        async with store.db.transaction() as connection:
            await insert_messages(store.db, connection, [store_message(manager, queue.id, BODY)])
            raise _RolledBack
    after = await manager.get_queue("private$/rolled-back")
    assert (after.message_count, after.byte_count) == (0, 0)
    assert await store.messages.browse(queue.id, 0, 10, manager.clock.now()) == []


async def test_a_committed_transaction_leaves_the_driver_outside_any_transaction(
    manager: QueueManager, store: SqlStore
) -> None:
    await manager.create_queue("private$/committed", QueueSettings())
    await manager.send("private$/committed", BODY)
    async with store.engine.connect() as connection:
        raw = await connection.get_raw_connection()
        if store.db.sqlite:
            assert raw.driver_connection is not None
            assert not raw.driver_connection.in_transaction
        else:
            assert raw.driver_connection is not None
            assert not raw.driver_connection.is_in_transaction()
    assert (await manager.get_queue("private$/committed")).message_count == 1


def _statements_through_sqlalchemy(store: SqlStore) -> Counter[str]:
    seen: Counter[str] = Counter()

    @sa.event.listens_for(store.engine.sync_engine, "before_cursor_execute")
    def count(*arguments: Any) -> None:
        seen[arguments[2]] += 1

    return seen


async def test_a_send_and_a_receive_run_no_statement_through_sqlalchemy(
    manager: QueueManager, store: SqlStore, reader: QueueReader
) -> None:
    await manager.create_queue("private$/hot", QueueSettings())
    await manager.send("private$/hot", BODY)
    assert await reader.receive("private$/hot", 0) is not None  # the queue is known from now on
    seen = _statements_through_sqlalchemy(store)
    await manager.send("private$/hot", BODY)
    await manager.deliver("private$/hot", BODY, duplicate_key="srmp-1")
    assert await reader.receive("private$/hot", 0) is not None
    assert await reader.receive("private$/hot", 0) is not None
    assert await reader.receive("private$/hot", 0) is None  # counts the queue: nothing there
    assert seen == Counter()


async def test_an_error_on_the_driver_is_the_error_sqlalchemy_raises(
    manager: QueueManager, store: SqlStore
) -> None:
    queue = await manager.create_queue("private$/twice", QueueSettings())
    row = rows.message_values(store_message(manager, queue.id, BODY), lookup_id=42, message_id="m")
    raised = []
    for run in (_insert_through_sqlalchemy, driver_sql.execute_many):
        with pytest.raises(sa.exc.DBAPIError) as caught:
            async with store.db.transaction() as connection:
                await run(connection, send_statements.INSERT_MESSAGES, [row])
                await run(connection, send_statements.INSERT_MESSAGES, [row])
        raised.append(caught.value)
    through_sqlalchemy, on_the_driver = raised
    assert type(on_the_driver) is type(through_sqlalchemy) is sa.exc.IntegrityError
    assert type(on_the_driver.orig) is type(through_sqlalchemy.orig)
    assert getattr(on_the_driver.orig, "sqlstate", None) == getattr(through_sqlalchemy.orig, "sqlstate", None)
    assert not is_unavailable(on_the_driver)
    assert not on_the_driver.connection_invalidated
    await manager.send("private$/twice", BODY)  # the connection serves the next transaction
    assert (await manager.get_queue("private$/twice")).message_count == 1


async def _insert_through_sqlalchemy(
    connection: AsyncConnection, statement: Any, values: Sequence[Mapping[str, Any]]
) -> None:
    await connection.execute(statement, list(values))


async def _deadlocked(store: SqlStore, first: int, second: int, run: Any) -> BaseException:
    """Two transactions lock one queue row each, then each other's: PostgreSQL aborts one."""
    holding = [asyncio.Event(), asyncio.Event()]

    async def lock(mine: int, theirs: int, held: asyncio.Event, other_held: asyncio.Event) -> None:
        async with store.db.transaction() as connection:
            await driver_sql.execute_text(connection, "SET LOCAL deadlock_timeout = '20ms'")
            await run(connection, send_statements.QUEUE_ROOM_LOCKED, {"queue_ids": [mine]})
            held.set()
            await other_held.wait()
            await run(connection, send_statements.QUEUE_ROOM_LOCKED, {"queue_ids": [theirs]})

    outcomes = await asyncio.gather(
        lock(first, second, holding[0], holding[1]),
        lock(second, first, holding[1], holding[0]),
        return_exceptions=True,
    )
    [failure] = [outcome for outcome in outcomes if outcome is not None]
    return failure


async def test_a_deadlock_on_the_driver_is_the_error_sqlalchemy_raises(
    manager: QueueManager, store: SqlStore
) -> None:
    if store.db.sqlite:
        pytest.skip("SQLite has one writer at a time: its transactions never wait for each other's rows")
    first, second = await _stocked(manager)
    through_sqlalchemy = await _deadlocked(store, first, second, _through_sqlalchemy)
    on_the_driver = await _deadlocked(store, first, second, driver_sql.fetch)
    assert isinstance(through_sqlalchemy, sa.exc.DBAPIError)
    assert type(on_the_driver) is type(through_sqlalchemy)
    assert isinstance(on_the_driver, sa.exc.DBAPIError)
    assert type(on_the_driver.orig) is type(through_sqlalchemy.orig)
    assert getattr(on_the_driver.orig, "sqlstate", None) == "40P01"
    assert not is_unavailable(on_the_driver)
    await manager.send("private$/driver-a", BODY)  # both connections serve again


@pytest.fixture
async def steady_manager(
    database_url: str, clock: SettableClock, manager_config: ManagerConfig, wakeups: WakeUps
) -> AsyncIterator[QueueManager]:
    """A manager whose pooled connections are never pinged before use."""
    store = SqlStore(make_engine(database_url, ping_after_idle_s=NEVER))
    queue_manager = QueueManager(store, wakeups, clock, manager_config)
    await queue_manager.start()
    yield queue_manager
    await store.close()


def _end_sessions(database_url: str, pid: int | None = None) -> None:
    url = sa.engine.make_url(database_url).set(drivername="postgresql+psycopg")
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
    which = "pid <> pg_backend_pid()" if pid is None else f"pid = {pid}"
    try:
        with admin.connect() as connection:
            connection.exec_driver_sql(
                f"SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity "
                f"WHERE datname = current_database() AND {which}"
            )
    finally:
        admin.dispose()


async def test_a_session_the_server_ended_fails_the_send_as_unavailable_and_the_next_send_is_served(
    steady_manager: QueueManager, database_url: str
) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("SQLite has no server sessions")
    await steady_manager.create_queue("private$/restart", QueueSettings())
    await steady_manager.send("private$/restart", BODY)
    await anyio.to_thread.run_sync(_end_sessions, database_url)
    with pytest.raises(sa.exc.DBAPIError) as caught:  # met at BEGIN, on the driver
        await steady_manager.send("private$/restart", BODY)
    assert caught.value.connection_invalidated
    assert is_unavailable(caught.value)
    await steady_manager.send("private$/restart", BODY)  # the pool was recycled
    assert (await steady_manager.get_queue("private$/restart")).message_count == 2


async def test_a_session_ended_within_a_transaction_fails_its_next_statement_as_unavailable(
    steady_manager: QueueManager, database_url: str
) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("SQLite has no server sessions")
    store = steady_manager.store
    assert isinstance(store, SqlStore)
    queue = await steady_manager.create_queue("private$/ended", QueueSettings())
    with pytest.raises(sa.exc.DBAPIError) as caught:
        async with store.db.transaction() as connection:
            [pid] = await driver_sql.scalars(connection, sa.select(sa.func.pg_backend_pid()), {})
            await anyio.to_thread.run_sync(_end_sessions, database_url, pid)
            await driver_sql.fetch(connection, statements.QUEUE_KEYS, {"queue_ids": [queue.id]})
    assert caught.value.connection_invalidated
    assert is_unavailable(caught.value)
    await steady_manager.send("private$/ended", BODY)
    assert (await steady_manager.get_queue("private$/ended")).message_count == 1


@contextmanager
def _write_lock_held(database_url: str) -> Iterator[None]:
    """Another process's writer holds SQLite's write lock."""
    path = sa.engine.make_url(database_url).database
    assert path is not None
    other = sqlite3.connect(path, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        yield
        other.execute("ROLLBACK")
    finally:
        other.close()


async def test_sqlite_busy_at_begin_on_the_driver_is_unavailable(database_url: str) -> None:
    if not database_url.startswith("sqlite"):
        pytest.skip("SQLite's write lock")
    store = SqlStore(make_engine(database_url))
    try:
        async with store.engine.connect() as connection:  # the pool's one connection, waiting briefly
            await connection.exec_driver_sql("PRAGMA busy_timeout=20")
        with _write_lock_held(database_url), pytest.raises(sa.exc.OperationalError) as caught:
            async with store.db.transaction():
                pass
        assert is_unavailable(caught.value)
        assert "locked" in str(caught.value.orig)
        async with store.db.transaction() as connection:  # the lock is free again: served
            assert await driver_sql.scalars(connection, statements.QUEUE_KEYS, {"queue_ids": [0]}) == []
    finally:
        await store.close()


def test_the_library_internals_the_driver_path_uses_are_still_there() -> None:
    """storage/driver_sql.py begins asyncpg's transaction through SQLAlchemy's adapter and
    raises errors through SQLAlchemy's own translation; an upgrade that renames them turns the
    driver path off (INTERNALS_PRESENT) and fails here by name."""
    assert driver_sql.internals_present() and driver_sql.INTERNALS_PRESENT


_NUMBERED = ("lookup_id", "message_id", "counters", "counter")
"""Columns that take fresh counters (a PostgreSQL sequence is not rolled back): compared by type."""


def _comparable(found: list[list[tuple[str, type, Any]]]) -> list[list[tuple[str, type, Any]]]:
    return [[(key, kind, None if key in _NUMBERED else value) for key, kind, value in row] for row in found]


@contextmanager
def _recorded(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, Any, Any]]]:
    """Every statement the store sends on the driver path in the block, with its values."""
    seen: list[tuple[str, Any, Any]] = []
    for name in ("fetch", "read", "scalars", "execute_many", "insert_returning"):
        run = getattr(driver_sql, name)

        async def recording(
            connection: Any, statement: Any, values: Any, _run: Any = run, _name: str = name
        ) -> Any:
            seen.append((_name, statement, values))
            return await _run(connection, statement, values)

        monkeypatch.setattr(driver_sql, name, recording)
    yield seen
    monkeypatch.undo()


async def _outcome(run: Any, store: SqlStore, kind: str, statement: Any, values: Any) -> Any:
    """The statement's rows (or its error's type and SQLSTATE) in a transaction rolled back."""
    try:
        with pytest.raises(_RolledBack):
            async with store.db.transaction() as connection:
                found = await run(connection, kind, statement, values)
                raise _RolledBack
    except sa.exc.DBAPIError as error:
        return type(error), getattr(error.orig, "sqlstate", None) or type(error.orig).__name__
    return _comparable(_typed(found))


def _first_columns(found: list[Any], statement: Any) -> list[Any]:
    """`scalars`' rows: the first column's value (the driver path does not name it)."""
    counting = statement in (send_statements.NEXT_COUNTERS, send_statements.RAISE_COUNTER)
    return [{"counter" if counting else "value": next(iter(row.values()))} for row in found]


async def _by_sqlalchemy(connection: AsyncConnection, kind: str, statement: Any, values: Any) -> list[Any]:
    many = kind in ("execute_many", "insert_returning")
    result = await connection.execute(statement, list(values) if many else values)
    found = [dict(row) for row in result.mappings()] if result.returns_rows else []
    return _first_columns(found, statement) if kind == "scalars" else found


async def _on_the_driver(connection: AsyncConnection, kind: str, statement: Any, values: Any) -> list[Any]:
    if kind == "execute_many":
        await driver_sql.execute_many(connection, statement, values)
        return []
    if kind == "insert_returning":
        return await driver_sql.insert_returning(connection, statement, values)
    found = await driver_sql.fetch(connection, statement, values)
    return _first_columns(found, statement) if kind == "scalars" else found


def _keyed(values: Any) -> bool:
    """Whether ENQUEUE_PLAIN's values carry a duplicate key (one, or one of an array)."""
    key = (
        values.get(send_statements.value_name(send_statements.DUPLICATE_KEY))
        if isinstance(values, dict)
        else None
    )
    return any(key) if isinstance(key, list) else key is not None


async def test_every_statement_the_store_sends_on_the_driver_gives_what_sqlalchemy_gives(
    manager: QueueManager, reader: QueueReader, store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store's work of every kind (plain, admitted, duplicate-keyed (one message, and a
    batch with a key repeated), transactional and multi-queue sends; plain, journaled,
    acknowledged, batched and two-phase receives; placed copies), recorded as it runs on the
    driver path; then each statement run again both ways, through SQLAlchemy and on the
    driver, on the same database: the same rows, or the same error (a key already there, a row
    gone)."""
    first, second = await _stocked(manager)
    admin = await manager.create_queue("private$/driver-admin", QueueSettings(quota_kb=1000))
    await manager.create_queue("private$/driver-x", QueueSettings(transactional=True))
    acknowledged = MessageProperties(
        body=b"ack", admin_queue="DIRECT=OS:.\\private$\\driver-admin", acknowledge=3
    )
    with _recorded(monkeypatch) as seen:
        await manager.send("private$/driver-b", BODY)
        await manager.send("private$/driver-admin", BODY)
        await manager.send("private$/driver-a", acknowledged)
        await manager.deliver("private$/driver-b", BODY, duplicate_key="{key}\\1")
        await manager.deliver("private$/driver-b", BODY, duplicate_key="{key}\\1")
        key_b = (await manager.get_queue("private$/driver-b")).path.key
        keyed = replace(store_message(manager, second, BODY), queue_key=key_b)
        await store.messages.enqueue(
            [replace(keyed, duplicate_key=key) for key in ("k/1", "k/1", None, "k/2")]
        )
        await store.messages.enqueue(
            [store_message(manager, queue_id, BODY) for queue_id in (second, first, admin.id) * 5]
        )
        transaction = await manager.begin_transaction()
        await manager.send("private$/driver-x", BODY, transaction.id)
        await manager.commit(transaction.id)
        for path in ("private$/driver-a", "private$/driver-b", "private$/driver-x"):
            await reader.receive(path, 0)
        await reader.receive_many("private$/driver-b", 0, 3)
        locked = await reader.receive_locked("private$/driver-a", 0, 10)
        assert locked is not None
        await reader.end_lock(locked[1], commit=True)
    assert len({id(statement) for _, statement, _ in seen}) >= 8, seen
    plain = (send_statements.ENQUEUE_PLAIN_ONE, send_statements.ENQUEUE_PLAIN)
    assert store.db.sqlite or {id(statement) for _, statement, values in seen if _keyed(values)} >= {
        id(statement) for statement in plain
    }, "the plain statement remembers duplicate keys, one message or several"
    for kind, statement, values in seen:
        through_sqlalchemy = await _outcome(_by_sqlalchemy, store, kind, statement, values)
        on_the_driver = await _outcome(_on_the_driver, store, kind, statement, values)
        assert on_the_driver == through_sqlalchemy, (kind, str(statement)[:200])


async def test_with_the_driver_path_off_every_statement_runs_through_sqlalchemy(
    database_url: str, clock: SettableClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MSMQGW_DRIVER_SQL=false (make_engine(..., driver_sql=False)): the same results, and no
    statement on the driver."""
    store = SqlStore(make_engine(database_url, driver_sql=False))
    manager = QueueManager(store, LocalWakeUps(), clock, ManagerConfig())
    try:
        await manager.start()
        await manager.create_queue("private$/plain", QueueSettings())
        driver = driver_sql._DRIVERS["aiosqlite" if store.db.sqlite else "asyncpg"]
        on_the_driver: list[str] = []
        rows_of = driver.rows

        async def recorded(self: Any, sql: str, values: Any) -> Any:
            on_the_driver.append(sql)
            return await rows_of(self, sql, values)

        monkeypatch.setattr(driver, "rows", recorded)
        sent = await manager.send("private$/plain", BODY)
        received = await QueueReader(manager).receive("private$/plain", 0)
        assert received is not None and received.lookup_id == sent.lookup_id
        await manager.create_queue("private$/admitted", QueueSettings(quota_kb=1000, journal=True))
        keyed = await manager.deliver("private$/admitted", BODY, duplicate_key="{key}\\1")
        assert keyed is not None
        assert await manager.deliver("private$/admitted", BODY, duplicate_key="{key}\\1") is None
        again = await QueueReader(manager).receive("private$/admitted", 0)
        assert again is not None and again.lookup_id == keyed.lookup_id
        assert on_the_driver == []
    finally:
        await store.close()
