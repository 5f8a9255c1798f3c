"""A plain send on PostgreSQL is one statement that is its own transaction
(send_statements.ENQUEUE_PLAIN): it stores what the transaction path would store, with the same
lookup and message IDs, and leaves to the transaction whatever needs admission or more."""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import replace
from typing import Any

import pytest
import sqlalchemy as sa

from qm import rules
from qm.errors import MqErrorCode
from qm.manager import QueueManager
from qm.model import MessageProperties, QueueChanges, QueueSettings
from qm.rules import COUNTER_MASK
from qm.store import EnqueueOutcome
from storage.tables import messages
from tests.contract.support import counts, mq_error, sql_store, store_message
from tests.contract.test_empty_queue_reads import statements_run

pytestmark = pytest.mark.anyio

PLAIN, ADMITTED = "private$/plain", "private$/admitted"
FULL = MessageProperties(
    body=b"full", label="every column", correlation_id=bytes(range(20)), app_specific=7, priority=5
)


@pytest.fixture(autouse=True)
def _postgresql_only(database_url: str) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("SQLite sends take the write lock in a transaction")


async def _rows(manager: QueueManager, path: str) -> list[dict[str, Any]]:
    queue = await manager.get_queue(path)
    async with sql_store(manager).engine.connect() as connection:
        statement = sa.select(messages).where(messages.c.queue_id == queue.id).order_by(messages.c.lookup_id)
        return [dict(row) for row in (await connection.execute(statement)).mappings()]


def _as_the_rules_give_them(row: dict[str, Any], manager: QueueManager) -> bool:
    counter = row["lookup_id"] & COUNTER_MASK
    lookup_id: int = rules.lookup_id_for(row["priority"], counter)
    message_id: str = rules.message_id_for(manager.guid, counter)
    return bool(row["lookup_id"] == lookup_id and row["message_id"] == message_id)


async def test_a_plain_send_is_one_statement(manager: QueueManager, monkeypatch: pytest.MonkeyPatch) -> None:
    await manager.create_queue(PLAIN, QueueSettings())
    await manager.send(PLAIN, FULL)
    with statements_run(manager, monkeypatch) as seen:
        sent = await manager.send(PLAIN, FULL)
    assert Counter({kind: n for kind, n in seen.items() if kind != "counts"}) == Counter({"WITH": 1}), seen
    assert await counts(manager, PLAIN) == (2, 2 * len(FULL.body))
    stored = await _rows(manager, PLAIN)
    assert stored[-1]["lookup_id"] == sent.lookup_id and stored[-1]["message_id"] == sent.message_id


async def test_a_send_to_a_queue_with_a_quota_is_one_statement(
    manager: QueueManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Admission is checked in the statement (sql_rules.admits_all): with room left, one
    round trip; without, nothing stored and the transaction refuses it."""
    await manager.create_queue(PLAIN, QueueSettings(quota_kb=1))
    await manager.configure(quota_kb=64, throttled=None)
    await manager.send(PLAIN, FULL)
    with statements_run(manager, monkeypatch) as seen:
        await manager.send(PLAIN, FULL)
    assert Counter({kind: n for kind, n in seen.items() if kind != "counts"}) == Counter({"WITH": 1}), seen
    with mq_error(MqErrorCode.MQ_ERROR_INSUFFICIENT_RESOURCES):
        await manager.send(PLAIN, replace(FULL, body=b"x" * 1024))
    assert await counts(manager, PLAIN) == (2, 2 * len(FULL.body))


async def test_a_batch_that_fits_only_in_part_is_admitted_message_by_message(manager: QueueManager) -> None:
    queue = await manager.create_queue(PLAIN, QueueSettings(quota_kb=1))
    half = MessageProperties(body=b"h" * 600)
    batch = [replace(store_message(manager, queue.id, half), queue_key=queue.path.key) for _ in range(2)]
    outcomes = [result.outcome for result in await sql_store(manager).messages.enqueue(batch)]
    assert outcomes == [EnqueueOutcome.ACCEPTED, EnqueueOutcome.QUEUE_QUOTA_EXCEEDED]
    assert await counts(manager, PLAIN) == (1, 600)


async def test_plain_sends_store_what_admitted_sends_store(manager: QueueManager) -> None:
    """One queue without a quota (one statement), one with (the transaction), the same
    messages one at a time and in one batch of concurrent sends: the same rows, IDs as
    rules.lookup_id_for and message_id_for give them."""
    await manager.create_queue(PLAIN, QueueSettings())
    await manager.create_queue(ADMITTED, QueueSettings(quota_kb=100_000))
    for path in (PLAIN, ADMITTED):
        await manager.send(path, FULL)
        await asyncio.gather(*(manager.send(path, FULL) for _ in range(12)))
    plain, admitted = await _rows(manager, PLAIN), await _rows(manager, ADMITTED)
    assert len(plain) == len(admitted) == 13
    assert all(_as_the_rules_give_them(row, manager) for row in plain + admitted)
    ignored = {"lookup_id", "message_id", "queue_id"}
    assert [{k: v for k, v in row.items() if k not in ignored} for row in plain] == [
        {k: v for k, v in row.items() if k not in ignored} for row in admitted
    ]
    lookup_ids = [row["lookup_id"] for row in plain]
    assert len(set(lookup_ids)) == 13
    assert await counts(manager, PLAIN) == (13, 13 * len(FULL.body))


async def test_a_quota_set_elsewhere_is_applied(manager: QueueManager, other_process: QueueManager) -> None:
    await manager.create_queue(PLAIN, QueueSettings())
    await manager.send(PLAIN, FULL)  # remembered here without a quota
    await other_process.update_queue(PLAIN, QueueChanges(quota_kb=0))
    with mq_error(MqErrorCode.MQ_ERROR_INSUFFICIENT_RESOURCES):
        await manager.send(PLAIN, FULL)
    assert await counts(manager, PLAIN) == (1, len(FULL.body))


async def test_a_machine_quota_set_elsewhere_is_applied(
    manager: QueueManager, other_process: QueueManager
) -> None:
    await manager.create_queue(PLAIN, QueueSettings())
    await manager.send(PLAIN, FULL)
    await other_process.configure(quota_kb=0, throttled=None)
    with mq_error(MqErrorCode.MQ_ERROR_INSUFFICIENT_RESOURCES):
        await manager.send(PLAIN, FULL)
    assert await counts(manager, PLAIN) == (1, len(FULL.body))


@pytest.mark.parametrize("count", [1, 9])
async def test_a_value_too_long_for_its_column_is_refused_not_cut(manager: QueueManager, count: int) -> None:
    """The plain statements cast their values to the columns' types without a length (a cast
    to VARCHAR(n) would cut silently), whether one message or an array per column."""
    queue = await manager.create_queue(PLAIN, QueueSettings())
    too_long = MessageProperties(body=b"x", label="l" * 300)
    batch = [
        replace(store_message(manager, queue.id, too_long), queue_key=queue.path.key) for _ in range(count)
    ]
    with pytest.raises(sa.exc.DBAPIError, match="too long"):
        await sql_store(manager).messages.enqueue(batch)
    assert await counts(manager, PLAIN) == (0, 0)
