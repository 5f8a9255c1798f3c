"""Cursors (reference §7.5): forward-only positions, peek current/next, receive current."""

from __future__ import annotations

import asyncio

import pytest

from qm.clock import SettableClock
from qm.cursors import CursorService
from qm.errors import MqErrorCode
from qm.manager import SINGLE_MESSAGE_TRANSACTION, QueueManager
from qm.model import Message, MessageProperties, QueueSettings
from qm.reading import QueueReader
from qm.store import CursorPlace
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


async def _send(manager: QueueManager, body: bytes, priority: int = 3) -> Message:
    return await manager.send(PATH, MessageProperties(body=body, priority=priority))


def _body(message: Message | None) -> bytes | None:
    return None if message is None else message.properties.body


async def test_open_gives_an_unpositioned_cursor(manager: QueueManager, cursors: CursorService) -> None:
    queue = await manager.create_queue(PATH, QueueSettings())
    cursor = await cursors.open(PATH)
    assert cursor.place is CursorPlace.UNPOSITIONED
    assert cursor.queue_id == queue.id
    assert await cursors.get(cursor.id) == cursor
    assert (await cursors.open(PATH)).id != cursor.id


async def test_open_on_an_unknown_queue(cursors: CursorService) -> None:
    with mq_error(MqErrorCode.MQ_ERROR_QUEUE_NOT_FOUND):
        await cursors.open("private$/missing")


async def test_peek_current_positions_on_the_first_message(
    manager: QueueManager, cursors: CursorService
) -> None:
    await new_queue(manager, PATH)
    await _send(manager, b"low", 1)
    await _send(manager, b"high", 6)
    cursor = await cursors.open(PATH)
    assert _body(await cursors.peek_current(cursor.id, 0)) == b"high"
    assert _body(await cursors.peek_current(cursor.id, 0)) == b"high"
    assert (await cursors.get(cursor.id)).place is CursorPlace.ON_MESSAGE
    assert await counts(manager, PATH) == (2, 7)


async def test_peek_next_walks_forward_in_queue_order(manager: QueueManager, cursors: CursorService) -> None:
    await new_queue(manager, PATH)
    for body, priority in [(b"a3", 3), (b"b7", 7), (b"c3", 3), (b"d0", 0)]:
        await _send(manager, body, priority)
    cursor = await cursors.open(PATH)
    walked = [await cursors.peek_current(cursor.id, 0)]
    walked += [await cursors.peek_next(cursor.id, 0) for _ in range(3)]
    assert bodies_of(walked) == [b"b7", b"a3", b"c3", b"d0"]
    assert await cursors.peek_next(cursor.id, 0) is None
    assert _body(await cursors.peek_current(cursor.id, 0)) == b"d0"  # stays on the last one


async def test_peek_next_needs_a_positioned_cursor(manager: QueueManager, cursors: CursorService) -> None:
    await new_queue(manager, PATH)
    await _send(manager, b"a")
    cursor = await cursors.open(PATH)
    with mq_error(MqErrorCode.MQ_ERROR_ILLEGAL_CURSOR_ACTION):
        await cursors.peek_next(cursor.id, 0)
    assert _body(await cursors.peek_current(cursor.id, 0)) == b"a"


async def test_peek_current_of_an_empty_queue(manager: QueueManager, cursors: CursorService) -> None:
    await new_queue(manager, PATH)
    cursor = await cursors.open(PATH)
    assert await cursors.peek_current(cursor.id, 0) is None
    assert (await cursors.get(cursor.id)).place is CursorPlace.UNPOSITIONED
    with mq_error(MqErrorCode.MQ_ERROR_ILLEGAL_CURSOR_ACTION):
        await cursors.peek_next(cursor.id, 0)


async def test_receive_current_moves_to_the_next(manager: QueueManager, cursors: CursorService) -> None:
    await new_queue(manager, PATH)
    await send_bodies(manager, PATH, [b"a", b"b", b"c"])
    cursor = await cursors.open(PATH)
    assert _body(await cursors.peek_current(cursor.id, 0)) == b"a"
    assert _body(await cursors.peek_next(cursor.id, 0)) == b"b"
    assert _body(await cursors.receive_current(cursor.id, 0)) == b"b"
    assert _body(await cursors.peek_current(cursor.id, 0)) == b"c"
    assert _body(await cursors.receive_current(cursor.id, 0)) == b"c"
    assert await cursors.peek_current(cursor.id, 0) is None
    assert await counts(manager, PATH) == (1, 1)


async def test_receive_current_on_an_unpositioned_cursor(
    manager: QueueManager, cursors: CursorService
) -> None:
    await new_queue(manager, PATH)
    await send_bodies(manager, PATH, [b"a", b"b"])
    cursor = await cursors.open(PATH)
    assert _body(await cursors.receive_current(cursor.id, 0)) == b"a"
    assert _body(await cursors.peek_current(cursor.id, 0)) == b"b"


