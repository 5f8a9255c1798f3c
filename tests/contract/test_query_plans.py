"""PostgreSQL plans of statements that read one queue's messages, as the server runs them once
it caches a generic plan for a prepared statement (it may, after five executions, when that
plan does not look dearer than the custom ones): they must read the queue's range of
ix_messages_receive_order, even while another queue holds nearly every message of the table.
A scan of the table there costs 200 ms and more per call."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.compiler import SQLCompiler

from qm import rules
from qm.manager import QueueManager
from qm.model import MessageProperties, QueueSettings
from storage import claims, rows, send_statements, statements
from storage.claims import Aim, Target
from storage.store import SqlStore
from storage.tables import messages
from tests.contract.support import new_queue, store_message

pytestmark = pytest.mark.anyio

DEEP_QUEUE_MESSAGES = 20_000


async def _fill_one_queue(connection: AsyncConnection) -> None:
    """Copies of the one stored message under new lookup IDs, then fresh statistics."""
    columns = [column.name for column in messages.c if column.name != "lookup_id"]
    listed = ", ".join(columns)
    await connection.exec_driver_sql(
        f"INSERT INTO messages (lookup_id, {listed}) SELECT lookup_id + i, {listed} "
        f"FROM messages, generate_series(1, {DEEP_QUEUE_MESSAGES}) AS i"
    )
    await connection.exec_driver_sql("ANALYZE messages")


async def _generic_plan(
    connection: AsyncConnection, statement: sa.ClauseElement, values: dict[str, Any]
) -> str:
    """EXPLAIN of the statement's generic plan (PREPARE with every value a parameter)."""
    return await _plan(connection, statement, values, "force_generic_plan")


async def _plan(
    connection: AsyncConnection, statement: sa.ClauseElement, values: dict[str, Any], mode: str
) -> str:
    """EXPLAIN of the prepared statement's plan under plan_cache_mode `mode`."""
    compiled = statement.compile(dialect=connection.dialect)  # asyncpg's: $1, $2, ... in order
    assert isinstance(compiled, SQLCompiler)
    arguments = {**compiled.params, **values}
    literals = ", ".join(_literal(arguments[name]) for name in compiled.positiontup or ())
    await connection.exec_driver_sql(f"SET plan_cache_mode = {mode}")
    await connection.exec_driver_sql(f"PREPARE looked_at AS {compiled}")
    try:
        plan = await connection.exec_driver_sql(f"EXPLAIN EXECUTE looked_at({literals})")
        return "\n".join(row[0] for row in plan)
    finally:
        await connection.exec_driver_sql("DEALLOCATE looked_at")
        await connection.exec_driver_sql("RESET plan_cache_mode")


def _total_cost(plan: str) -> float:
    """The top node's estimated total cost: `(cost=startup..total rows=...)`."""
    return float(plan.split("..", 1)[1].split(" ", 1)[0])


def _literal(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, bytes):
        return f"'\\x{value.hex()}'"
    return f"'{value}'" if isinstance(value, str) else str(value)


READ_ONE_QUEUE = {
    "counting": statements.QUEUE_LOOKED_AT_POSTGRESQL,
    "claiming the first messages": claims.claim(Target(Aim.FIRST)),
    "claiming what fits": claims.claim(Target(Aim.FITTING)),
    "claiming while waiting for the queue": claims.claim(Target(Aim.FIRST), wait=True),
}


@pytest.mark.parametrize("reading", list(READ_ONE_QUEUE))
async def test_a_small_queue_beside_a_deep_one_is_read_through_the_queue_order_index(
    manager: QueueManager, database_url: str, reading: str
) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("the plan cache is PostgreSQL's")
    await new_queue(manager, "private$/deep")
    small = await manager.create_queue("private$/small", QueueSettings())
    await manager.send("private$/deep", MessageProperties(body=b"copied"))
    store = manager.store
    assert isinstance(store, SqlStore)
    values = statements.available_values(small.id, 0) | {"key": small.path.key, "limit": 1, "max_bytes": 1}
    async with store.engine.connect() as connection:
        await _fill_one_queue(connection)
        plan = await _generic_plan(connection, READ_ONE_QUEUE[reading], values)
        await connection.commit()
    assert "ix_messages_receive_order" in plan, plan
    assert "Seq Scan on messages" not in plan, plan


async def test_a_one_message_send_has_a_generic_plan_no_dearer_than_its_custom_plans(
    manager: QueueManager, database_url: str
) -> None:
    """PostgreSQL keeps a generic plan after five executions only where it does not look
    dearer than the custom ones; otherwise it plans every send anew."""
    if not database_url.startswith("postgresql"):
        pytest.skip("the plan cache is PostgreSQL's")
    queue = await manager.create_queue("private$/plain", QueueSettings())
    store = manager.store
    assert isinstance(store, SqlStore)
    sent = dataclasses.replace(
        store_message(manager, queue.id, MessageProperties(body=b"x" * 1024)), queue_key=queue.path.key
    )
    values = send_statements.values_named(send_statements.plain_values(sent)) | {
        "queue": queue.id,
        "key": queue.path.key,
        send_statements.MESSAGE_ID_PREFIX: rules.message_id_prefix(store.db.identity()),
        send_statements.SIZE: rules.stored_size(sent.properties),
    }
    async with store.engine.connect() as connection:
        generic = await _plan(connection, send_statements.ENQUEUE_PLAIN_ONE, values, "force_generic_plan")
        custom = await _plan(connection, send_statements.ENQUEUE_PLAIN_ONE, values, "force_custom_plan")
        await connection.rollback()
    assert _total_cost(generic) <= _total_cost(custom) * 1.1, (generic, custom)


async def test_housekeeping_finds_expired_locks_through_the_expiry_index_on_sqlite(
    manager: QueueManager, database_url: str
) -> None:
    """Not by walking the table in lookup-ID order: a second of CPU per pass (every second)
    behind a million messages."""
    if not database_url.startswith("sqlite"):
        pytest.skip("PostgreSQL's plans of this statement are chosen from statistics")
    store = manager.store
    assert isinstance(store, SqlStore)
    statement = store.housekeeping._expired_locks(rows.to_us(manager.clock.now()))
    async with store.engine.connect() as connection:
        compiled = statement.compile(dialect=connection.dialect, compile_kwargs={"literal_binds": True})
        plan = await connection.exec_driver_sql(f"EXPLAIN QUERY PLAN {compiled}")
        details = " ".join(str(row[-1]) for row in plan)
    assert "ix_messages_lock_expires_at" in details, details
