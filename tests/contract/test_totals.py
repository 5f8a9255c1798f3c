"""Queue totals (message count and bytes on each queue row) change in one place,
storage/totals.py, and after work of every kind they are what the queue's rows add up to."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import sqlalchemy as sa

from qm.clock import SettableClock
from qm.manager import QueueManager
from qm.model import JournalFlags, MessageProperties, QueueSettings
from qm.reading import QueueReader
from storage.store import SqlStore
from storage.tables import messages, queues
from tests.contract.support import store_message

pytestmark = pytest.mark.anyio

STORAGE = Path(__file__).parents[2] / "storage"
TOTALS = {"message_count", "byte_count"}


def _writes_totals(module: Path) -> list[int]:
    """Lines of statements that set a total (`.values(message_count=...)`); a new queue's row is
    inserted with zeros (rows.queue_values)."""
    tree = ast.parse(module.read_text())
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "values"
        and any(keyword.arg in TOTALS for keyword in node.keywords)
    ]


def test_only_the_totals_module_writes_queue_totals() -> None:
    writers = {module.name: _writes_totals(module) for module in STORAGE.glob("*.py")}
    assert {name for name, lines in writers.items() if lines} == {"totals.py"}, writers


async def _totals_and_rows(store: SqlStore) -> tuple[dict[int, tuple[int, int]], dict[int, tuple[int, int]]]:
    m = messages.c
    summed = sa.select(m.queue_id, sa.func.count(), sa.func.coalesce(sa.func.sum(m.body_size), 0)).group_by(
        m.queue_id
    )
    async with store.engine.connect() as connection:
        kept = {
            row.id: (row.message_count, row.byte_count) for row in await connection.execute(sa.select(queues))
        }
        found = {queue_id: (int(n), int(size)) for queue_id, n, size in await connection.execute(summed)}
    return kept, {queue_id: found.get(queue_id, (0, 0)) for queue_id in kept}


async def test_after_work_of_every_kind_each_queues_totals_are_what_its_rows_add_up_to(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    store = manager.store
    assert isinstance(store, SqlStore)
    admin = "DIRECT=OS:.\\private$\\admin"
    await manager.create_queue("private$/admin", QueueSettings())
    orders = await manager.create_queue("private$/orders", QueueSettings(journal=True))
    limited = await manager.create_queue("private$/limited", QueueSettings(quota_kb=1))
    await manager.create_queue("private$/held", QueueSettings(transactional=True))
    dead = MessageProperties(body=b"dead" * 10, journal=JournalFlags.DEADLETTER, time_to_be_received=5)
    acked = MessageProperties(body=b"acked", admin_queue=admin, acknowledge=0x0F)
    for properties in (MessageProperties(body=b"plain"), dead, acked):
        await manager.send("private$/orders", properties)
    await store.messages.enqueue(
        [
            store_message(manager, queue.id, MessageProperties(body=b"b" * 300))
            for queue in (orders, limited) * 3
        ]
    )
    transaction = await manager.begin_transaction()
    await manager.send("private$/held", MessageProperties(body=b"in"), transaction.id)
    await manager.commit(transaction.id)
    aborted = await manager.begin_transaction()
    await manager.send("private$/held", MessageProperties(body=b"out"), aborted.id)
    assert await reader.receive("private$/held", 0, aborted.id) is not None
    await manager.abort(aborted.id)
    await reader.receive("private$/orders", 0)
    await reader.receive_many("private$/orders", 0, 2)
    locked = await reader.receive_locked("private$/orders", 0, 10)
    assert locked is not None
    await reader.end_lock(locked[1], commit=False)
    clock.advance(10)
    await manager.expire_due()
    await manager.purge_queue("private$/limited")
    await manager.delete_queue("private$/held")
    kept, rows_add_up_to = await _totals_and_rows(store)
    assert kept == rows_add_up_to
    assert any(count for count, _ in kept.values())
