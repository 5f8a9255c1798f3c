"""Send (reference §7.3): what is stored, and what is refused without storing anything."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from qm.clock import SettableClock
from qm.config import ManagerConfig
from qm.errors import MqErrorCode
from qm.manager import QueueManager
from qm.model import (
    INFINITE,
    Acknowledgment,
    Delivery,
    JournalFlags,
    MessageProperties,
    QueueSettings,
)
from qm.reading import QueueReader
from tests.contract.support import counts, mq_error, new_queue

pytestmark = pytest.mark.anyio

PATH = "private$/orders"


@pytest.fixture
def manager_config() -> ManagerConfig:
    return ManagerConfig(max_body_bytes=1000)


async def test_send_returns_the_message_as_stored(manager: QueueManager, clock: SettableClock) -> None:
    await new_queue(manager, PATH)
    sent = await manager.send(PATH, MessageProperties(body=b"hello", label="greeting", priority=5))
    assert sent.properties.body == b"hello"
    assert sent.arrived_time == sent.sent_time == clock.now()
    assert sent.source_machine == manager.guid
    assert sent.ttbr_deadline is None and sent.ttrq_deadline is None
    assert sent.transaction_id is None
    assert sent.abort_count == 0
    assert sent.message_id == f"{{{manager.guid}}}\\{sent.lookup_id & 0xFFFFFFFF}"


async def test_every_property_survives_the_store(manager: QueueManager, reader: QueueReader) -> None:
    await new_queue(manager, PATH)
    sender = uuid.UUID("5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93")
    properties = MessageProperties(
        body=b"\x00\x01binary\xff",
        label="L" * 249,
        body_type=8209,
        priority=6,
        message_class=0,
        correlation_id=bytes(range(20)),
        app_specific=2**32 - 1,
        extension=b"ext",
        response_queue="DIRECT=http://host/msmq/private$/replies",
        admin_queue="DIRECT=http://host/msmq/private$/admin",
        acknowledge=Acknowledgment.POS_ARRIVAL | Acknowledgment.NEG_RECEIVE,
        journal=JournalFlags.DEADLETTER | JournalFlags.JOURNAL,
        delivery=Delivery.EXPRESS,
        time_to_be_received=3600,
        time_to_reach_queue=600,
        source_machine=sender,
        message_id="{5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93}\\7001",
    )
    sent = await manager.send(PATH, properties)
    received = await reader.receive(PATH, 0)
    assert received is not None
    assert received.lookup_id == sent.lookup_id
    assert received.message_id == properties.message_id
    assert received.source_machine == sender
    expected = {
        name: getattr(properties, name)
        for name in (
            "body",
            "label",
            "body_type",
            "priority",
            "correlation_id",
            "app_specific",
            "extension",
            "response_queue",
            "admin_queue",
            "acknowledge",
            "journal",
            "delivery",
            "time_to_reach_queue",
        )
    }
    assert {name: getattr(received.properties, name) for name in expected} == expected
    assert received.properties.time_to_be_received == 3600  # the clock has not moved


async def test_deadlines_are_absolute(manager: QueueManager, clock: SettableClock) -> None:
    await new_queue(manager, PATH)
    sent = await manager.send(PATH, MessageProperties(time_to_be_received=60, time_to_reach_queue=INFINITE))
    assert sent.ttbr_deadline == clock.now() + timedelta(seconds=60)
    # TTBR wins over a later (here infinite) TTRQ: a message never outlives its TTBR.
    assert sent.ttrq_deadline == sent.ttbr_deadline
    both = await manager.send(PATH, MessageProperties(time_to_be_received=INFINITE, time_to_reach_queue=30))
    assert both.ttbr_deadline is None
    assert both.ttrq_deadline == clock.now() + timedelta(seconds=30)


async def test_message_ids_are_unique(manager: QueueManager) -> None:
    await new_queue(manager, PATH)
    sent = [await manager.send(PATH, MessageProperties()) for _ in range(5)]
    assert len({message.message_id for message in sent}) == 5
    assert len({message.lookup_id for message in sent}) == 5


INVALID_SENDS = [
    (MessageProperties(body=b"x", priority=8), MqErrorCode.MQ_ERROR_ILLEGAL_PROPERTY_VALUE),
    (MessageProperties(body=b"x", priority=-1), MqErrorCode.MQ_ERROR_ILLEGAL_PROPERTY_VALUE),
    (MessageProperties(body=b"x", label="x" * 250), MqErrorCode.MQ_ERROR_LABEL_TOO_LONG),
    (MessageProperties(body=b"x", correlation_id=b"c" * 19), MqErrorCode.MQ_ERROR_ILLEGAL_PROPERTY_SIZE),
    (MessageProperties(body=b"x", correlation_id=b"c" * 21), MqErrorCode.MQ_ERROR_ILLEGAL_PROPERTY_SIZE),
    (MessageProperties(body=b"x" * 1001), MqErrorCode.MQ_ERROR_INSUFFICIENT_RESOURCES),
    (MessageProperties(body=b"x", app_specific=-1), MqErrorCode.MQ_ERROR_ILLEGAL_PROPERTY_VALUE),
    (MessageProperties(body=b"x", time_to_be_received=-5), MqErrorCode.MQ_ERROR_ILLEGAL_PROPERTY_VALUE),
]


async def test_invalid_sends_store_nothing(manager: QueueManager, reader: QueueReader) -> None:
    """Each refusal leaves no trace: no message, no totals, no lookup ID used up."""
    await new_queue(manager, PATH)
    for properties, code in INVALID_SENDS:
        with mq_error(code):
            await manager.send(PATH, properties)
        assert await counts(manager, PATH) == (0, 0)
    assert await reader.peek(PATH, 0) is None
    info = await manager.info()
    assert (info.message_count, info.byte_count) == (0, 0)
    assert await manager.store.messages.counter_high_water() == 0


async def test_invalid_properties_are_refused_in_a_transaction_too(manager: QueueManager) -> None:
    """The transactional priority-0 rule must not hide an out-of-range priority."""
    await new_queue(manager, PATH, QueueSettings(transactional=True))
    transaction = await manager.begin_transaction()
    with mq_error(MqErrorCode.MQ_ERROR_ILLEGAL_PROPERTY_VALUE):
        await manager.send(PATH, MessageProperties(priority=9), transaction.id)
    await manager.commit(transaction.id)
    assert await counts(manager, PATH) == (0, 0)


async def test_limits_are_inclusive(manager: QueueManager) -> None:
    await new_queue(manager, PATH)
    await manager.send(PATH, MessageProperties(body=b"x" * 1000, label="x" * 249, correlation_id=b"c" * 20))
    assert await counts(manager, PATH) == (1, 1000)
