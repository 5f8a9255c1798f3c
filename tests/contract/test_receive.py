"""Receive and peek (reference §7.4, §7.5): order, waiting, time-to-be-received, browse."""

from __future__ import annotations

import asyncio

import pytest

from qm.clock import SettableClock
from qm.errors import MqErrorCode
from qm.manager import QueueManager
from qm.model import INFINITE, MessageProperties, QueueSettings
from qm.reading import QueueReader
from qm.store import Seek
from storage.store import SqlStore
from tests.contract.support import (
    WAIT_LIMIT_S,
    WatchedWakeUps,
    bodies_of,
    counts,
    mq_error,
    new_queue,
    send_bodies,
)

pytestmark = pytest.mark.anyio

PATH = "private$/orders"


async def test_receive_order_is_priority_then_arrival(manager: QueueManager, reader: QueueReader) -> None:
    await new_queue(manager, PATH)
    for body, priority in [
        (b"a3", 3),
        (b"b0", 0),
        (b"c7", 7),
        (b"d3", 3),
        (b"e7", 7),
        (b"f0", 0),
        (b"g5", 5),
    ]:
        await manager.send(PATH, MessageProperties(body=body, priority=priority))
    received = [await reader.receive(PATH, 0) for _ in range(7)]
    assert bodies_of(received) == [b"c7", b"e7", b"g5", b"a3", b"d3", b"b0", b"f0"]
    assert await reader.receive(PATH, 0) is None


async def test_peek_shows_the_head_and_leaves_it(manager: QueueManager, reader: QueueReader) -> None:
    await new_queue(manager, PATH)
    await send_bodies(manager, PATH, [b"low"], priority=1)
    await send_bodies(manager, PATH, [b"high"], priority=6)
    first = await reader.peek(PATH, 0)
    again = await reader.peek(PATH, 0)
    assert first is not None and again is not None
    assert first.properties.body == again.properties.body == b"high"
    assert first.lookup_id == again.lookup_id
    assert await counts(manager, PATH) == (2, 7)
    received = await reader.receive(PATH, 0)
    assert received is not None and received.lookup_id == first.lookup_id


async def test_empty_queue_with_timeout_zero(manager: QueueManager, reader: QueueReader) -> None:
    await new_queue(manager, PATH)
    assert await reader.receive(PATH, 0) is None
    assert await reader.peek(PATH, 0) is None


async def test_receive_from_an_unknown_queue(reader: QueueReader) -> None:
    with mq_error(MqErrorCode.MQ_ERROR_QUEUE_NOT_FOUND):
        await reader.receive("private$/missing", 0)
    with mq_error(MqErrorCode.MQ_ERROR_QUEUE_NOT_FOUND):
        await reader.peek("private$/missing", 0)


async def test_each_message_is_received_once(manager: QueueManager, reader: QueueReader) -> None:
    await new_queue(manager, PATH)
    await send_bodies(manager, PATH, [b"only"])
    assert await reader.receive(PATH, 0) is not None
    assert await reader.receive(PATH, 0) is None
    assert await counts(manager, PATH) == (0, 0)


async def test_queues_do_not_share_messages(manager: QueueManager, reader: QueueReader) -> None:
    await new_queue(manager, "private$/a")
    await new_queue(manager, "private$/b")
    await send_bodies(manager, "private$/a", [b"for-a"])
    assert await reader.receive("private$/b", 0) is None
    assert bodies_of([await reader.receive("private$/a", 0)]) == [b"for-a"]


async def test_a_waiting_receive_gets_a_message_sent_later(
    manager: QueueManager, reader: QueueReader, watched: WatchedWakeUps
) -> None:
    await new_queue(manager, PATH)
    waiting = asyncio.create_task(reader.receive(PATH, INFINITE))
    await watched.until_waiting()
    assert not waiting.done()
    await send_bodies(manager, PATH, [b"late"])
    received = await asyncio.wait_for(waiting, WAIT_LIMIT_S)
    assert bodies_of([received]) == [b"late"]
    assert await counts(manager, PATH) == (0, 0)


async def test_a_waiting_peek_sees_a_message_sent_later(
    manager: QueueManager, reader: QueueReader, watched: WatchedWakeUps
) -> None:
    await new_queue(manager, PATH)
    waiting = asyncio.create_task(reader.peek(PATH, 60_000))
    await watched.until_waiting()
    await send_bodies(manager, PATH, [b"late"])
    assert bodies_of([await asyncio.wait_for(waiting, WAIT_LIMIT_S)]) == [b"late"]
    assert await counts(manager, PATH) == (1, 4)


async def test_one_message_wakes_one_of_two_waiting_receivers(
    manager: QueueManager, reader: QueueReader, watched: WatchedWakeUps
) -> None:
    await new_queue(manager, PATH)
    first = asyncio.create_task(reader.receive(PATH, 60_000))
    second = asyncio.create_task(reader.receive(PATH, 60_000))
    await watched.until_waiting(2)
    await send_bodies(manager, PATH, [b"one"])
    done, pending = await asyncio.wait({first, second}, timeout=WAIT_LIMIT_S, return_when="FIRST_COMPLETED")
    assert len(done) == 1
    assert bodies_of([done.pop().result()]) == [b"one"]
    await send_bodies(manager, PATH, [b"two"])
    assert bodies_of([await asyncio.wait_for(pending.pop(), WAIT_LIMIT_S)]) == [b"two"]


