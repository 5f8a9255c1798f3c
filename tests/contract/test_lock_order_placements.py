"""The lock order of docs/decisions.md for transactions that place copies, acknowledgments and
receipts (MSMQ transaction commits, trigger rejections, final receipts, source journaling,
purges in batches): each test holds one queue row from another connection so that the two
transactions reach the conflicting locks in the order that would close a cycle, then lets
go. Locking a lower queue after a higher one, or meeting a message row outside the set the
transaction locked first, made PostgreSQL abort one side with "deadlock detected"."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from datetime import timedelta
from typing import Any

import pytest

from qm.clock import SettableClock
from qm.config import ManagerConfig
from qm.disposal import Reason
from qm.manager import QueueManager
from qm.model import JournalFlags, Message, MessageProperties, QueueSettings
from qm.paths import SystemQueue, outgoing_queue_path, system_queue_path
from qm.reading import QueueReader
from qm.triggers.model import Invocation, Outcome, ProcessingType, Trigger
from qm.triggers.walker import rejection
from storage.consequences import Consequences
from storage.receiving import ReceiveRequest
from tests.contract.support import counts, sql_store, store_message
from tests.contract.test_lock_order import (
    ADMIN_FORMAT_NAME,
    CONCURRENT,
    POS_ARRIVAL,
    _postgres_only,
    _queue_row_held,
    _until_waiting,
    _within_limit,
    pause_after,
)

pytestmark = pytest.mark.anyio

NEG_RECEIVE = 0x08
REMOTE_URL = "HTTP://remote.example/msmq/private$/far"
REMOTE = f"DIRECT={REMOTE_URL}"


@pytest.fixture
def manager_config() -> ManagerConfig:
    return ManagerConfig(outbound_hosts=("remote.example",))


async def test_a_commit_acknowledging_an_arrival_into_a_lower_queue_and_a_send_batch_do_not_deadlock(
    manager: QueueManager, reader: QueueReader, other_process: QueueManager, database_url: str
) -> None:
    # Was: TransactionStore._commit_rows: removed(received) locks orders' row
    # (its totals), then follow(arriving, ARRIVED) locks admin's (lower ID) for the arrival
    # acknowledgment: two sweeps. A send batch over admin and orders locks admin, then orders.
    _postgres_only(database_url)
    admin = await manager.create_queue("private$/admin", QueueSettings())
    orders = await manager.create_queue("private$/orders", QueueSettings(transactional=True))
    assert admin.id < orders.id
    stocking = await manager.begin_transaction()
    await manager.send("private$/orders", MessageProperties(body=b"stocked"), stocking.id)
    await manager.commit(stocking.id)
    transaction = await manager.begin_transaction()
    received = await reader.receive("private$/orders", 0, transaction.id)
    assert received is not None
    asking = MessageProperties(body=b"order", admin_queue=ADMIN_FORMAT_NAME, acknowledge=POS_ARRIVAL)
    await manager.send("private$/orders", asking, transaction.id)
    batch = [store_message(other_process, queue.id, CONCURRENT) for queue in (admin, orders)]
    async with _queue_row_held(database_url, orders.id):
        committing = asyncio.create_task(manager.commit(transaction.id))
        await _until_waiting(database_url, 1, committing)
        sending = asyncio.create_task(other_process.store.messages.enqueue(batch))
        await _until_waiting(database_url, 2, committing, sending)
    await _within_limit(asyncio.gather(committing, sending))
    assert await counts(manager, "private$/admin") == (2, len(b"concurrent"))  # the send's and the ack


async def test_a_source_journaled_send_batch_and_a_delivery_with_its_journal_copy_do_not_deadlock(
    manager: QueueManager, other_process: QueueManager, clock: SettableClock, database_url: str
) -> None:
    # Was: A send batch locks its queues (outgoing, orders) for the room, then the
    # computer journal's row (a system queue: lowest IDs) for an arrival's MQMSG_JOURNAL copy:
    # _lock_arrival_targets only takes acknowledgment targets. A delivery from the outgoing
    # queue of a journaled message sweeps journal then outgoing (Consequences._targets).
    _postgres_only(database_url)
    journaled = MessageProperties(body=b"journaled", journal=JournalFlags.JOURNAL)
    away = await manager.send(REMOTE, journaled)  # creates the outgoing queue
    outgoing = await manager.store.queues.find_queue(outgoing_queue_path(REMOTE_URL))
    assert outgoing is not None
    orders = await manager.create_queue("private$/orders", QueueSettings())
    journal = await manager.store.queues.find_queue(system_queue_path(SystemQueue.JOURNAL))
    assert journal is not None and journal.id < outgoing.id < orders.id
    batch = [
        store_message(other_process, outgoing.id, CONCURRENT),
        store_message(other_process, orders.id, journaled),
    ]
    async with _queue_row_held(database_url, orders.id):
        sending = asyncio.create_task(other_process.store.messages.enqueue(batch))
        await _until_waiting(database_url, 1, sending)
        delivering = asyncio.create_task(
            manager.store.outgoing.outgoing_finished(
                outgoing.id, away.lookup_id, Reason.DELIVERED, clock.now()
            )
        )
        await _until_waiting(database_url, 2, sending, delivering)
    sent, delivered = await _within_limit(asyncio.gather(sending, delivering))
    assert len(sent) == 2 and delivered
    assert (await counts(manager, journal.path.url_path))[0] == 2  # the delivery's and the arrival's copies


async def test_a_trigger_rejection_acknowledged_into_a_lower_queue_and_a_send_batch_do_not_deadlock(
    manager: QueueManager, other_process: QueueManager, clock: SettableClock, database_url: str
) -> None:
    # Was: TriggerStore.reject_message: removed([row], None) changes orders'
    # totals first, then place() locks the dead-letter queue and admin (lower IDs).
    _postgres_only(database_url)
    admin = await manager.create_queue("private$/admin", QueueSettings())
    orders = await manager.create_queue("private$/orders", QueueSettings())
    asking = MessageProperties(body=b"order", admin_queue=ADMIN_FORMAT_NAME, acknowledge=NEG_RECEIVE)
    message = await manager.send("private$/orders", asking)
    store = sql_store(manager)
    trigger = Trigger(
        str(uuid.uuid4()), "t", "private$/orders", orders.id, True, False, ProcessingType.PEEK, ()
    )
    await store.triggers.save_trigger(trigger, clock.now(), create=True)
    placements = rejection(manager.policy, orders, message, clock.now())
    assert {placement.target.key for placement in placements} >= {admin.path.key}
    entry = Invocation(
        trigger.id,
        "",
        "",
        message.lookup_id,
        message.message_id,
        clock.now(),
        Outcome.DEAD_LETTERED,
        0.0,
        0,
        None,
    )
    batch = [store_message(other_process, queue.id, CONCURRENT) for queue in (admin, orders)]
    async with _queue_row_held(database_url, orders.id):
        rejecting = asyncio.create_task(
            store.triggers.reject_message(orders.id, message.lookup_id, placements, clock.now(), entry)
        )
        await _until_waiting(database_url, 1, rejecting)
        sending = asyncio.create_task(other_process.store.messages.enqueue(batch))
        await _until_waiting(database_url, 2, rejecting, sending)
    rejected, sent = await _within_limit(asyncio.gather(rejecting, sending))
    assert rejected and len(sent) == 2


async def test_a_purge_and_a_receive_of_a_message_that_arrived_after_its_hold_do_not_deadlock(
    manager: QueueManager, clock: SettableClock, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Was: _hold_messages locks the rows its snapshot sees; a message committed
    # after it is not held. The purge's first batch (a dead-letter copy) locks the queue's row;
    # a receive claims the new message and waits for that row; the purge's bulk delete then
    # waits for the receive's message: the deadlock _hold_messages was meant to remove.
    _postgres_only(database_url)
    queue = await manager.create_queue("private$/busy", QueueSettings())
    await manager.send("private$/busy", MessageProperties(body=b"followed", journal=JournalFlags.DEADLETTER))
    store = sql_store(manager)
    mark = pause_after(monkeypatch, store.queues._removal, "_mark_purged")
    batches = pause_after(monkeypatch, store.queues._removal, "_remove_followed")
    purging = asyncio.create_task(store.queues.purge_queue(queue.id, clock.now()))
    await _within_limit(mark.reached.wait())
    await manager.send("private$/busy", MessageProperties(body=b"late"))  # commits: the row is free
    mark.go_on.set()
    await _within_limit(batches.reached.wait())  # the purge holds the queue's row now
    receiving = asyncio.create_task(
        store.messages.receiver._receive_batch([ReceiveRequest(queue, clock.now(), None)])
    )
    await _until_waiting(database_url, 1, receiving, purging)
    batches.go_on.set()
    received, purged = await _within_limit(asyncio.gather(receiving, purging))
    assert [m.properties.body for m in received if isinstance(m, Message)] == [b"late"]
    assert purged == 1
    assert await counts(manager, "private$/busy") == (0, 0)


async def test_a_negative_final_receipt_and_an_expiry_in_the_same_outgoing_queue_do_not_deadlock(
    manager: QueueManager, clock: SettableClock, database_url: str
) -> None:
    # Was: Consequences.concluded (OutgoingStore.outgoing_final_receipt) subtracts
    # from the outgoing queue's totals, then place() locks the transactional dead-letter queue
    # (a system queue, lower ID). An expiry in transit from the same outgoing queue sweeps
    # DEADXACT, then the outgoing queue.
    _postgres_only(database_url)
    store = sql_store(manager)
    outgoing = (
        await store.outgoing.ensure_outgoing_queue(outgoing_queue_path(REMOTE_URL), clock.now())
    ).queue
    deadxact = await store.queues.find_queue(system_queue_path(SystemQueue.DEADXACT))
    assert deadxact is not None and deadxact.id < outgoing.id
    asking = MessageProperties(body=b"sent", journal=JournalFlags.DEADLETTER)
    waiting = dataclasses.replace(store_message(manager, outgoing.id, asking), transactional=True)
    late = dataclasses.replace(
        store_message(manager, outgoing.id, asking),
        transactional=True,
        ttrq_deadline=clock.now() - timedelta(seconds=1),
    )
    [sent, _] = await store.messages.enqueue([waiting, late])
    assert sent.lookup_id is not None
    position = await store.outgoing.outgoing_stream_position(
        outgoing.id, sent.lookup_id, "uuid:stream-1", clock.now()
    )
    await store.outgoing.outgoing_stream_sent(sent.lookup_id, clock.now())  # the receiver took it
    async with _queue_row_held(database_url, outgoing.id):
        concluding = asyncio.create_task(
            store.outgoing.outgoing_final_receipt(
                position.stream_id, sent.message_id, Reason.EXPIRED, clock.now()
            )
        )
        await _until_waiting(database_url, 1, concluding)
        expiring = asyncio.create_task(store.outgoing.expire_in_transit(clock.now(), 10))
        await _until_waiting(database_url, 2, concluding, expiring)
    concluded, expired = await _within_limit(asyncio.gather(concluding, expiring))
    assert concluded and expired == 1
    assert (await counts(manager, deadxact.path.url_path))[0] == 2


async def test_a_purge_whose_later_batch_acknowledges_into_a_lower_queue_and_a_send_batch_do_not_deadlock(
    manager: QueueManager,
    other_process: QueueManager,
    clock: SettableClock,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Was: _remove_followed removes in batches, each with its own sweep
    # (Consequences.removed): the first locks the dead-letter queue and orders; a later batch's
    # negative acknowledgment then locks admin (lower ID) while orders is held. A send batch
    # over admin and orders locks admin, then waits for orders. _BATCH is 500; 1 here so that
    # two messages make two batches.
    _postgres_only(database_url)
    admin = await manager.create_queue("private$/admin", QueueSettings())
    orders = await manager.create_queue("private$/orders", QueueSettings())
    await manager.send("private$/orders", MessageProperties(body=b"first", journal=JournalFlags.DEADLETTER))
    nacked = MessageProperties(body=b"second", admin_queue=ADMIN_FORMAT_NAME, acknowledge=NEG_RECEIVE)
    await manager.send("private$/orders", nacked)
    monkeypatch.setattr("storage.removal._BATCH", 1)
    batches: list[list[bytes]] = []
    first_batch_done, go_on = asyncio.Event(), asyncio.Event()
    removed = Consequences.removed

    async def pausing_after_the_first_batch(self: Consequences, gone: Any, *arguments: Any) -> None:
        await removed(self, gone, *arguments)
        if gone:
            batches.append([bytes(row["body"]) for row in gone])
        if len(batches) == 1 and not first_batch_done.is_set():
            first_batch_done.set()
            await go_on.wait()

    monkeypatch.setattr(Consequences, "removed", pausing_after_the_first_batch)
    purging = asyncio.create_task(sql_store(manager).queues.purge_queue(orders.id, clock.now()))
    await _within_limit(first_batch_done.wait())
    assert batches == [[b"first"]]  # the purge holds orders' row now, and not admin's
    batch = [store_message(other_process, queue.id, CONCURRENT) for queue in (admin, orders)]
    sending = asyncio.create_task(other_process.store.messages.enqueue(batch))
    await _until_waiting(database_url, 1, sending, purging)
    go_on.set()
    purged, sent = await _within_limit(asyncio.gather(purging, sending))
    assert purged == 2 and len(sent) == 2
