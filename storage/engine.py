"""Async engines for the embedded SQLite default and for PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

SQLITE_BUSY_TIMEOUT_MS = 30_000
WRITE_TRANSACTION = "msmqgw_write_transaction"
"""Connection info key: the next SQLite transaction writes (BEGIN IMMEDIATE)."""
SYNCHRONOUS = "msmqgw_synchronous"
"""Connection info key: PRAGMA synchronous for the next SQLite transaction (FULL unless set)."""
_SYNCHRONOUS_IN_FORCE = "msmqgw_synchronous_in_force"


def is_sqlite(url: str) -> bool:
    return sa.engine.make_url(url).get_backend_name() == "sqlite"


def make_engine(url: str) -> AsyncEngine:
    """An engine configured for durable queue work on either database."""
    if is_sqlite(url):
        return _sqlite_engine(url)
    # As many pooled connections as the group commits and readers use at concurrency 64:
    # connections beyond the pool are opened and closed per use (a TCP and TLS handshake).
    asyncpg = sa.engine.make_url(url).get_driver_name() == "asyncpg"
    engine = create_async_engine(url, pool_size=20, max_overflow=10, pool_pre_ping=not asyncpg)
    if asyncpg:
        _ping_on_checkout(engine)
    return engine


def _ping_on_checkout(engine: AsyncEngine) -> None:
    """pool_pre_ping in one round trip: SQLAlchemy's asyncpg ping wraps its query in BEGIN and
    ROLLBACK (for pgbouncer's transaction mode), three round trips before every transaction,
    a fifth of a sent message's. As with pre-ping, a connection that fails its ping (the
    server restarted, or ended the session) is replaced, and the rest of the pool with it."""

    @sa.event.listens_for(engine.sync_engine, "checkout")
    def _ping(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        try:
            dbapi_connection.run_async(_empty_query)
        except Exception as error:
            raise sa.exc.InvalidatePoolError(f"the connection failed its ping: {error}") from error


async def _empty_query(connection: Any) -> None:
    await connection.fetchrow(";")


def ensure_sqlite_directory(url: str) -> None:
    database = sa.engine.make_url(url).database
    if database and database != ":memory:":
        Path(database).parent.mkdir(parents=True, exist_ok=True)


def _sqlite_engine(url: str) -> AsyncEngine:
    ensure_sqlite_directory(url)
    # A pool as large as PostgreSQL's: every connection beyond the pool is opened (a thread
    # and the PRAGMAs) and closed again per use, which showed in profiles at concurrency 64.
    engine = create_async_engine(
        url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000}, pool_size=20, max_overflow=10
    )

    @sa.event.listens_for(engine.sync_engine, "connect")
    def _configure(dbapi_connection: Any, _record: Any) -> None:
        # Take over transaction control so BEGIN IMMEDIATE can be issued (below):
        # a deferred BEGIN that later writes can fail with SQLITE_BUSY under WAL.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=FULL")  # a commit is on disk before we answer
        cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    @sa.event.listens_for(engine.sync_engine, "begin")
    def _begin(connection: sa.Connection) -> None:
        # Writers take the write lock at BEGIN (IMMEDIATE); readers begin deferred, so under
        # WAL they read a snapshot without waiting for a writer's commit (and its fsync).
        wanted = connection.info.pop(SYNCHRONOUS, "FULL")
        if connection.info.get(_SYNCHRONOUS_IN_FORCE, "FULL") != wanted:
            connection.exec_driver_sql(f"PRAGMA synchronous={wanted}")  # only outside a transaction
            connection.info[_SYNCHRONOUS_IN_FORCE] = wanted
        connection.exec_driver_sql(
            "BEGIN IMMEDIATE" if connection.info.pop(WRITE_TRANSACTION, False) else "BEGIN"
        )

    return engine
