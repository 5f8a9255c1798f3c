"""Single-statement reads (peek, browse, queue look-ups, the empty-queue check) run outside any
transaction: on PostgreSQL the statement is its own transaction, with no BEGIN or ROLLBACK
round trips before and after it."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncConnection

from qm.manager import QueueManager
from storage.store import SqlStore

pytestmark = pytest.mark.anyio


async def in_transaction_block(connection: AsyncConnection) -> bool:
    """PostgreSQL refuses a savepoint outside a transaction block (BEGIN ... COMMIT)."""
    try:
        await connection.exec_driver_sql("SAVEPOINT probe")
    except DBAPIError as error:
        assert "transaction blocks" in str(error)
        return False
    await connection.exec_driver_sql("RELEASE SAVEPOINT probe")
    return True


async def test_a_single_read_is_its_own_transaction_on_postgresql(
    manager: QueueManager, database_url: str
) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("SQLite reads begin no transaction on the server: there is none")
    store = manager.store
    assert isinstance(store, SqlStore)
    async with store.db.reading() as connection:
        assert not await in_transaction_block(connection)
        assert (await connection.execute(sa.text("SELECT 1"))).scalar_one() == 1  # still usable
    async with store.engine.connect() as connection:  # the check can tell: BEGIN comes first here
        assert await in_transaction_block(connection)
    async with store.db.transaction() as connection:  # and a transaction is still one
        assert await in_transaction_block(connection)
