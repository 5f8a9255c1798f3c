"""Redrive batches staged by the pipeline, applied by the gateway through the queue manager's
send path: priority order kept, each dead letter re-sent once however often the batch (or a
new batch with the same dead letters) is applied, a waiting receiver woken, a failed batch
saying what to do and leaving no staging rows."""

from __future__ import annotations

import asyncio

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

from qm.clock import SettableClock
from qm.errors import MqErrorCode
from qm.manager import QueueManager
from qm.model import JournalFlags, MessageProperties, QueueChanges, QueueSettings
from qm.reading import QueueReader
from storage.store import SqlStore
from tests.contract.support import WAIT_LIMIT_S, mq_error
from tests.contract.test_pg_wakeups import Process
from tests.contract.test_pg_wakeups import processes as processes  # the fixture
from tests.redrive_staging import scalar, stage

pytestmark = pytest.mark.anyio

ORDERS = "private$/orders"
ORDERS_KEY = "private$\\orders"
DEAD_LETTER_IDS = (
    "SELECT m.lookup_id FROM messages m JOIN queues q ON q.id = m.queue_id "
    "WHERE q.kind = 'system' AND q.name = 'deadletter' ORDER BY m.lookup_id"
)
TOTALS_DISAGREE = (
    "SELECT count(*) FROM queues q WHERE q.message_count <> "
    "(SELECT count(*) FROM messages m WHERE m.queue_id = q.id) OR q.byte_count <> "
    "(SELECT coalesce(sum(m.body_size), 0) FROM messages m WHERE m.queue_id = q.id)"
)


def _engine(manager: QueueManager) -> AsyncEngine:
    store = manager.store
    assert isinstance(store, SqlStore)
    return store.engine


async def _dead_letters(
    manager: QueueManager, clock: SettableClock, priorities: list[int], body: bytes | None = None
) -> list[int]:
    """Messages of these priorities sent to ORDERS (created if needed), expired into the
    dead-letter queue; the dead letters' lookup IDs."""
    if not await manager.list_queues() or ORDERS_KEY not in [
        q.path.pathname for q in await manager.list_queues()
    ]:
        await manager.create_queue(ORDERS, QueueSettings())
    for priority in priorities:
        properties = MessageProperties(
            body=body or f"p{priority}".encode(),
            label=f"priority {priority}",
            priority=priority,
            time_to_be_received=5,
            journal=JournalFlags.DEADLETTER,
        )
        await manager.send(ORDERS, properties)
    clock.advance(60)
    assert await manager.expire_due() == len(priorities)
    return await _dead_letter_ids(manager)


async def _dead_letter_ids(manager: QueueManager) -> list[int]:
    async with _engine(manager).connect() as connection:
        return [int(row[0]) for row in await connection.execute(sa.text(DEAD_LETTER_IDS))]


async def _drain(manager: QueueManager) -> list[str]:
    reader = QueueReader(manager)
    labels = []
    while (message := await reader.receive(ORDERS, 0)) is not None:
        labels.append(message.properties.label)
    return labels


async def test_a_batch_is_resent_in_priority_order_once(manager: QueueManager, clock: SettableClock) -> None:
    engine = _engine(manager)
    dead = await _dead_letters(manager, clock, [1, 6, 3])
    batch = await stage(engine, dead, ORDERS_KEY)
    second = await stage(engine, dead, ORDERS_KEY)  # the same dead letters, chosen twice
    applied = await manager.redrives.apply(batch)
    assert (applied.status, applied.resent_count, applied.skipped_count, applied.error) == (
        "applied",
        3,
        0,
        None,
    )
    assert await _dead_letter_ids(manager) == []  # the originals left the dead-letter queue
    assert await scalar(engine, "SELECT count(*) FROM redrive_staging WHERE batch_id = :b", b=batch) == 0
    assert await scalar(engine, "SELECT count(*) FROM redrive_ledger") == 3
    assert await scalar(engine, TOTALS_DISAGREE) == 0
    assert await manager.redrives.apply(batch) == applied  # a rerun adds nothing
    again = await manager.redrives.apply(second)  # nor another batch of the same dead letters
    assert (again.status, again.resent_count, again.skipped_count) == ("applied", 0, 3)
    assert await scalar(engine, "SELECT count(*) FROM redrive_staging") == 0
    assert await _drain(manager) == ["priority 6", "priority 3", "priority 1"]