async def test_a_cursor_past_the_end_sees_later_arrivals(
    manager: QueueManager, cursors: CursorService
) -> None:
    await new_queue(manager, PATH)
    await send_bodies(manager, PATH, [b"a"])
    cursor = await cursors.open(PATH)
    assert _body(await cursors.receive_current(cursor.id, 0)) == b"a"
    assert await cursors.receive_current(cursor.id, 0) is None
    await send_bodies(manager, PATH, [b"b"])
    assert _body(await cursors.receive_current(cursor.id, 0)) == b"b"


async def test_a_higher_priority_arrival_is_missed(
    manager: QueueManager, cursors: CursorService, reader: QueueReader
) -> None:
    """Reference §7.5: arrivals ahead of a resting cursor are not seen by it."""
    await new_queue(manager, PATH)
    await _send(manager, b"a3")
    await _send(manager, b"b3")
    cursor = await cursors.open(PATH)
    assert _body(await cursors.peek_current(cursor.id, 0)) == b"a3"
    await _send(manager, b"high7", 7)
    await _send(manager, b"same3")
    await _send(manager, b"low1", 1)
    seen = [await cursors.peek_next(cursor.id, 0) for _ in range(4)]
    assert bodies_of(seen) == [b"b3", b"same3", b"low1"]
    assert seen[-1] is None
    assert _body(await reader.receive(PATH, 0)) == b"high7"


async def test_a_cursor_waiting_at_the_end_moves_to_any_arrival(
    manager: QueueManager, cursors: CursorService, watched: WatchedWakeUps
) -> None:
    """Reference §7.5: a waiting cursor is moved to the new message wherever it lands."""
    await new_queue(manager, PATH)
    await _send(manager, b"a3")
    cursor = await cursors.open(PATH)
    await cursors.peek_current(cursor.id, 0)
    waiting = asyncio.create_task(cursors.peek_next(cursor.id, 60_000))
    await watched.until_waiting()
    await _send(manager, b"high7", 7)
    assert _body(await asyncio.wait_for(waiting, WAIT_LIMIT_S)) == b"high7"
    assert _body(await cursors.peek_current(cursor.id, 0)) == b"high7"


async def test_a_waiting_peek_current_sees_the_first_arrival(
    manager: QueueManager, cursors: CursorService, watched: WatchedWakeUps
) -> None:
    await new_queue(manager, PATH)
    cursor = await cursors.open(PATH)
    waiting = asyncio.create_task(cursors.peek_current(cursor.id, 60_000))
    await watched.until_waiting()
    await _send(manager, b"late")
    assert _body(await asyncio.wait_for(waiting, WAIT_LIMIT_S)) == b"late"


async def test_a_waiting_receive_current(
    manager: QueueManager, cursors: CursorService, watched: WatchedWakeUps
) -> None:
    await new_queue(manager, PATH)
    cursor = await cursors.open(PATH)
    waiting = asyncio.create_task(cursors.receive_current(cursor.id, 60_000))
    await watched.until_waiting()
    await _send(manager, b"late")
    assert _body(await asyncio.wait_for(waiting, WAIT_LIMIT_S)) == b"late"
    assert await counts(manager, PATH) == (0, 0)


async def test_the_message_under_the_cursor_was_received_elsewhere(
    manager: QueueManager, cursors: CursorService, reader: QueueReader
) -> None:
    await new_queue(manager, PATH)
    await send_bodies(manager, PATH, [b"a", b"b"])
    cursor = await cursors.open(PATH)
    await cursors.peek_current(cursor.id, 0)
    await reader.receive(PATH, 0)
    with mq_error(MqErrorCode.MQ_ERROR_MESSAGE_ALREADY_RECEIVED):
        await cursors.peek_current(cursor.id, 0)
    with mq_error(MqErrorCode.MQ_ERROR_MESSAGE_ALREADY_RECEIVED):
        await cursors.receive_current(cursor.id, 0)
    assert _body(await cursors.peek_next(cursor.id, 0)) == b"b"


async def test_the_message_under_the_cursor_is_locked(
    manager: QueueManager, cursors: CursorService, reader: QueueReader
) -> None:
    await new_queue(manager, PATH)
    await send_bodies(manager, PATH, [b"a", b"b"])
    cursor = await cursors.open(PATH)
    await cursors.peek_current(cursor.id, 0)
    locked = await reader.receive_locked(PATH, 0, 30)
    assert locked is not None
    with mq_error(MqErrorCode.MQ_ERROR_MESSAGE_LOCKED_UNDER_TRANSACTION):
        await cursors.peek_current(cursor.id, 0)
    with mq_error(MqErrorCode.MQ_ERROR_MESSAGE_LOCKED_UNDER_TRANSACTION):
        await cursors.receive_current(cursor.id, 0)
    await reader.end_lock(locked[1], commit=False)
    assert _body(await cursors.receive_current(cursor.id, 0)) == b"a"


