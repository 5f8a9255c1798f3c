"""Two-phase read (reference §7.9): lock under a tag, then commit, abort, or let it expire."""

from __future__ import annotations

import asyncio

import pytest

from qm.clock import SettableClock
from qm.errors import MqErrorCode
from qm.manager import QueueManager
from qm.model import Message
from qm.reading import QueueReader
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


async def _lock(reader: QueueReader, lock_timeout_s: float | None = 30) -> tuple[Message, str]:
    locked = await reader.receive_locked(PATH, 0, lock_timeout_s)
    assert locked is not None
    return locked


async def _drain(reader: QueueReader) -> list[bytes]:
    bodies = []
    while (message := await reader.receive(PATH, 0)) is not None:
        bodies.append(message.properties.body)
    return bodies


async def test_a_locked_message_is_hidden_until_it_is_ended(
    manager: QueueManager, reader: QueueReader
) -> None:
    await new_queue(manager, PATH)
    sent = await send_bodies(manager, PATH, [b"a", b"b"])
    message, tag = await _lock(reader)
    assert message.lookup_id == sent[0].lookup_id
    assert message.properties.body == b"a"
    assert tag.startswith(f"{message.lookup_id}-")
    assert bodies_of([await reader.peek(PATH, 0)]) == [b"b"]
    assert bodies_of(await reader.browse(PATH, 0, 10)) == [b"b"]
    assert await counts(manager, PATH) == (2, 2)


async def test_commit_removes_the_message(manager: QueueManager, reader: QueueReader) -> None:
    await new_queue(manager, PATH)
    await send_bodies(manager, PATH, [b"a", b"b"])
    _, tag = await _lock(reader)
    await reader.end_lock(tag, commit=True)
    assert await counts(manager, PATH) == (1, 1)
    assert await _drain(reader) == [b"b"]


async def test_abort_puts_it_back_in_its_place(manager: QueueManager, reader: QueueReader) -> None:
    await new_queue(manager, PATH)
    await send_bodies(manager, PATH, [b"a", b"b"])
    _, tag = await _lock(reader)
    await send_bodies(manager, PATH, [b"c"])
    await reader.end_lock(tag, commit=False)
    assert await _drain(reader) == [b"a", b"b", b"c"]


async def test_abort_keeps_the_lookup_id(manager: QueueManager, reader: QueueReader) -> None:
    await new_queue(manager, PATH)
    sent = await send_bodies(manager, PATH, [b"a"])
    _, tag = await _lock(reader)
    await reader.end_lock(tag, commit=False)
    again = await reader.peek(PATH, 0)
    assert again is not None and again.lookup_id == sent[0].lookup_id


async def test_ending_twice_after_commit(manager: QueueManager, reader: QueueReader) -> None:
    await new_queue(manager, PATH)
    await send_bodies(manager, PATH, [b"a"])
    _, tag = await _lock(reader)
    await reader.end_lock(tag, commit=True)
    for commit in (True, False):
        with mq_error(MqErrorCode.MQ_ERROR_MESSAGE_ALREADY_RECEIVED):
            await reader.end_lock(tag, commit=commit)


async def test_ending_twice_after_abort(manager: QueueManager, reader: QueueReader) -> None:
    await new_queue(manager, PATH)
    await send_bodies(manager, PATH, [b"a"])
    _, tag = await _lock(reader)
    await reader.end_lock(tag, commit=False)
    for commit in (True, False):
        with mq_error(MqErrorCode.MQ_ERROR_TRANSACTION_SEQUENCE):
            await reader.end_lock(tag, commit=commit)
    assert await _drain(reader) == [b"a"]


async def test_an_old_tag_cannot_end_a_newer_lock(manager: QueueManager, reader: QueueReader) -> None:
    await new_queue(manager, PATH)
    await send_bodies(manager, PATH, [b"a"])
    _, old_tag = await _lock(reader)
    await reader.end_lock(old_tag, commit=False)
    _, new_tag = await _lock(reader)
    with mq_error(MqErrorCode.MQ_ERROR_TRANSACTION_SEQUENCE):
        await reader.end_lock(old_tag, commit=True)
    assert await counts(manager, PATH) == (1, 1)
    await reader.end_lock(new_tag, commit=True)
    assert await counts(manager, PATH) == (0, 0)


async def test_malformed_tags(manager: QueueManager, reader: QueueReader) -> None:
    await new_queue(manager, PATH)
    await send_bodies(manager, PATH, [b"a"])
    message, tag = await _lock(reader)
    for bad in ("", "nonsense", "123", f"{message.lookup_id}-", "-abc", "abc-def", "12a-token"):
        for commit in (True, False):
            with mq_error(MqErrorCode.MQ_ERROR_INVALID_HANDLE):
                await reader.end_lock(bad, commit=commit)
    with mq_error(MqErrorCode.MQ_ERROR_TRANSACTION_SEQUENCE):  # well formed, but not this lock's
        await reader.end_lock(f"{message.lookup_id}-{'0' * 24}", commit=True)
    assert await counts(manager, PATH) == (1, 1)
    assert await reader.peek(PATH, 0) is None
    await reader.end_lock(tag, commit=True)
    assert await counts(manager, PATH) == (0, 0)


