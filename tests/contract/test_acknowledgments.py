"""Acknowledgment messages (reference §5.2, §7.6, §7.14) placed in local admin queues."""

from __future__ import annotations

import uuid

import pytest

from qm.clock import SettableClock
from qm.config import ManagerConfig
from qm.cursors import CursorService
from qm.errors import MqErrorCode
from qm.manager import SINGLE_MESSAGE_TRANSACTION, QueueManager
from qm.model import INFINITE, Delivery, JournalFlags, Message, MessageProperties, QueueSettings
from qm.reading import QueueReader
from qm.store import Seek
from tests.contract.support import bodies_of, counts, mq_error, new_queue
from tests.contract.timer_support import (
    ACK_REACH_QUEUE,
    ACK_RECEIVE,
    DEADLETTER,
    NACK_Q_DELETED,
    NACK_Q_EXCEED_QUOTA,
    NACK_Q_PURGED,
    NACK_REACH_QUEUE_TIMEOUT,
    NACK_RECEIVE_TIMEOUT,
    everything,
    expire,
    msmq_message_id_bytes,
    only,
)

pytestmark = pytest.mark.anyio

PATH = "private$/orders"
ADMIN = "private$/admin"
ADMIN_FORMAT_NAME = "DIRECT=OS:.\\private$\\admin"
POS_ARRIVAL, POS_RECEIVE, NEG_ARRIVAL, NEG_RECEIVE = 0x01, 0x02, 0x04, 0x08
FULL_RECEIVE = NEG_ARRIVAL | POS_RECEIVE | NEG_RECEIVE
TRANSACTIONAL = QueueSettings(transactional=True)


def _asking(
    acknowledge: int, body: bytes = b"payload", admin_queue: str | None = ADMIN_FORMAT_NAME, **more: object
) -> MessageProperties:
    values: dict[str, object] = {
        "body": body,
        "label": "order 17",
        "body_type": 8,
        "priority": 5,
        "app_specific": 4711,
        "correlation_id": b"k" * 20,
        "response_queue": "DIRECT=OS:.\\private$\\replies",
        "admin_queue": admin_queue,
        "acknowledge": acknowledge,
        "delivery": Delivery.RECOVERABLE,
        "time_to_be_received": 3600,
    }
    return MessageProperties(**{**values, **more})  # type: ignore[arg-type]


async def _queues(manager: QueueManager, settings: QueueSettings | None = None) -> None:
    await new_queue(manager, PATH, settings)
    await new_queue(manager, ADMIN)


async def _acks(reader: QueueReader) -> list[Message]:
    return await everything(reader, ADMIN)


async def _assert_acknowledgment(
    manager: QueueManager, ack: Message, original: Message, message_class: int, negative: bool
) -> None:
    """Reference §7.14, property by property."""
    properties = ack.properties
    assert properties.message_class == message_class
    assert properties.correlation_id == msmq_message_id_bytes(original.message_id)
    assert properties.label == original.properties.label
    assert properties.app_specific == original.properties.app_specific
    assert properties.body == (original.properties.body if negative else b"")
    assert properties.response_queue is not None and properties.response_queue.upper().startswith("DIRECT=")
    designated = await manager.get_queue(properties.response_queue)  # the original destination
    assert designated.id == original.queue_id
    assert properties.priority == original.properties.priority
    assert properties.delivery is Delivery.EXPRESS
    assert properties.time_to_be_received == INFINITE and ack.ttbr_deadline is None
    assert properties.acknowledge == 0 and properties.admin_queue is None
    assert ack.message_id != original.message_id
    assert ack.message_id.startswith(f"{{{manager.guid}}}\\")
    assert ack.source_machine == manager.guid
    assert not ack.transactional


# -- positive acknowledgments -------------------------------------------------------------