async def test_cursors_skip_locked_messages(
    manager: QueueManager, cursors: CursorService, reader: QueueReader
) -> None:
    await new_queue(manager, PATH)
    await send_bodies(manager, PATH, [b"a", b"b", b"c"])
    first = await cursors.open(PATH)
    assert _body(await cursors.peek_current(first.id, 0)) == b"a"
    locked = [await reader.receive_locked(PATH, 0, 30) for _ in range(2)]  # a and b
    assert [entry[0].properties.body for entry in locked if entry] == [b"a", b"b"]
    assert _body(await cursors.peek_next(first.id, 0)) == b"c"
    second = await cursors.open(PATH)
    assert _body(await cursors.peek_current(second.id, 0)) == b"c"


async def test_two_cursors_are_independent(manager: QueueManager, cursors: CursorService) -> None:
    await new_queue(manager, PATH)
    await send_bodies(manager, PATH, [b"a", b"b"])
    first = await cursors.open(PATH)
    second = await cursors.open(PATH)
    await cursors.peek_current(first.id, 0)
    assert _body(await cursors.peek_next(first.id, 0)) == b"b"
    assert _body(await cursors.peek_current(second.id, 0)) == b"a"


async def test_receive_current_in_a_transaction(manager: QueueManager, cursors: CursorService) -> None:
    await new_queue(manager, PATH, QueueSettings(transactional=True))
    for body in (b"a", b"b"):
        await manager.send(PATH, MessageProperties(body=body), SINGLE_MESSAGE_TRANSACTION)
    transaction = await manager.begin_transaction()
    cursor = await cursors.open(PATH)
    assert _body(await cursors.receive_current(cursor.id, 0, transaction.id)) == b"a"
    assert _body(await cursors.peek_current(cursor.id, 0)) == b"b"
    await manager.abort(transaction.id)
    again = await cursors.open(PATH)
    head = await cursors.peek_current(again.id, 0)
    assert _body(head) == b"a" and head is not None and head.abort_count == 1


async def test_an_idle_cursor_expires(
    manager: QueueManager, cursors: CursorService, clock: SettableClock
) -> None:
    await new_queue(manager, PATH)
    await send_bodies(manager, PATH, [b"a"])
    idle = await cursors.open(PATH)
    swept = await cursors.open(PATH)
    clock.advance(manager.config.cursor_idle_timeout_s)
    with mq_error(MqErrorCode.MQ_ERROR_INVALID_HANDLE):
        await cursors.peek_current(idle.id, 0)
    assert (await manager.release_expired()).cursors_closed == 2
    for cursor_id in (idle.id, swept.id):
        with mq_error(MqErrorCode.MQ_ERROR_INVALID_HANDLE):
            await cursors.receive_current(cursor_id, 0)
    assert await counts(manager, PATH) == (1, 1)


async def test_use_keeps_a_cursor_open(
    manager: QueueManager, cursors: CursorService, clock: SettableClock
) -> None:
    await new_queue(manager, PATH)
    await send_bodies(manager, PATH, [b"a", b"b", b"c"])
    cursor = await cursors.open(PATH)
    idle = manager.config.cursor_idle_timeout_s
    clock.advance(idle - 1)
    await cursors.peek_current(cursor.id, 0)
    clock.advance(idle - 1)
    await cursors.peek_next(cursor.id, 0)
    clock.advance(idle - 1)
    assert (await manager.release_expired()).cursors_closed == 0
    assert _body(await cursors.peek_next(cursor.id, 0)) == b"c"


async def test_closed_cursors(manager: QueueManager, cursors: CursorService) -> None:
    await new_queue(manager, PATH)
    await send_bodies(manager, PATH, [b"a"])
    cursor = await cursors.open(PATH)
    await cursors.peek_current(cursor.id, 0)
    await cursors.close(cursor.id)
    with mq_error(MqErrorCode.MQ_ERROR_INVALID_HANDLE):
        await cursors.peek_current(cursor.id, 0)
    with mq_error(MqErrorCode.MQ_ERROR_INVALID_HANDLE):
        await cursors.peek_next(cursor.id, 0)
    with mq_error(MqErrorCode.MQ_ERROR_INVALID_HANDLE):
        await cursors.receive_current(cursor.id, 0)
    with mq_error(MqErrorCode.MQ_ERROR_INVALID_HANDLE):
        await cursors.close(cursor.id)
    with mq_error(MqErrorCode.MQ_ERROR_INVALID_HANDLE):
        await cursors.get("no-such-cursor")
    assert await counts(manager, PATH) == (1, 1)


async def test_deleting_the_queue_closes_its_cursors(manager: QueueManager, cursors: CursorService) -> None:
    await new_queue(manager, PATH)
    cursor = await cursors.open(PATH)
    await manager.delete_queue(PATH)
    with mq_error(MqErrorCode.MQ_ERROR_INVALID_HANDLE):
        await cursors.peek_current(cursor.id, 0)
