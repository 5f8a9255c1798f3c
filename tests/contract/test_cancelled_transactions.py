"""A task cancelled inside a write transaction (a client hanging up, a shutdown, a timeout)
must leave nothing held: the transaction is rolled back and its connection returned before
the task ends, so another writer — another process on SQLite — gets the lock at once."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, create_async_engine

from qm.manager import QueueManager
from storage.store import SqlStore
from storage.tables import queue_manager

pytestmark = pytest.mark.anyio

CANCEL_HERE = "/* cancel here */"
"""A statement carrying this comment is cancelled while the driver runs it."""


def _touch(connection: AsyncConnection, marker: str = "") -> Awaitable[Any]:
    """A write: SQLite's write lock, PostgreSQL's lock on the queue manager's row."""
    statement = sa.update(queue_manager).values(counter=queue_manager.c.counter)
    return connection.execute(statement.prefix_with(marker) if marker else statement)


async def _cancelled_with_task_cancel(store: SqlStore) -> None:
    """One Task.cancel() while the transaction waits for something else."""
    inside = asyncio.Event()

    async def write_then_wait() -> None:
        async with store.db.transaction() as connection:
            await _touch(connection)
            inside.set()
            await asyncio.Event().wait()

    task = asyncio.create_task(write_then_wait())
    await inside.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def _cancelled_by_scope(store: SqlStore) -> None:
    """An anyio cancel scope (Starlette's request handling): every await after the
    cancellation is cancelled again, the transaction's clean-up included."""
    inside = anyio.Event()

    async def write_then_wait() -> None:
        async with store.db.transaction() as connection:
            await _touch(connection)
            inside.set()
            await anyio.sleep_forever()

    async with anyio.create_task_group() as group:
        group.start_soon(write_then_wait)
        await inside.wait()
        group.cancel_scope.cancel()


async def _cancelled_in_the_driver(store: SqlStore) -> None:
    """Cancelled while the driver runs the write, inside a scope as above."""

    def cancel(_conn: Any, _cursor: Any, statement: str, *_args: Any) -> None:
        if CANCEL_HERE in statement:
            scope.cancel()

    sa.event.listen(store.engine.sync_engine, "before_cursor_execute", cancel)
    try:
        with anyio.CancelScope() as scope:
            async with store.db.transaction() as connection:
                await _touch(connection)
                await _touch(connection, CANCEL_HERE)
        assert scope.cancelled_caught
    finally:
        sa.event.remove(store.engine.sync_engine, "before_cursor_execute", cancel)


CANCELLATIONS: dict[str, Callable[[SqlStore], Awaitable[None]]] = {
    "task-cancel": _cancelled_with_task_cancel,
    "cancel-scope": _cancelled_by_scope,
    "in-the-driver": _cancelled_in_the_driver,
}


@pytest.fixture
def store(manager: QueueManager) -> SqlStore:
    assert isinstance(manager.store, SqlStore)
    return manager.store


def _sqlite_write_lock_is_free(url: str) -> None:
    """Another process's view: BEGIN IMMEDIATE with a busy timeout far below any commit."""
    database = sa.engine.make_url(url).database
    assert database is not None
    other = sqlite3.connect(database, timeout=0.2, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
        other.execute("UPDATE queue_manager SET counter = counter")
        other.execute("ROLLBACK")
    finally:
        other.close()


async def _postgres_row_is_free(url: str) -> None:
    """Another process's view: the row the cancelled transaction wrote can be locked. The
    server bounds the wait (lock_timeout); a connection left idle in transaction fails it."""
    engine = create_async_engine(url, poolclass=sa.pool.NullPool)
    try:
        async with engine.begin() as connection:
            await connection.exec_driver_sql("SET LOCAL lock_timeout = '5s'")
            await _touch(connection)
    finally:
        await engine.dispose()


@pytest.mark.parametrize("cancellation", list(CANCELLATIONS))
async def test_a_cancelled_write_transaction_holds_nothing_afterwards(
    store: SqlStore, database_url: str, cancellation: str
) -> None:
    await CANCELLATIONS[cancellation](store)
    if store.engine.dialect.name == "sqlite":
        await anyio.to_thread.run_sync(_sqlite_write_lock_is_free, database_url)
    else:
        await _postgres_row_is_free(database_url)
    assert store.engine.pool.checkedout() == 0  # type: ignore[attr-defined]
    with anyio.fail_after(5):  # the in-process writers' queue is free too
        await store.messages.new_message_id()