async def test_arrival_is_acknowledged_at_once_with_reach_queue(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    await _queues(manager)
    sent = await manager.send(PATH, _asking(POS_ARRIVAL))
    ack = await only(reader, ADMIN)
    await _assert_acknowledgment(manager, ack, sent, ACK_REACH_QUEUE, negative=False)
    assert ack.sent_time == clock.now()
    assert ack.properties.body_type == 0
    assert await counts(manager, ADMIN) == (1, 0)
    await reader.receive(PATH, 0)
    assert len(await _acks(reader)) == 1  # POS_ARRIVAL does not ask for a receive acknowledgment


async def test_receive_is_acknowledged_by_every_kind_of_receive(
    manager: QueueManager, reader: QueueReader, cursors: CursorService
) -> None:
    await _queues(manager)
    sent = [await manager.send(PATH, _asking(POS_RECEIVE, body)) for body in (b"a", b"b", b"c", b"d", b"e")]
    assert await counts(manager, ADMIN) == (0, 0)  # nothing on arrival
    await reader.peek(PATH, 0)
    await reader.by_lookup_id(PATH, Seek.LAST)
    assert await counts(manager, ADMIN) == (0, 0)  # nor on peeks
    await reader.receive(PATH, 0)
    await reader.by_lookup_id(PATH, Seek.CURRENT, sent[1].lookup_id, receive=True)
    await reader.by_message_id(PATH, message_id=sent[2].message_id, receive=True)
    cursor = await cursors.open(PATH)
    await cursors.receive_current(cursor.id, 0)
    locked = await reader.receive_locked(PATH, 0, 30)
    assert locked is not None
    assert await counts(manager, ADMIN) == (4, 0)
    await reader.end_lock(locked[1], commit=True)
    acks = await _acks(reader)
    assert [ack.properties.correlation_id for ack in acks] == [
        msmq_message_id_bytes(message.message_id) for message in sent
    ]
    for ack, original in zip(acks, sent, strict=True):
        await _assert_acknowledgment(manager, ack, original, ACK_RECEIVE, negative=False)


async def test_a_two_phase_read_put_back_is_not_acknowledged(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    await _queues(manager)
    await manager.send(PATH, _asking(POS_RECEIVE))
    locked = await reader.receive_locked(PATH, 0, 30)
    assert locked is not None
    await reader.end_lock(locked[1], commit=False)
    await reader.receive_locked(PATH, 0, 30)
    clock.advance(30)
    await manager.release_expired()
    assert await counts(manager, ADMIN) == (0, 0)


async def test_a_transactional_receive_is_acknowledged_at_commit_only(
    manager: QueueManager, reader: QueueReader
) -> None:
    await _queues(manager, TRANSACTIONAL)
    sent = await manager.send(PATH, _asking(POS_RECEIVE), SINGLE_MESSAGE_TRANSACTION)
    aborted = await manager.begin_transaction()
    await reader.receive(PATH, 0, aborted.id)
    assert await counts(manager, ADMIN) == (0, 0)
    await manager.abort(aborted.id)
    assert await counts(manager, ADMIN) == (0, 0)
    committed = await manager.begin_transaction()
    await reader.receive(PATH, 0, committed.id)
    assert await counts(manager, ADMIN) == (0, 0)
    await manager.commit(committed.id)
    ack = await only(reader, ADMIN)
    await _assert_acknowledgment(manager, ack, sent, ACK_RECEIVE, negative=False)
    assert ack.properties.priority == 0  # transactional originals: 0


async def test_a_transactional_send_is_acknowledged_on_arrival_at_commit(
    manager: QueueManager, reader: QueueReader
) -> None:
    await _queues(manager, TRANSACTIONAL)
    transaction = await manager.begin_transaction()
    sent = await manager.send(PATH, _asking(POS_ARRIVAL), transaction.id)
    assert await counts(manager, ADMIN) == (0, 0)
    await manager.commit(transaction.id)
    await _assert_acknowledgment(manager, await only(reader, ADMIN), sent, ACK_REACH_QUEUE, negative=False)
    aborted = await manager.begin_transaction()
    await manager.send(PATH, _asking(POS_ARRIVAL), aborted.id)
    await manager.abort(aborted.id)
    assert await counts(manager, ADMIN) == (1, 0)


# -- negative acknowledgments -------------------------------------------------------------


async def test_expiry_purge_and_delete_are_acknowledged_negatively_with_the_body(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    await _queues(manager)
    expiring = await manager.send(PATH, _asking(NEG_RECEIVE, b"expiring", time_to_be_received=10))
    assert await expire(manager, clock, 10) == 1
    purged = await manager.send(PATH, _asking(NEG_RECEIVE, b"purged"))
    assert await manager.purge_queue(PATH) == 1
    deleted = await manager.send(PATH, _asking(NEG_RECEIVE, b"deleted"))
    assert await manager.delete_queue(PATH) == 1
    expiry_ack, purge_ack, delete_ack = await _acks(reader)
    # The original queue is gone now: check what the response queue named before that.
    assert expiry_ack.properties.message_class == NACK_RECEIVE_TIMEOUT
    assert purge_ack.properties.message_class == NACK_Q_PURGED
    assert delete_ack.properties.message_class == NACK_Q_DELETED
    for ack, original in ((expiry_ack, expiring), (purge_ack, purged), (delete_ack, deleted)):
        assert ack.properties.body == original.properties.body
        assert ack.properties.body_type == 8
        assert ack.properties.correlation_id == msmq_message_id_bytes(original.message_id)
        assert ack.properties.label == "order 17" and ack.properties.app_specific == 4711
        assert ack.properties.priority == 5 and ack.properties.delivery is Delivery.EXPRESS
        assert ack.properties.response_queue is not None
        assert ack.properties.response_queue.casefold().endswith("\\private$\\orders")
        assert ack.ttbr_deadline is None and ack.properties.acknowledge == 0
    assert await counts(manager, DEADLETTER) == (0, 0)  # NACKs do not need the DEADLETTER flag


async def test_a_negative_receive_acknowledgment_fires_on_a_locked_message_only_when_it_is_removed(
    manager: QueueManager, reader: QueueReader
) -> None:
    await _queues(manager)
    await manager.send(PATH, _asking(NEG_RECEIVE))
    locked = await reader.receive_locked(PATH, 0, 30)
    assert locked is not None
    await manager.purge_queue(PATH)
    assert await counts(manager, ADMIN) == (0, 0)
    await reader.end_lock(locked[1], commit=False)
    assert (await only(reader, ADMIN)).properties.message_class == NACK_Q_PURGED


async def test_a_received_message_gets_no_negative_acknowledgment(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    await _queues(manager)
    await manager.send(PATH, _asking(NEG_RECEIVE | NEG_ARRIVAL, time_to_be_received=10))
    await reader.receive(PATH, 0)
    await expire(manager, clock, 10)
    await manager.purge_queue(PATH)
    assert await counts(manager, ADMIN) == (0, 0)


async def test_a_quota_refusal_is_acknowledged_negatively_on_arrival(
    manager: QueueManager, reader: QueueReader
) -> None:
    await new_queue(manager, PATH, QueueSettings(quota_kb=0))
    await new_queue(manager, ADMIN)
    message_id = "{5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93}\\7001"  # assigned by its sender, as over SRMP
    with mq_error(MqErrorCode.MQ_ERROR_INSUFFICIENT_RESOURCES):
        await manager.send(PATH, _asking(NEG_ARRIVAL, message_id=message_id))
    with mq_error(MqErrorCode.MQ_ERROR_INSUFFICIENT_RESOURCES):
        await manager.send(PATH, _asking(NEG_RECEIVE | POS_ARRIVAL))  # asks for other classes only
    ack = await only(reader, ADMIN)
    assert ack.properties.message_class == NACK_Q_EXCEED_QUOTA
    assert ack.properties.correlation_id == bytes.fromhex("1a7e0c5b3d2f8e4c9a610d4f2b7c8e93591b0000")
    assert ack.properties.body == b"payload" and ack.properties.label == "order 17"
    assert ack.properties.priority == 5 and ack.ttbr_deadline is None
    assert ack.properties.response_queue is not None
    assert (await manager.get_queue(ack.properties.response_queue)).path.url_path == PATH


async def test_a_ttrq_that_ran_out_before_commit_is_acknowledged_negatively_on_arrival(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    await _queues(manager, TRANSACTIONAL)
    transaction = await manager.begin_transaction()
    late = await manager.send(PATH, _asking(NEG_ARRIVAL, time_to_reach_queue=5), transaction.id)
    await manager.send(PATH, _asking(NEG_ARRIVAL, b"in time"), transaction.id)
    clock.advance(5)
    await manager.commit(transaction.id)
    ack = await only(reader, ADMIN)
    await _assert_acknowledgment(manager, ack, late, NACK_REACH_QUEUE_TIMEOUT, negative=True)
    assert ack.properties.priority == 0


async def test_full_receive_asks_for_every_receive_acknowledgment_and_no_arrival(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    await _queues(manager)
    await manager.send(PATH, _asking(FULL_RECEIVE, b"received"))
    await manager.send(PATH, _asking(FULL_RECEIVE, b"expired", time_to_be_received=10))
    assert await counts(manager, ADMIN) == (0, 0)
    await reader.receive(PATH, 0)
    await expire(manager, clock, 10)
    classes = [ack.properties.message_class for ack in await _acks(reader)]
    assert classes == [ACK_RECEIVE, NACK_RECEIVE_TIMEOUT]


# -- who gets one -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "admin_queue",
    [
        "DIRECT=OS:.\\private$\\admin",
        "DIRECT=OS:localhost\\private$\\admin",
        "direct=os:LOCALHOST\\PRIVATE$\\Admin",
        "DIRECT=TCP:127.0.0.1\\private$\\admin",
        "DIRECT=http://localhost/msmq/private$/admin",
        "DIRECT=HTTPS://LOCALHOST:8443/msmq/private$/admin",
        "FormatName:DIRECT=OS:.\\private$\\admin",
        "MSMQ:DIRECT=OS:.\\private$\\admin",
        "private$\\admin",
        "private$/admin",
    ],
)
async def test_local_admin_queues_in_every_spelling_get_the_acknowledgment(
    manager: QueueManager, reader: QueueReader, admin_queue: str
) -> None:
    await _queues(manager)
    sent = await manager.send(PATH, _asking(POS_ARRIVAL, admin_queue=admin_queue))
    await _assert_acknowledgment(manager, await only(reader, ADMIN), sent, ACK_REACH_QUEUE, negative=False)


@pytest.mark.parametrize(
    "admin_queue",
    [
        "DIRECT=OS:client01\\private$\\admin",
        "DIRECT=TCP:10.1.2.3\\private$\\admin",
        "DIRECT=HTTP://client01.example.net/msmq/private$/admin",
        "MACHINE={0f0e0d0c-0b0a-4908-8706-050403020100};JOURNAL",
        "PRIVATE=0f0e0d0c-0b0a-4908-8706-050403020100\\00000001",
        "not a format name = at all",
        "DIRECT=OS:.\\private$\\no-such-queue",
    ],
)
async def test_remote_or_unknown_admin_queues_get_nothing_here(
    manager: QueueManager, reader: QueueReader, clock: SettableClock, admin_queue: str
) -> None:
    await _queues(manager)
    await manager.send(PATH, _asking(0x0F, admin_queue=admin_queue, time_to_be_received=10))
    await manager.send(PATH, _asking(0x0F, b"received", admin_queue=admin_queue))
    assert bodies_of([await reader.by_lookup_id(PATH, Seek.LAST, receive=True)]) == [b"received"]
    assert await expire(manager, clock, 10) == 1
    for queue in await manager.list_queues():
        assert queue.message_count == 0, queue.path.url_path


async def test_without_an_admin_queue_or_a_level_there_is_no_acknowledgment(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    await _queues(manager)
    await manager.send(PATH, _asking(0x0F, admin_queue=None, time_to_be_received=10))
    await manager.send(PATH, _asking(0, b"no level", time_to_be_received=10))
    await manager.send(PATH, _asking(0, b"received"))
    await reader.by_lookup_id(PATH, Seek.LAST, receive=True)
    assert await expire(manager, clock, 10) == 2
    assert await counts(manager, ADMIN) == (0, 0)


@pytest.mark.parametrize("manager_config", [ManagerConfig(local_host_names=frozenset({"gw01.example.net"}))])
async def test_the_local_host_names_setting_decides_what_is_local(
    manager: QueueManager, reader: QueueReader
) -> None:
    await _queues(manager)
    for admin_queue in (
        "DIRECT=OS:GW01.example.net\\private$\\admin",
        "DIRECT=http://gw01.example.net/msmq/private$/admin",
        "DIRECT=OS:.\\private$\\admin",
        "DIRECT=OS:localhost\\private$\\admin",  # no longer a name of this gateway
    ):
        await manager.send(PATH, _asking(POS_ARRIVAL, body=admin_queue.encode(), admin_queue=admin_queue))
    acks = await _acks(reader)
    assert [ack.properties.correlation_id for ack in acks] == [
        msmq_message_id_bytes(message.message_id) for message in (await everything(reader, PATH))[:3]
    ]


async def test_an_admin_queue_over_its_quota_drops_the_acknowledgment_silently(
    manager: QueueManager, reader: QueueReader
) -> None:
    await new_queue(manager, PATH)
    await new_queue(manager, ADMIN, QueueSettings(quota_kb=0))
    await manager.send(PATH, _asking(POS_ARRIVAL))  # an empty positive ack fits a zero quota
    await manager.send(PATH, _asking(NEG_RECEIVE, b"x" * 10))
    assert await manager.purge_queue(PATH) == 2  # the purge succeeds; its NACK (10 bytes) does not fit
    assert [ack.properties.message_class for ack in await _acks(reader)] == [ACK_REACH_QUEUE]


async def test_acknowledgments_are_never_acknowledged_and_never_expire(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    await _queues(manager)
    await manager.send(PATH, _asking(0x0F, time_to_be_received=10))
    assert await expire(manager, clock, 10) == 1
    assert await counts(manager, ADMIN) == (2, 7)  # reach queue (empty), receive timeout (the body)
    assert await expire(manager, clock, 10 * 365 * 86_400) == 0
    acks = [await reader.receive(ADMIN, 0), await reader.receive(ADMIN, 0)]
    assert [ack.properties.time_to_be_received for ack in acks if ack is not None] == [INFINITE] * 2
    assert await counts(manager, ADMIN) == (0, 0)  # receiving them produced nothing more


async def test_a_transactional_admin_queue_does_not_accept_acknowledgments(
    manager: QueueManager, reader: QueueReader
) -> None:
    await new_queue(manager, PATH)
    await new_queue(manager, ADMIN, TRANSACTIONAL)
    await manager.send(PATH, _asking(POS_ARRIVAL | POS_RECEIVE))
    await reader.receive(PATH, 0)
    assert await counts(manager, ADMIN) == (0, 0)


async def test_reading_journal_and_dead_letter_copies_is_not_acknowledged(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    await _queues(manager, QueueSettings(journal=True))
    await manager.send(PATH, _asking(POS_RECEIVE, b"journaled"))
    await reader.receive(PATH, 0)
    await manager.send(
        PATH, _asking(POS_RECEIVE, b"dead", journal=JournalFlags.DEADLETTER, time_to_be_received=1)
    )
    await expire(manager, clock, 1)
    assert await counts(manager, ADMIN) == (1, 0)  # the receive of "journaled"
    assert bodies_of([await reader.receive(f"{PATH};journal", 0)]) == [b"journaled"]
    assert bodies_of([await reader.receive(DEADLETTER, 0)]) == [b"dead"]
    assert await counts(manager, ADMIN) == (1, 0)


async def test_the_correlation_id_is_the_original_message_id_as_msmq_writes_it(
    manager: QueueManager, reader: QueueReader
) -> None:
    await _queues(manager)
    sent = await manager.send(PATH, _asking(POS_ARRIVAL))
    guid_text, sequence = sent.message_id.rsplit("\\", 1)
    correlation = (await only(reader, ADMIN)).properties.correlation_id
    assert correlation is not None and len(correlation) == 20
    assert uuid.UUID(bytes_le=correlation[:16]) == uuid.UUID(guid_text.strip("{}")) == manager.guid
    assert int.from_bytes(correlation[16:], "little") == int(sequence)