async def test_a_lock_expires_and_the_message_returns(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    await new_queue(manager, PATH)
    await send_bodies(manager, PATH, [b"a", b"b"])
    _, tag = await _lock(reader, lock_timeout_s=30)
    clock.advance(29)
    assert (await manager.release_expired()).locks_released == 0
    assert bodies_of([await reader.peek(PATH, 0)]) == [b"b"]
    clock.advance(1)
    report = await manager.release_expired()
    assert report.locks_released == 1
    assert report.queue_ids == {(await manager.get_queue(PATH)).id}
    with mq_error(MqErrorCode.MQ_ERROR_TRANSACTION_SEQUENCE):
        await reader.end_lock(tag, commit=True)
    assert await _drain(reader) == [b"a", b"b"]


async def test_the_default_lock_timeout_applies(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    await new_queue(manager, PATH)
    await send_bodies(manager, PATH, [b"a"])
    await _lock(reader, lock_timeout_s=None)
    clock.advance(manager.config.default_lock_timeout_s - 1)
    await manager.release_expired()
    assert await reader.peek(PATH, 0) is None
    clock.advance(1)
    await manager.release_expired()
    assert bodies_of([await reader.peek(PATH, 0)]) == [b"a"]


async def test_commit_after_expiry_does_not_remove(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    """The lock has expired even if no housekeeping pass has noticed yet."""
    await new_queue(manager, PATH)
    await send_bodies(manager, PATH, [b"a"])
    _, tag = await _lock(reader, lock_timeout_s=10)
    clock.advance(10)
    with mq_error(MqErrorCode.MQ_ERROR_TRANSACTION_SEQUENCE):
        await reader.end_lock(tag, commit=True)
    assert await _drain(reader) == [b"a"]


async def test_lock_timeout_out_of_range(manager: QueueManager, reader: QueueReader) -> None:
    await new_queue(manager, PATH)
    await send_bodies(manager, PATH, [b"a"])
    for lock_timeout_s in (0, -1, manager.config.max_lock_timeout_s + 0.5):
        with mq_error(MqErrorCode.MQ_ERROR_INVALID_PARAMETER):
            await reader.receive_locked(PATH, 0, lock_timeout_s)
    assert bodies_of([await reader.peek(PATH, 0)]) == [b"a"]
    assert await reader.receive_locked(PATH, 0, manager.config.max_lock_timeout_s) is not None


async def test_lock_of_an_empty_queue(manager: QueueManager, reader: QueueReader) -> None:
    await new_queue(manager, PATH)
    assert await reader.receive_locked(PATH, 0, 30) is None


async def test_a_waiting_lock_gets_a_message_sent_later(
    manager: QueueManager, reader: QueueReader, watched: WatchedWakeUps
) -> None:
    await new_queue(manager, PATH)
    waiting = asyncio.create_task(reader.receive_locked(PATH, 60_000, 30))
    await watched.until_waiting()
    await send_bodies(manager, PATH, [b"late"])
    locked = await asyncio.wait_for(waiting, WAIT_LIMIT_S)
    assert locked is not None and locked[0].properties.body == b"late"


async def test_an_abort_wakes_a_waiting_receive(
    manager: QueueManager, reader: QueueReader, watched: WatchedWakeUps
) -> None:
    await new_queue(manager, PATH)
    await send_bodies(manager, PATH, [b"a"])
    _, tag = await _lock(reader)
    waiting = asyncio.create_task(reader.receive(PATH, 60_000))
    await watched.until_waiting()
    await reader.end_lock(tag, commit=False)
    assert bodies_of([await asyncio.wait_for(waiting, WAIT_LIMIT_S)]) == [b"a"]


async def test_an_expiry_wakes_a_waiting_receive(
    manager: QueueManager, reader: QueueReader, watched: WatchedWakeUps, clock: SettableClock
) -> None:
    await new_queue(manager, PATH)
    await send_bodies(manager, PATH, [b"a"])
    await _lock(reader, lock_timeout_s=5)
    waiting = asyncio.create_task(reader.receive(PATH, 60_000))
    await watched.until_waiting()
    clock.advance(5)
    await manager.release_expired()
    assert bodies_of([await asyncio.wait_for(waiting, WAIT_LIMIT_S)]) == [b"a"]


async def test_ending_an_expired_lock_wakes_a_waiting_receive(
    manager: QueueManager, reader: QueueReader, watched: WatchedWakeUps, clock: SettableClock
) -> None:
    """The late end puts the message back; readers must hear of it without a sweep."""
    await new_queue(manager, PATH)
    await send_bodies(manager, PATH, [b"a"])
    _, tag = await _lock(reader, lock_timeout_s=5)
    waiting = asyncio.create_task(reader.receive(PATH, 60_000))
    await watched.until_waiting()
    clock.advance(5)
    with mq_error(MqErrorCode.MQ_ERROR_TRANSACTION_SEQUENCE):
        await reader.end_lock(tag, commit=False)
    assert bodies_of([await asyncio.wait_for(waiting, WAIT_LIMIT_S)]) == [b"a"]
