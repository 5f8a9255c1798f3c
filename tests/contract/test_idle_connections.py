"""Pooled PostgreSQL connections that the server dropped: an idle one is pinged and replaced
before use; one in steady use is not pinged, so its next statement fails once and the whole
pool is recycled (storage/engine.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from storage.engine import make_engine

pytestmark = pytest.mark.anyio

ALWAYS = 0.0
NEVER = 3600.0


async def _select_one(engine: AsyncEngine) -> int:
    async with engine.connect() as connection:
        return int((await connection.execute(sa.text("SELECT 1"))).scalar_one())


def _drop_server_connections(database_url: str) -> None:
    """What a server restart does to the pool: every backend of the database ends (and the
    call waits until each has)."""
    url = sa.engine.make_url(database_url).set(drivername="postgresql+psycopg")
    admin = sa.create_engine(url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
    try:
        with admin.connect() as connection:
            connection.exec_driver_sql(
                "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
    finally:
        admin.dispose()


@pytest.fixture
async def postgres_url(database_url: str) -> AsyncIterator[str]:
    if not database_url.startswith("postgresql"):
        pytest.skip("a SQLite connection is a file handle: the server cannot drop it")
    yield database_url


async def test_an_idle_connection_dropped_by_the_server_is_replaced_before_use(postgres_url: str) -> None:
    engine = make_engine(postgres_url, ping_after_idle_s=ALWAYS)
    try:
        assert await _select_one(engine) == 1
        _drop_server_connections(postgres_url)
        assert await _select_one(engine) == 1
    finally:
        await engine.dispose()


async def test_a_busy_connection_is_not_pinged_and_one_failure_recycles_the_pool(postgres_url: str) -> None:
    engine = make_engine(postgres_url, ping_after_idle_s=NEVER)
    try:
        async with engine.connect() as first, engine.connect() as second:
            for connection in (first, second):
                await connection.execute(sa.text("SELECT 1"))
        _drop_server_connections(postgres_url)
        with pytest.raises(sa.exc.DBAPIError) as failure:
            await _select_one(engine)
        assert failure.value.connection_invalidated
        # the other pooled connection was dropped too, and is not used again
        assert await _select_one(engine) == 1
        assert await _select_one(engine) == 1
    finally:
        await engine.dispose()