async def test_each_message_wakes_one_waiting_receiver_not_all(
    manager: QueueManager, reader: QueueReader, watched: WatchedWakeUps
) -> None:
    """Eight receivers wait; two messages wake two of them (and each that took one hands a
    wake-up on, in case more came): at most four attempts, where waking everyone made eight."""
    await new_queue(manager, PATH)
    waiting = [asyncio.create_task(reader.receive(PATH, 60_000)) for _ in range(8)]
    await watched.until_waiting(8)
    store = manager.store
    assert isinstance(store, SqlStore)
    attempts_before = store.messages.receive_group.stats.requests
    await send_bodies(manager, PATH, [b"one", b"two"])
    async with asyncio.timeout(WAIT_LIMIT_S):
        while sum(task.done() for task in waiting) < 2:
            await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
    await watched.until_waiting(6)
    finished = [task.result() for task in waiting if task.done()]
    assert sorted(bodies_of(finished)) == [b"one", b"two"]
    assert store.messages.receive_group.stats.requests - attempts_before <= 4
    for task in waiting:
        task.cancel()


async def test_a_waiting_receive_gives_up_at_its_timeout(manager: QueueManager, reader: QueueReader) -> None:
    await new_queue(manager, PATH)
    assert await asyncio.wait_for(reader.receive(PATH, 50), WAIT_LIMIT_S) is None


async def test_a_waiting_receive_on_another_queue_is_not_served(
    manager: QueueManager, reader: QueueReader, watched: WatchedWakeUps
) -> None:
    await new_queue(manager, PATH)
    await new_queue(manager, "private$/other")
    waiting = asyncio.create_task(reader.receive(PATH, 300))
    await watched.until_waiting()
    await send_bodies(manager, "private$/other", [b"elsewhere"])
    assert await asyncio.wait_for(waiting, WAIT_LIMIT_S) is None
    assert await counts(manager, "private$/other") == (1, 9)


async def test_expired_messages_are_never_read(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    """Even before any sweeper runs (reference §7.7, design 'Timers')."""
    await new_queue(manager, PATH)
    expiring = await manager.send(PATH, MessageProperties(body=b"short", priority=7, time_to_be_received=10))
    await manager.send(PATH, MessageProperties(body=b"long", priority=1, time_to_be_received=100))
    clock.advance(10)
    assert bodies_of([await reader.peek(PATH, 0)]) == [b"long"]
    assert await reader.browse(PATH, 0, 10) == [await reader.peek(PATH, 0)]
    for seek in (Seek.FIRST, Seek.LAST):
        assert (await reader.by_lookup_id(PATH, seek)).properties.body == b"long"
    with mq_error(MqErrorCode.MQ_ERROR_MESSAGE_NOT_FOUND):
        await reader.by_lookup_id(PATH, Seek.CURRENT, expiring.lookup_id)
    with mq_error(MqErrorCode.MQ_ERROR_MESSAGE_NOT_FOUND):
        await reader.by_message_id(PATH, message_id=expiring.message_id)
    assert bodies_of([await reader.receive(PATH, 0)]) == [b"long"]
    assert await reader.receive(PATH, 0) is None


async def test_a_message_is_readable_until_just_before_its_deadline(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    await new_queue(manager, PATH)
    await manager.send(PATH, MessageProperties(body=b"x", time_to_be_received=10))
    clock.advance(9.999)
    assert await reader.peek(PATH, 0) is not None
    clock.advance(0.001)
    assert await reader.peek(PATH, 0) is None


async def test_a_zero_time_to_be_received_is_never_read(manager: QueueManager, reader: QueueReader) -> None:
    await new_queue(manager, PATH)
    await manager.send(PATH, MessageProperties(body=b"x", time_to_be_received=0))
    assert await reader.receive(PATH, 0) is None


async def test_receive_reports_the_remaining_time_to_be_received(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    await new_queue(manager, PATH)
    await manager.send(PATH, MessageProperties(body=b"timed", time_to_be_received=60))
    await manager.send(PATH, MessageProperties(body=b"forever"))
    clock.advance(20)
    peeked = await reader.peek(PATH, 0)
    received = await reader.receive(PATH, 0)
    forever = await reader.receive(PATH, 0)
    assert peeked is not None and received is not None and forever is not None
    assert peeked.properties.time_to_be_received == 40
    assert received.properties.time_to_be_received == 40
    assert forever.properties.time_to_be_received == INFINITE


async def test_transactional_messages_have_priority_zero(manager: QueueManager, reader: QueueReader) -> None:
    await new_queue(manager, PATH, QueueSettings(transactional=True))
    transaction = await manager.begin_transaction()
    sent = await manager.send(PATH, MessageProperties(body=b"t", priority=7), transaction.id)
    await manager.commit(transaction.id)
    assert sent.properties.priority == 0
    received = await reader.receive(PATH, 0)
    assert received is not None and received.properties.priority == 0
    assert received.lookup_id >> 56 == 7


async def test_browse_pages_in_queue_order(manager: QueueManager, reader: QueueReader) -> None:
    await new_queue(manager, PATH)
    for number, priority in enumerate([1, 5, 3, 5, 1]):
        await manager.send(PATH, MessageProperties(body=str(number).encode(), priority=priority))
    page_one = await reader.browse(PATH, 0, 2)
    page_two = await reader.browse(PATH, page_one[-1].lookup_id, 2)
    page_three = await reader.browse(PATH, page_two[-1].lookup_id, 2)
    assert bodies_of(page_one + page_two + page_three) == [b"1", b"3", b"2", b"0", b"4"]
    assert len(page_three) == 1
    assert await reader.browse(PATH, page_three[-1].lookup_id, 2) == []
    assert await counts(manager, PATH) == (5, 5)