async def test_a_message_sent_before_a_crash_is_not_sent_again(
    manager: QueueManager, clock: SettableClock
) -> None:
    """Sent, then the process stopped before the ledger row: the duplicate key stops the retry."""
    engine = _engine(manager)
    dead = await _dead_letters(manager, clock, [4])
    batch = await stage(engine, dead, ORDERS_KEY)
    [row] = await manager.store.redrives.staged(batch, 0, 10)
    from qm.redrives import duplicate_key, redriven_properties

    await manager.deliver(ORDERS, redriven_properties(row), duplicate_key=duplicate_key(dead[0]))
    assert (await manager.redrives.apply(batch)).resent_count == 1
    assert await _drain(manager) == ["priority 4"]
    assert await _dead_letter_ids(manager) == []


async def test_a_failed_batch_says_what_to_do_and_leaves_no_staging(
    manager: QueueManager, clock: SettableClock
) -> None:
    engine = _engine(manager)
    dead = await _dead_letters(manager, clock, [2, 5])
    batch = await stage(engine, dead, ORDERS_KEY)
    await manager.delete_queue(ORDERS)
    failed = await manager.redrives.apply(batch)
    assert failed.status == "failed" and failed.resent_count == 0
    assert (
        failed.error is not None and "was deleted" in failed.error and "run the redrive again" in failed.error
    )
    assert await scalar(engine, "SELECT count(*) FROM redrive_staging") == 0
    assert await _dead_letter_ids(manager) == dead  # nothing lost: still dead letters


async def test_a_throttled_batch_waits_for_the_next_pass(manager: QueueManager, clock: SettableClock) -> None:
    engine = _engine(manager)
    dead = await _dead_letters(manager, clock, [3])
    batch = await stage(engine, dead, ORDERS_KEY, staged_at_us=int(clock.now().timestamp() * 1_000_000))
    await manager.configure(None, True, None)
    waiting = await manager.redrives.apply(batch)
    assert waiting.status == "staged" and waiting.error is not None and "throttled" in waiting.error
    await manager.configure(None, False, None)
    assert await manager.redrives.apply_pending() == 1
    assert (await manager.redrives.batch(batch)).status == "applied"
    assert await _drain(manager) == ["priority 3"]


async def test_abandoned_staging_is_cleared(manager: QueueManager, clock: SettableClock) -> None:
    engine = _engine(manager)
    dead = await _dead_letters(manager, clock, [3])
    batch = await stage(engine, dead, ORDERS_KEY, status="staging", staged_at_us=0)
    await manager.redrives.apply_pending()
    found = await manager.redrives.batch(batch)
    assert found.status == "failed" and found.error is not None and "run the redrive again" in found.error
    assert await scalar(engine, "SELECT count(*) FROM redrive_staging") == 0
    with mq_error(MqErrorCode.MQ_ERROR_INVALID_HANDLE):
        await manager.redrives.batch("no-such-batch")


async def test_a_receiver_waiting_in_another_process_is_woken(
    processes: tuple[Process, Process], clock: SettableClock
) -> None:
    """PostgreSQL: the redrive's sends notify (the safety poll is far beyond the wait limit)."""
    applier, receiver = processes
    dead = await _dead_letters(applier.manager, clock, [3])
    batch = await stage(applier.store.engine, dead, ORDERS_KEY)
    waiting = asyncio.create_task(receiver.reader.receive(ORDERS, 120_000))
    await receiver.wakeups.until_waiting()
    await applier.manager.redrives.apply(batch)
    woken = await asyncio.wait_for(waiting, WAIT_LIMIT_S)
    assert woken is not None and woken.properties.label == "priority 3"


async def test_a_message_the_quota_refuses_is_dead_lettered_once(
    manager: QueueManager, clock: SettableClock
) -> None:
    """Refused by the target's quota, a redriven message is dead-lettered again (it asks for
    MQMSG_DEADLETTER): that copy replaces its original, so no message is there twice."""
    engine = _engine(manager)
    dead = await _dead_letters(manager, clock, [5, 5, 5], body=b"x" * 600)
    await manager.update_queue(ORDERS, QueueChanges(quota_kb=1))  # room for one of them
    failed = await manager.redrives.apply(await stage(engine, dead, ORDERS_KEY))
    assert failed.status == "failed" and failed.resent_count == 1
    assert failed.error is not None and "quota" in failed.error and "run the redrive again" in failed.error
    copies = (
        "SELECT m.label, m.message_class FROM messages m JOIN queues q ON q.id = m.queue_id "
        "WHERE q.kind = 'system' AND q.name = 'deadletter' ORDER BY m.lookup_id"
    )
    async with engine.connect() as connection:
        left = [tuple(row) for row in await connection.execute(sa.text(copies))]
    assert left == [("priority 5", 0xC002), ("priority 5", 0x8003)]  # one not tried, one refused
    assert await _drain(manager) == ["priority 5"]  # and one re-sent: three messages, once each
    assert await scalar(engine, "SELECT count(*) FROM redrive_staging") == 0
    assert await scalar(engine, TOTALS_DISAGREE) == 0
