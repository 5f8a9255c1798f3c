"""Async engines for the embedded SQLite default and for PostgreSQL."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from storage.driver_sql import ENABLED

one_trip_cursors: Callable[[Any], None] | None
try:
    from storage.sqlite_driver import use_one_trip_cursors as one_trip_cursors
except ImportError:  # an SQLAlchemy whose aiosqlite adapter is not 2.1's: plain cursors
    one_trip_cursors = None

SQLITE_BUSY_TIMEOUT_MS = 30_000
PING_AFTER_IDLE_S = 1.0
"""A pooled PostgreSQL connection idle this long is pinged before use (see _ping_when_idle)."""
_IDLE_SINCE = "msmqgw_idle_since"
BEGUN_ON_DRIVER = "msmqgw_begun_on_driver"
"""Connection info key: the next SQLite transaction writes, and its caller issues BEGIN
IMMEDIATE on the driver connection itself (storage/driver_sql.begin), so none is issued here."""
SYNCHRONOUS = "msmqgw_synchronous"
"""Connection info key: PRAGMA synchronous for the next SQLite transaction (FULL unless set)."""
_SYNCHRONOUS_IN_FORCE = "msmqgw_synchronous_in_force"


def is_sqlite(url: str) -> bool:
    return sa.engine.make_url(url).get_backend_name() == "sqlite"


def make_engine(
    url: str, ping_after_idle_s: float = PING_AFTER_IDLE_S, driver_sql: bool = True
) -> AsyncEngine:
    """An engine configured for durable queue work on either database. `driver_sql`: the hot
    statements run on the driver connection (storage/driver_sql.py, and SQLite's one-trip
    cursors, storage/sqlite_driver.py); False: everything through SQLAlchemy, slower
    (MSMQGW_DRIVER_SQL=false: for an SQLAlchemy release the bypass does not know)."""
    if is_sqlite(url):
        engine = _sqlite_engine(url, one_trip=driver_sql)
    else:
        # As many pooled connections as the group commits and readers use at concurrency 64:
        # connections beyond the pool are opened and closed per use (a TCP and TLS handshake).
        engine = create_async_engine(url, pool_size=20, max_overflow=10)
        _ping_when_idle(engine, ping_after_idle_s)
    return engine if driver_sql else engine.execution_options(**{ENABLED: False})


def _ping_when_idle(engine: AsyncEngine, idle_s: float) -> None:
    """Ping a connection before use only when it has been idle `idle_s` or longer.

    A ping on every checkout (pool_pre_ping) is a round trip per transaction, about a tenth
    of a small transaction's CPU. A connection in steady use needs none: if the server went
    away meanwhile, the statement fails, SQLAlchemy sees the disconnect and recycles every
    connection of the pool. The ping catches the common case, a server restarted while the
    gateway was quiet, before it costs a request; a connection that fails it is replaced, and
    the rest of the pool with it."""
    dialect = engine.sync_engine.dialect

    @sa.event.listens_for(engine.sync_engine.pool, "checkin")
    def _idle_from_now(_dbapi_connection: Any, record: Any) -> None:
        record.info[_IDLE_SINCE] = time.monotonic()

    @sa.event.listens_for(engine.sync_engine.pool, "checkout")
    def _ping_if_idle(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        idle_since = record.info.get(_IDLE_SINCE)
        if idle_since is None or time.monotonic() - idle_since < idle_s:
            return
        try:
            alive = dialect.do_ping(dbapi_connection)
        except Exception as error:
            raise sa.exc.InvalidatePoolError(f"a pooled connection failed its ping: {error}") from error
        if not alive:
            raise sa.exc.InvalidatePoolError("a pooled connection failed its ping")


def ensure_sqlite_directory(url: str) -> None:
    database = sa.engine.make_url(url).database
    if database and database != ":memory:":
        Path(database).parent.mkdir(parents=True, exist_ok=True)


def _sqlite_engine(url: str, one_trip: bool) -> AsyncEngine:
    ensure_sqlite_directory(url)
    # A pool as large as PostgreSQL's: every connection beyond the pool is opened (a thread
    # and the PRAGMAs) and closed again per use, which showed in profiles at concurrency 64.
    engine = create_async_engine(
        url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000}, pool_size=20, max_overflow=10
    )

    @sa.event.listens_for(engine.sync_engine, "connect")
    def _configure(dbapi_connection: Any, _record: Any) -> None:
        if one_trip and one_trip_cursors is not None:
            one_trip_cursors(dbapi_connection)
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
        # Writers take the write lock at BEGIN (IMMEDIATE, issued by the store on the driver);
        # readers begin deferred, so under WAL they read a snapshot without waiting for a
        # writer's commit (and its fsync).
        wanted = connection.info.pop(SYNCHRONOUS, "FULL")
        begun_on_driver = connection.info.pop(BEGUN_ON_DRIVER, False)  # not left for the next one
        if connection.info.get(_SYNCHRONOUS_IN_FORCE, "FULL") != wanted:
            connection.exec_driver_sql(f"PRAGMA synchronous={wanted}")  # only outside a transaction
            connection.info[_SYNCHRONOUS_IN_FORCE] = wanted
        if not begun_on_driver:
            connection.exec_driver_sql("BEGIN")

    return engine


def watch_pool(engine: AsyncEngine, checked_out: Callable[[int], None]) -> None:
    """Call `checked_out` with +1 when a pooled connection is taken and -1 when it is given
    back (the gateway's gauge of database pool use, summed over its processes)."""

    @sa.event.listens_for(engine.sync_engine.pool, "checkout")
    def _taken(_dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        checked_out(1)

    @sa.event.listens_for(engine.sync_engine.pool, "checkin")
    def _given_back(_dbapi_connection: Any, _record: Any) -> None:
        checked_out(-1)


def pool_size(engine: AsyncEngine) -> int:
    """Connections the pool keeps (more are opened beyond it, up to its overflow)."""
    size = getattr(engine.sync_engine.pool, "size", None)
    return int(size()) if callable(size) else 0
