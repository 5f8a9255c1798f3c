"""Lookup IDs (reference §5.9) and receive by lookup ID (reference §7.10)."""

from __future__ import annotations

import pytest

from qm import rules
from qm.errors import MqErrorCode
from qm.manager import QueueManager
from qm.model import Message, MessageProperties, QueueSettings
from qm.reading import QueueReader
from qm.store import Seek
from tests.contract.support import bodies_of, counts, mq_error, new_queue

pytestmark = pytest.mark.anyio

PATH = "private$/orders"


async def _queue_of(manager: QueueManager, priorities: list[int]) -> list[Message]:
    """Messages named by their send order, e.g. b'2p7' = third message, priority 7."""
    await new_queue(manager, PATH)
    return [
        await manager.send(PATH, MessageProperties(body=f"{number}p{priority}".encode(), priority=priority))
        for number, priority in enumerate(priorities)
    ]


async def test_first_message_of_a_fresh_queue_manager(manager: QueueManager) -> None:
    """The reference example: first message, priority 3 -> 0x0400000000000001."""
    await new_queue(manager, PATH)
    sent = await manager.send(PATH, MessageProperties())
    assert sent.lookup_id == 288230376151711745


async def test_layout_and_counter(manager: QueueManager) -> None:
    sent = await _queue_of(manager, [3, 7, 0, 3])
    assert [rules.priority_of(message.lookup_id) for message in sent] == [3, 7, 0, 3]
    assert [rules.counter_of(message.lookup_id) for message in sent] == [1, 2, 3, 4]


async def test_counter_is_shared_by_all_queues(manager: QueueManager) -> None:
    await new_queue(manager, "private$/a")
    await new_queue(manager, "private$/b")
    a1 = await manager.send("private$/a", MessageProperties())
    b1 = await manager.send("private$/b", MessageProperties())
    a2 = await manager.send("private$/a", MessageProperties())
    assert rules.counter_of(a1.lookup_id) < rules.counter_of(b1.lookup_id) < rules.counter_of(a2.lookup_id)


async def test_lookup_ids_are_never_reused(manager: QueueManager, reader: QueueReader) -> None:
    await new_queue(manager, PATH)
    first = await manager.send(PATH, MessageProperties())
    await reader.receive(PATH, 0)
    second = await manager.send(PATH, MessageProperties())
    assert second.lookup_id > first.lookup_id


async def test_received_lookup_id_is_the_sent_one(manager: QueueManager, reader: QueueReader) -> None:
    sent = await _queue_of(manager, [2, 6])
    received = [await reader.receive(PATH, 0) for _ in sent]
    assert [message.lookup_id for message in received if message] == [sent[1].lookup_id, sent[0].lookup_id]


async def test_first_and_last(manager: QueueManager, reader: QueueReader) -> None:
    await _queue_of(manager, [3, 7, 0, 3])
    assert (await reader.by_lookup_id(PATH, Seek.FIRST)).properties.body == b"1p7"
    assert (await reader.by_lookup_id(PATH, Seek.LAST)).properties.body == b"2p0"
    assert await counts(manager, PATH) == (4, 12)
    assert (await reader.by_lookup_id(PATH, Seek.LAST, receive=True)).properties.body == b"2p0"
    assert (await reader.by_lookup_id(PATH, Seek.FIRST, receive=True)).properties.body == b"1p7"
    assert bodies_of(await reader.browse(PATH, 0, 10)) == [b"0p3", b"3p3"]
    assert await counts(manager, PATH) == (2, 6)


async def test_first_and_last_of_an_empty_queue(manager: QueueManager, reader: QueueReader) -> None:
    await new_queue(manager, PATH)
    for seek in (Seek.FIRST, Seek.LAST):
        for receive in (False, True):
            with mq_error(MqErrorCode.MQ_ERROR_MESSAGE_NOT_FOUND):
                await reader.by_lookup_id(PATH, seek, receive=receive)


async def test_first_and_last_take_lookup_id_zero(manager: QueueManager, reader: QueueReader) -> None:
    """Reference §7.10: a non-zero lookup ID with FIRST/LAST is rejected."""
    sent = await _queue_of(manager, [3, 3])
    for seek in (Seek.FIRST, Seek.LAST):
        with mq_error(MqErrorCode.MQ_ERROR_INVALID_PARAMETER):
            await reader.by_lookup_id(PATH, seek, sent[1].lookup_id, receive=True)
    assert await counts(manager, PATH) == (2, 6)


async def test_current(manager: QueueManager, reader: QueueReader) -> None:
    sent = await _queue_of(manager, [3, 7, 0])
    peeked = await reader.by_lookup_id(PATH, Seek.CURRENT, sent[2].lookup_id)
    assert (peeked.lookup_id, peeked.properties.body) == (sent[2].lookup_id, b"2p0")
    received = await reader.by_lookup_id(PATH, Seek.CURRENT, sent[2].lookup_id, receive=True)
    assert received.lookup_id == sent[2].lookup_id
    assert bodies_of(await reader.browse(PATH, 0, 10)) == [b"1p7", b"0p3"]
    for receive in (False, True):
        with mq_error(MqErrorCode.MQ_ERROR_MESSAGE_NOT_FOUND):
            await reader.by_lookup_id(PATH, Seek.CURRENT, sent[2].lookup_id, receive=receive)


