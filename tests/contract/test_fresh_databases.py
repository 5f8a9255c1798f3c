"""The PostgreSQL database a test gets is as migrated, whatever the test before it left: every
table empty and every sequence at its start (tests/databases.py empties one database between
tests, by DELETE or, for a table of many rows, by TRUNCATE)."""

from __future__ import annotations

import asyncio

import pytest
import sqlalchemy as sa

from qm.access import AccessControl, AuditEntry
from qm.clock import SettableClock
from qm.config import ManagerConfig
from qm.manager import QueueManager
from qm.model import MessageProperties, QueueSettings
from qm.rights import QueueRight
from storage.engine import make_engine
from storage.schema import metadata
from storage.store import SqlStore
from storage.wakeups import LocalWakeUps
from tests.databases import LARGE_TABLE_ROWS, PostgresDatabases

pytestmark = pytest.mark.postgres


async def _leave_things_behind(database_url: str, copies: int) -> None:
    """Queues, messages (`copies` more of one), a grant, an audit entry, sequences used."""
    store = SqlStore(make_engine(database_url))
    try:
        clock = SettableClock()
        manager = QueueManager(store, LocalWakeUps(poll_interval=0.5), clock, ManagerConfig())
        await manager.start()
        await manager.create_queue("private$/left", QueueSettings())
        await manager.send("private$/left", MessageProperties(body=b"left"))
        access = AccessControl(store.access, clock, 1.0)
        await access.change_grant("someone", "private$/left", QueueRight.PEEK_MESSAGE, 0)
        await store.access.record_audit(AuditEntry(clock.now(), "someone", "local", "left", "", "allowed"))
        async with store.engine.begin() as connection:
            columns = ", ".join(
                column.name for column in metadata.tables["messages"].c if column.name != "lookup_id"
            )
            await connection.exec_driver_sql(
                f"INSERT INTO messages (lookup_id, {columns}) SELECT lookup_id + i, {columns} "
                f"FROM messages, generate_series(1, {copies}) AS i"
            )
            await connection.exec_driver_sql("SELECT nextval('message_counter')")
    finally:
        await store.close()


def _what_is_there(database_url: str) -> tuple[dict[str, int], list[str]]:
    """Rows of each table that has any, and the sequences used."""
    url = sa.engine.make_url(database_url).set(drivername="postgresql+psycopg")
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as connection:
            rows = {
                table.name: connection.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()
                for table in metadata.sorted_tables
            }
            used = connection.exec_driver_sql(
                "SELECT sequencename FROM pg_sequences WHERE schemaname = 'public' AND last_value IS NOT NULL"
            )
            return {name: count for name, count in rows.items() if count}, sorted(used.scalars())
    finally:
        engine.dispose()


@pytest.mark.parametrize("copies", [10, LARGE_TABLE_ROWS + 10], ids=["few rows", "many rows"])
def test_the_next_test_finds_the_database_as_migrated(
    postgres_databases: PostgresDatabases, copies: int
) -> None:
    with postgres_databases.database() as database_url:
        asyncio.run(_leave_things_behind(database_url, copies))
        left, used = _what_is_there(database_url)
        assert {"queues", "messages", "grants", "audit_log"} <= set(left), left  # the test can fail
        assert left["messages"] == copies + 1
        assert "message_counter" in used
    with postgres_databases.database() as database_url:
        assert _what_is_there(database_url) == ({}, [])
