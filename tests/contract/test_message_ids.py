"""Peek and receive by message ID and by correlation ID."""

from __future__ import annotations

import pytest

from qm.errors import MqErrorCode
from qm.manager import QueueManager
from qm.model import MessageProperties, QueueSettings
from qm.reading import QueueReader
from tests.contract.support import bodies_of, counts, mq_error, new_queue

pytestmark = pytest.mark.anyio

PATH = "private$/orders"
CORRELATION_A = b"A" * 20
CORRELATION_B = b"B" * 20


async def test_by_message_id(manager: QueueManager, reader: QueueReader) -> None:
    await new_queue(manager, PATH)
    first = await manager.send(PATH, MessageProperties(body=b"first"))
    second = await manager.send(PATH, MessageProperties(body=b"second"))
    peeked = await reader.by_message_id(PATH, message_id=second.message_id)
    assert (peeked.lookup_id, peeked.properties.body) == (second.lookup_id, b"second")
    received = await reader.by_message_id(PATH, message_id=second.message_id, receive=True)
    assert received.lookup_id == second.lookup_id
    with mq_error(MqErrorCode.MQ_ERROR_MESSAGE_NOT_FOUND):
        await reader.by_message_id(PATH, message_id=second.message_id)
    assert bodies_of(await reader.browse(PATH, 0, 10)) == [b"first"]
    assert (await reader.by_message_id(PATH, message_id=first.message_id)).lookup_id == first.lookup_id


async def test_by_sender_assigned_message_id(manager: QueueManager, reader: QueueReader) -> None:
    await new_queue(manager, PATH)
    given = "{5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93}\\7001"
    await manager.send(PATH, MessageProperties(body=b"srmp", message_id=given))
    assert (await reader.by_message_id(PATH, message_id=given)).properties.body == b"srmp"


async def test_unknown_message_id(manager: QueueManager, reader: QueueReader) -> None:
    await new_queue(manager, PATH)
    await manager.send(PATH, MessageProperties())
    for receive in (False, True):
        with mq_error(MqErrorCode.MQ_ERROR_MESSAGE_NOT_FOUND):
            await reader.by_message_id(
                PATH, message_id="{00000000-0000-0000-0000-000000000000}\\1", receive=receive
            )
    assert await counts(manager, PATH) == (1, 0)


async def test_message_ids_are_looked_up_in_the_given_queue_only(
    manager: QueueManager, reader: QueueReader
) -> None:
    await new_queue(manager, PATH)
    await new_queue(manager, "private$/other")
    elsewhere = await manager.send("private$/other", MessageProperties())
    with mq_error(MqErrorCode.MQ_ERROR_MESSAGE_NOT_FOUND):
        await reader.by_message_id(PATH, message_id=elsewhere.message_id, receive=True)
    assert await counts(manager, "private$/other") == (1, 0)


async def test_by_correlation_id_takes_the_first_in_queue_order(
    manager: QueueManager, reader: QueueReader
) -> None:
    await new_queue(manager, PATH)
    await manager.send(PATH, MessageProperties(body=b"a-low", priority=1, correlation_id=CORRELATION_A))
    await manager.send(PATH, MessageProperties(body=b"b", priority=7, correlation_id=CORRELATION_B))
    await manager.send(PATH, MessageProperties(body=b"a-high", priority=5, correlation_id=CORRELATION_A))
    await manager.send(PATH, MessageProperties(body=b"none", priority=7))
    peeked = await reader.by_message_id(PATH, correlation_id=CORRELATION_A)
    assert peeked.properties.body == b"a-high"
    assert peeked.properties.correlation_id == CORRELATION_A
    taken = [await reader.by_message_id(PATH, correlation_id=CORRELATION_A, receive=True) for _ in range(2)]
    assert bodies_of(taken) == [b"a-high", b"a-low"]
    with mq_error(MqErrorCode.MQ_ERROR_MESSAGE_NOT_FOUND):
        await reader.by_message_id(PATH, correlation_id=CORRELATION_A)
    assert bodies_of(await reader.browse(PATH, 0, 10)) == [b"b", b"none"]


async def test_by_message_and_correlation_id_must_both_match(
    manager: QueueManager, reader: QueueReader
) -> None:
    await new_queue(manager, PATH)
    sent = await manager.send(PATH, MessageProperties(correlation_id=CORRELATION_A))
    with mq_error(MqErrorCode.MQ_ERROR_MESSAGE_NOT_FOUND):
        await reader.by_message_id(PATH, message_id=sent.message_id, correlation_id=CORRELATION_B)
    found = await reader.by_message_id(PATH, message_id=sent.message_id, correlation_id=CORRELATION_A)
    assert found.lookup_id == sent.lookup_id


async def test_identifiers_skip_locked_messages(manager: QueueManager, reader: QueueReader) -> None:
    await new_queue(manager, PATH)
    sent = await manager.send(PATH, MessageProperties(correlation_id=CORRELATION_A))
    locked = await reader.receive_locked(PATH, 0, 30)
    assert locked is not None
    with mq_error(MqErrorCode.MQ_ERROR_MESSAGE_NOT_FOUND):
        await reader.by_message_id(PATH, message_id=sent.message_id)
    with mq_error(MqErrorCode.MQ_ERROR_MESSAGE_NOT_FOUND):
        await reader.by_message_id(PATH, correlation_id=CORRELATION_A, receive=True)
    await reader.end_lock(locked[1], commit=False)
    assert (await reader.by_message_id(PATH, correlation_id=CORRELATION_A)).lookup_id == sent.lookup_id


async def test_receive_by_id_in_a_transaction(manager: QueueManager, reader: QueueReader) -> None:
    await new_queue(manager, PATH, QueueSettings(transactional=True))
    sent = await manager.send(PATH, MessageProperties(body=b"t"), "single")
    transaction = await manager.begin_transaction()
    taken = await reader.by_message_id(
        PATH, message_id=sent.message_id, receive=True, transaction=transaction.id
    )
    assert taken.lookup_id == sent.lookup_id
    assert await reader.peek(PATH, 0) is None
    await manager.abort(transaction.id)
    assert (await reader.by_message_id(PATH, message_id=sent.message_id)).abort_count == 1