async def test_next_and_previous_walk_queue_order(manager: QueueManager, reader: QueueReader) -> None:
    sent = await _queue_of(manager, [3, 7, 0, 3, 7])
    order = [sent[1], sent[4], sent[0], sent[3], sent[2]]
    walked = [order[0]]
    while len(walked) < len(order):
        walked.append(await reader.by_lookup_id(PATH, Seek.NEXT, walked[-1].lookup_id))
    assert [message.lookup_id for message in walked] == [message.lookup_id for message in order]
    back = [order[-1]]
    while len(back) < len(order):
        back.append(await reader.by_lookup_id(PATH, Seek.PREVIOUS, back[-1].lookup_id))
    assert [message.lookup_id for message in back] == [message.lookup_id for message in reversed(order)]
    with mq_error(MqErrorCode.MQ_ERROR_MESSAGE_NOT_FOUND):
        await reader.by_lookup_id(PATH, Seek.NEXT, order[-1].lookup_id)
    with mq_error(MqErrorCode.MQ_ERROR_MESSAGE_NOT_FOUND):
        await reader.by_lookup_id(PATH, Seek.PREVIOUS, order[0].lookup_id)


async def test_receive_next_and_previous(manager: QueueManager, reader: QueueReader) -> None:
    sent = await _queue_of(manager, [3, 3, 3])
    taken = await reader.by_lookup_id(PATH, Seek.NEXT, sent[0].lookup_id, receive=True)
    assert taken.lookup_id == sent[1].lookup_id
    taken = await reader.by_lookup_id(PATH, Seek.PREVIOUS, sent[2].lookup_id, receive=True)
    assert taken.lookup_id == sent[0].lookup_id
    assert bodies_of(await reader.browse(PATH, 0, 10)) == [b"2p3"]


async def test_next_and_previous_need_an_existing_reference(
    manager: QueueManager, reader: QueueReader
) -> None:
    sent = await _queue_of(manager, [3, 3, 3])
    await reader.by_lookup_id(PATH, Seek.CURRENT, sent[1].lookup_id, receive=True)
    for seek in (Seek.NEXT, Seek.PREVIOUS):
        with mq_error(MqErrorCode.MQ_ERROR_MESSAGE_NOT_FOUND):
            await reader.by_lookup_id(PATH, seek, sent[1].lookup_id)
        with mq_error(MqErrorCode.MQ_ERROR_MESSAGE_NOT_FOUND):
            await reader.by_lookup_id(PATH, seek, 12345)


async def test_lookup_ids_of_another_queue_are_not_found(manager: QueueManager, reader: QueueReader) -> None:
    await new_queue(manager, "private$/other")
    elsewhere = await manager.send("private$/other", MessageProperties())
    await _queue_of(manager, [3])
    for seek in (Seek.CURRENT, Seek.NEXT, Seek.PREVIOUS):
        with mq_error(MqErrorCode.MQ_ERROR_MESSAGE_NOT_FOUND):
            await reader.by_lookup_id(PATH, seek, elsewhere.lookup_id, receive=True)
    assert await counts(manager, "private$/other") == (1, 0)


async def test_current_of_a_locked_message(manager: QueueManager, reader: QueueReader) -> None:
    """Peek: TRANSACTION_USAGE; receive: LOCKED_UNDER_TRANSACTION (reference §7.10)."""
    sent = await _queue_of(manager, [3, 3])
    locked = await reader.receive_locked(PATH, 0, 30)
    assert locked is not None and locked[0].lookup_id == sent[0].lookup_id
    with mq_error(MqErrorCode.MQ_ERROR_TRANSACTION_USAGE):
        await reader.by_lookup_id(PATH, Seek.CURRENT, sent[0].lookup_id)
    with mq_error(MqErrorCode.MQ_ERROR_MESSAGE_LOCKED_UNDER_TRANSACTION):
        await reader.by_lookup_id(PATH, Seek.CURRENT, sent[0].lookup_id, receive=True)


async def test_current_of_a_message_held_by_a_transaction(manager: QueueManager, reader: QueueReader) -> None:
    await new_queue(manager, PATH, QueueSettings(transactional=True))
    sent = await manager.send(PATH, MessageProperties(), "single")
    transaction = await manager.begin_transaction()
    assert await reader.receive(PATH, 0, transaction.id) is not None
    with mq_error(MqErrorCode.MQ_ERROR_TRANSACTION_USAGE):
        await reader.by_lookup_id(PATH, Seek.CURRENT, sent.lookup_id)
    await manager.abort(transaction.id)
    assert (await reader.by_lookup_id(PATH, Seek.CURRENT, sent.lookup_id)).lookup_id == sent.lookup_id


async def test_seeks_skip_locked_messages(manager: QueueManager, reader: QueueReader) -> None:
    sent = await _queue_of(manager, [3, 3, 3])
    locked = await reader.receive_locked(PATH, 0, 30)
    assert locked is not None and locked[0].lookup_id == sent[0].lookup_id
    assert (await reader.by_lookup_id(PATH, Seek.FIRST)).lookup_id == sent[1].lookup_id
    with mq_error(MqErrorCode.MQ_ERROR_MESSAGE_NOT_FOUND):
        await reader.by_lookup_id(PATH, Seek.PREVIOUS, sent[1].lookup_id)
    # a locked message may still be the reference of NEXT
    assert (await reader.by_lookup_id(PATH, Seek.NEXT, sent[0].lookup_id)).lookup_id == sent[1].lookup_id
    await reader.end_lock(locked[1], commit=True)
    assert (await reader.by_lookup_id(PATH, Seek.LAST)).lookup_id == sent[2].lookup_id


async def test_lookup_never_waits(manager: QueueManager, reader: QueueReader) -> None:
    await new_queue(manager, PATH)
    with mq_error(MqErrorCode.MQ_ERROR_MESSAGE_NOT_FOUND):
        await reader.by_lookup_id(PATH, Seek.FIRST, receive=True)
