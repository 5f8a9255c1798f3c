"""Purges and queue deletions racing receives and MSMQ transactions, found by the two-process
stress (items 3, 5 and 8 of its reproductions), each orchestrated with pauses between the
removal's statements and pg_stat_activity, as in test_lock_order.py."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import storage.removal
from qm.clock import SettableClock
from qm.errors import MqError, MqErrorCode
from qm.manager import QueueManager
from qm.model import JournalFlags, Message, MessageProperties, QueueSettings
from qm.reading import QueueReader
from qm.streams import StreamPosition
from storage.store import SqlStore
from tests.contract.test_lock_order import (
    _postgres_only,
    _until_waiting,
    _within_limit,
    pause_after,
    receive_paused_after_its_claim,
)
from tests.contract.timer_support import everything

pytestmark = pytest.mark.anyio

PATH = "private$/orders"
ELSEWHERE = "private$/invoices"
DEAD = JournalFlags.DEADLETTER
RECEIPTS_URL = "http://client01/msmq/private$/order_queue$"


async def test_a_queue_deletion_and_a_receive_of_a_message_sent_after_its_hold_do_not_deadlock(
    manager: QueueManager,
    other_process: QueueManager,
    clock: SettableClock,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _postgres_only(database_url)
    journaled = await manager.create_queue(PATH, QueueSettings(journal=True))  # receives place a copy
    deleting_store = other_process.store
    assert isinstance(deleting_store, SqlStore) and isinstance(manager.store, SqlStore)
    hold = pause_after(monkeypatch, deleting_store.queues._removal, "_hold_messages")
    deleting = asyncio.create_task(other_process.delete_queue(PATH))
    await _within_limit(hold.reached.wait())
    await manager.send(PATH, MessageProperties(body=b"late", journal=DEAD))  # not held
    store = manager.store
    receiving, claim = await receive_paused_after_its_claim(monkeypatch, store, journaled, clock.now())
    hold.go_on.set()  # the claim has committed: the deletion finds the message gone, waits for nothing
    await _until_waiting(database_url, 1, deleting, receiving)
    claim.go_on.set()  # the journal copy, placed after the claim, finds its queue gone: dropped
    deleted, received = await _within_limit(asyncio.gather(deleting, receiving))
    assert [message.properties.body for message in received if isinstance(message, Message)] == [b"late"]
    assert deleted == 0  # (before the outbox, the copy was placed first, then deleted with the journal)
    assert await manager.store.queues.find_queue(journaled.path) is None


async def test_a_purge_and_a_receive_earning_final_receipts_into_a_lower_outgoing_queue_do_not_deadlock(
    manager: QueueManager,
    other_process: QueueManager,
    clock: SettableClock,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Suspect 5: the purge's pre-lock (_lock_removal_targets) takes the queue, the dead-letter
    # queues and the admin queues of the marked messages, not the outgoing queue a final
    # receipt (reference §4.4) of a marked stream message goes to. Its batch's own sweep
    # (Consequences.settle) then takes that outgoing queue, of a lower ID, after the queue.
    # A receive of a stream message that arrived after the purge's mark sweeps the outgoing
    # queue, then the queue.
    _postgres_only(database_url)
    store = manager.store
    assert isinstance(store, SqlStore) and store.policy is not None
    outgoing_path = store.policy.remote_queue(f"DIRECT={RECEIPTS_URL}")
    assert outgoing_path is not None
    outgoing = await store.outgoing.ensure_outgoing_queue(outgoing_path, clock.now())
    orders = await manager.create_queue(PATH, QueueSettings(transactional=True))
    assert outgoing.queue.id < orders.id

    def stream_message(ordinal: int) -> Any:
        position = StreamPosition(
            "uuid:stream-1", ordinal, ordinal - 1 or None, RECEIPTS_URL, "http://gw/msmq/private$/orders"
        )
        body = b"marked" if ordinal == 1 else b"late"
        return manager.deliver(PATH, MessageProperties(body=body, journal=DEAD), "single", stream=position)

    assert await stream_message(1) is not None
    purging_store = other_process.store
    assert isinstance(purging_store, SqlStore)
    mark = pause_after(monkeypatch, purging_store.queues._removal, "_mark_purged")
    lock = pause_after(monkeypatch, purging_store.queues._removal, "_lock_removal_targets")
    purging = asyncio.create_task(other_process.purge_queue(PATH))
    await _within_limit(mark.reached.wait())
    assert await stream_message(2) is not None  # not marked: the receive may take it
    receiving, claim = await receive_paused_after_its_claim(monkeypatch, store, orders, clock.now())
    mark.go_on.set()
    await _within_limit(lock.reached.wait())  # the purge holds the queue's row
    claim.go_on.set()  # the receive sweeps the outgoing queue, then waits for the queue's row
    await _until_waiting(database_url, 1, purging, receiving)
    lock.go_on.set()  # the purge's batch places the final receipt into the outgoing queue
    received, purged = await _within_limit(asyncio.gather(receiving, purging))
    assert [message.properties.body for message in received if isinstance(message, Message)] == [b"late"]
    assert purged == 1


async def test_a_message_received_in_a_transaction_whose_queue_is_deleted_has_one_outcome(
    manager: QueueManager, reader: QueueReader
) -> None:
    # Both stores. A deletion takes every message of the queue at once, those an open
    # transaction holds too ([MS-MQDMPR] 3.1.7.1.4), so it aborts the transactions holding
    # them, which are one unit: a message received in one is deleted unread (0xC000) and its
    # commit fails; one sent in it never reached the queue; one it received elsewhere is back.
    # Before: the deletion dead-lettered both and the commit still succeeded (the stress: 37
    # messages received by a committed transaction and dead-lettered with class 0xC000; 7 sent
    # in a transaction that then aborted, dead-lettered with 0xC000).
    await manager.create_queue(PATH, QueueSettings(transactional=True))
    await manager.create_queue(ELSEWHERE, QueueSettings(transactional=True))
    await manager.send(PATH, MessageProperties(body=b"held", journal=DEAD), "single")
    await manager.send(ELSEWHERE, MessageProperties(body=b"elsewhere"), "single")
    transaction = await manager.begin_transaction()
    assert await reader.receive(PATH, 0, transaction.id) is not None
    assert await reader.receive(ELSEWHERE, 0, transaction.id) is not None
    await manager.send(PATH, MessageProperties(body=b"sent", journal=DEAD), transaction.id)
    await manager.delete_queue(PATH)
    with pytest.raises(MqError) as refused:
        await manager.commit(transaction.id)
    assert refused.value.code is MqErrorCode.MQ_ERROR_TRANSACTION_SEQUENCE
    dead = await everything(reader, "system$;deadxact")
    assert [(copy.properties.body, copy.properties.message_class) for copy in dead] == [(b"held", 0xC000)]
    [back] = await everything(reader, ELSEWHERE)
    assert (back.properties.body, back.abort_count) == (b"elsewhere", 1)


async def test_a_queue_deletion_that_never_holds_every_message_gives_up_and_deletes_nothing(
    manager: QueueManager, reader: QueueReader, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As if a send landed between the deletion's hold of the messages and its lock of the
    # queue's row every time: it used to retry for ever (a livelock under a steady stream of
    # sends); now it gives up after CLOSE_ATTEMPTS with a clear error, and nothing changed.
    _postgres_only(database_url)
    await manager.create_queue(PATH, QueueSettings())
    await manager.send(PATH, MessageProperties(body=b"kept", journal=DEAD))
    attempts: list[int] = []

    async def never_all_held(*_arguments: Any) -> bool:
        attempts.append(1)
        return False

    monkeypatch.setattr(storage.removal, "_all_held", never_all_held)
    monkeypatch.setattr(storage.removal, "CLOSE_BACKOFF_S", 0.001)
    with pytest.raises(MqError) as refused:
        await _within_limit(manager.delete_queue(PATH))
    assert refused.value.code is MqErrorCode.MQ_ERROR_SERVICE_NOT_AVAILABLE
    assert "gave up" in str(refused.value)
    assert len(attempts) == storage.removal.CLOSE_ATTEMPTS
    assert [message.properties.body for message in await everything(reader, PATH)] == [b"kept"]
    assert await everything(reader, "system$;deadletter") == []
