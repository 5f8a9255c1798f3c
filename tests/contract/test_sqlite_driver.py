"""SQLite statements in one trip to aiosqlite's thread (storage/sqlite_driver.py): the engine
uses the one-trip cursor, and it answers as the DB-API and SQLAlchemy expect."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from storage.engine import make_engine
from storage.sqlite_driver import OneTripConnection

pytestmark = pytest.mark.anyio

SCRATCH = sa.table("driver_check", sa.column("id"), sa.column("name"))


@pytest.fixture
async def engine(database_url: str) -> AsyncIterator[AsyncEngine]:
    if not database_url.startswith("sqlite"):
        pytest.skip("the one-trip cursor is SQLite's")
    engine = make_engine(database_url)
    async with engine.begin() as connection:
        await connection.exec_driver_sql(
            "CREATE TABLE driver_check (id INTEGER PRIMARY KEY, name TEXT UNIQUE)"
        )
    yield engine
    await engine.dispose()


async def test_the_sqlite_engine_hands_out_one_trip_connections(engine: AsyncEngine) -> None:
    async with engine.connect() as connection:
        raw = await connection.get_raw_connection()
        assert isinstance(raw.dbapi_connection, OneTripConnection)


async def test_rows_counts_and_inserted_ids_are_those_sqlite_gives(engine: AsyncEngine) -> None:
    async with engine.begin() as connection:
        inserted = await connection.execute(sa.insert(SCRATCH).values(name="a"))
        assert inserted.lastrowid == 1
        many = await connection.execute(sa.insert(SCRATCH), [{"name": "b"}, {"name": "c"}])
        assert many.rowcount == 2
        updated = await connection.execute(
            sa.update(SCRATCH).where(SCRATCH.c.id > 1).values(name=SCRATCH.c.name + "!")
        )
        assert updated.rowcount == 2
        rows = (
            await connection.execute(sa.select(SCRATCH.c.id, SCRATCH.c.name).order_by(SCRATCH.c.id))
        ).all()
        assert [tuple(row) for row in rows] == [(1, "a"), (2, "b!"), (3, "c!")]
        returned = await connection.execute(
            sa.delete(SCRATCH).where(SCRATCH.c.id == 3).returning(SCRATCH.c.name)
        )
        assert returned.scalars().all() == ["c!"]
        assert (await connection.execute(sa.select(SCRATCH.c.id).where(SCRATCH.c.id == 3))).first() is None


async def test_an_sqlite_error_is_sqlalchemys_error_and_the_transaction_can_go_on(
    engine: AsyncEngine,
) -> None:
    async with engine.connect() as connection:
        await connection.execute(sa.insert(SCRATCH).values(name="once"))
        with pytest.raises(sa.exc.IntegrityError):
            await connection.execute(sa.insert(SCRATCH).values(name="once"))
        await connection.rollback()
        assert (await connection.execute(sa.select(sa.func.count()).select_from(SCRATCH))).scalar_one() == 0


async def test_a_rollback_goes_to_sqlites_thread_only_inside_a_transaction(engine: AsyncEngine) -> None:
    """The pool rolls back each connection it takes back; after a commit that is no trip."""
    async with engine.connect() as connection:
        aiosqlite_connection = (await connection.get_raw_connection()).driver_connection
    assert aiosqlite_connection is not None
    trips: list[str] = []
    make_trip = aiosqlite_connection._execute

    async def noted(function: Any, *arguments: Any, **named: Any) -> Any:
        trips.append(getattr(function, "__name__", ""))
        return await make_trip(function, *arguments, **named)

    aiosqlite_connection._execute = noted
    async with engine.begin() as connection:
        await connection.execute(sa.insert(SCRATCH).values(name="kept"))
    assert "commit" in trips
    assert "rollback" not in trips
    async with engine.connect() as connection:
        await connection.execute(sa.insert(SCRATCH).values(name="dropped"))
        await connection.rollback()
    assert "rollback" in trips
    async with engine.connect() as connection:
        names = (await connection.execute(sa.select(SCRATCH.c.name))).scalars().all()
    assert names == ["kept"]
