"""Transactions (reference §7.8): visibility, commit, abort, timeouts, and usage rules."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from qm.clock import SettableClock
from qm.cursors import CursorService
from qm.errors import MqErrorCode
from qm.manager import SINGLE_MESSAGE_TRANSACTION, QueueManager
from qm.model import MessageProperties, QueueSettings
from qm.reading import QueueReader
from qm.store import Seek
from tests.contract.support import (
    WAIT_LIMIT_S,
    WatchedWakeUps,
    bodies_of,
    counts,
    mq_error,
    new_queue,
)

pytestmark = pytest.mark.anyio

PATH = "private$/orders"
OTHER = "private$/invoices"
TRANSACTIONAL = QueueSettings(transactional=True)


async def _transactional_queue(manager: QueueManager, *bodies: bytes, path: str = PATH) -> str:
    await new_queue(manager, path, TRANSACTIONAL)
    for body in bodies:
        await manager.send(path, MessageProperties(body=body), SINGLE_MESSAGE_TRANSACTION)
    return path


async def _drain(reader: QueueReader, path: str = PATH) -> list[bytes]:
    bodies = []
    while (message := await reader.receive(path, 0)) is not None:
        bodies.append(message.properties.body)
    return bodies


async def test_begin(manager: QueueManager, clock: SettableClock) -> None:
    transaction = await manager.begin_transaction()
    assert transaction.created_at == clock.now()
    assert transaction.expires_at == clock.now() + timedelta(seconds=manager.config.transaction_timeout_s)
    assert await manager.transaction(transaction.id) == transaction
    other = await manager.begin_transaction()
    assert other.id != transaction.id


async def test_sends_are_invisible_until_commit(manager: QueueManager, reader: QueueReader) -> None:
    await _transactional_queue(manager)
    transaction = await manager.begin_transaction()
    await manager.send(PATH, MessageProperties(body=b"1"), transaction.id)
    await manager.send(PATH, MessageProperties(body=b"2"), transaction.id)
    assert await reader.peek(PATH, 0) is None
    assert await reader.receive(PATH, 0) is None
    assert await reader.browse(PATH, 0, 10) == []
    with mq_error(MqErrorCode.MQ_ERROR_MESSAGE_NOT_FOUND):
        await reader.by_lookup_id(PATH, Seek.FIRST)
    await manager.commit(transaction.id)
    assert await _drain(reader) == [b"1", b"2"]


async def test_aborted_sends_vanish(manager: QueueManager, reader: QueueReader) -> None:
    await _transactional_queue(manager)
    transaction = await manager.begin_transaction()
    await manager.send(PATH, MessageProperties(body=b"never"), transaction.id)
    await manager.abort(transaction.id)
    assert await _drain(reader) == []
    assert await counts(manager, PATH) == (0, 0)


async def test_receives_are_locked_until_commit(manager: QueueManager, reader: QueueReader) -> None:
    await _transactional_queue(manager, b"a", b"b")
    transaction = await manager.begin_transaction()
    received = await reader.receive(PATH, 0, transaction.id)
    assert bodies_of([received]) == [b"a"]
    assert bodies_of(await reader.browse(PATH, 0, 10)) == [b"b"]
    assert await counts(manager, PATH) == (2, 2)
    await manager.commit(transaction.id)
    assert await counts(manager, PATH) == (1, 1)
    assert await _drain(reader) == [b"b"]


async def test_aborted_receives_return_in_place_with_an_abort_count(
    manager: QueueManager, reader: QueueReader
) -> None:
    await _transactional_queue(manager, b"a", b"b", b"c")
    for expected_count in (1, 2):
        transaction = await manager.begin_transaction()
        assert bodies_of([await reader.receive(PATH, 0, transaction.id)]) == [b"a"]
        await manager.send(PATH, MessageProperties(body=b"later"), SINGLE_MESSAGE_TRANSACTION)
        await manager.abort(transaction.id)
        head = await reader.peek(PATH, 0)
        assert head is not None and head.properties.body == b"a"
        assert head.abort_count == expected_count
    assert await _drain(reader) == [b"a", b"b", b"c", b"later", b"later"]


async def test_commit_order_within_a_transaction(manager: QueueManager, reader: QueueReader) -> None:
    await _transactional_queue(manager, b"before")
    transaction = await manager.begin_transaction()
    for body in (b"t1", b"t2", b"t3"):
        await manager.send(PATH, MessageProperties(body=body, priority=7), transaction.id)
    await manager.commit(transaction.id)
    assert await _drain(reader) == [b"before", b"t1", b"t2", b"t3"]


async def test_one_transaction_across_two_queues(manager: QueueManager, reader: QueueReader) -> None:
    await _transactional_queue(manager, b"in-orders")
    await _transactional_queue(manager, path=OTHER)
    transaction = await manager.begin_transaction()
    assert bodies_of([await reader.receive(PATH, 0, transaction.id)]) == [b"in-orders"]
    await manager.send(OTHER, MessageProperties(body=b"invoice"), transaction.id)
    await manager.commit(transaction.id)
    assert await _drain(reader, PATH) == []
    assert await _drain(reader, OTHER) == [b"invoice"]


async def test_abort_across_two_queues(manager: QueueManager, reader: QueueReader) -> None:
    await _transactional_queue(manager, b"in-orders")
    await _transactional_queue(manager, path=OTHER)
    transaction = await manager.begin_transaction()
    await reader.receive(PATH, 0, transaction.id)
    await manager.send(OTHER, MessageProperties(body=b"invoice"), transaction.id)
    await manager.abort(transaction.id)
    assert await _drain(reader, PATH) == [b"in-orders"]
    assert await _drain(reader, OTHER) == []
    assert await counts(manager, OTHER) == (0, 0)


async def test_first_and_last_in_transaction(manager: QueueManager, reader: QueueReader) -> None:
    await _transactional_queue(manager)
    await _transactional_queue(manager, path=OTHER)
    transaction = await manager.begin_transaction()
    await manager.send(PATH, MessageProperties(body=b"1"), transaction.id)
    await manager.send(OTHER, MessageProperties(body=b"2"), transaction.id)
    await manager.send(PATH, MessageProperties(body=b"3"), transaction.id)
    await manager.commit(transaction.id)
    lone = await manager.begin_transaction()
    await manager.send(OTHER, MessageProperties(body=b"alone"), lone.id)
    await manager.commit(lone.id)
    flags = {}
    for path in (PATH, OTHER):
        while (message := await reader.receive(path, 0)) is not None:
            flags[message.properties.body] = (message.first_in_transaction, message.last_in_transaction)
    assert flags == {b"1": (True, False), b"2": (False, False), b"3": (False, True), b"alone": (True, True)}


async def test_single_message_transaction(manager: QueueManager, reader: QueueReader) -> None:
    await _transactional_queue(manager)
    sent = await manager.send(PATH, MessageProperties(body=b"s", priority=6), SINGLE_MESSAGE_TRANSACTION)
    assert sent.properties.priority == 0
    assert sent.transaction_id is None
    received = await reader.receive(PATH, 0)
    assert received is not None and received.properties.priority == 0


async def test_single_message_transaction_receives(
    manager: QueueManager, reader: QueueReader, cursors: CursorService
) -> None:
    """MQ_SINGLE_MESSAGE on a receive: the receive is its own transaction, committed at once."""
    await _transactional_queue(manager)
    single = SINGLE_MESSAGE_TRANSACTION
    sent = [
        await manager.send(PATH, MessageProperties(body=body), single)
        for body in (b"fifo", b"lookup", b"by-id", b"cursor")
    ]
    assert bodies_of([await reader.receive(PATH, 0, single)]) == [b"fifo"]
    taken = await reader.by_lookup_id(PATH, Seek.CURRENT, sent[1].lookup_id, receive=True, transaction=single)
    assert taken.properties.body == b"lookup"
    taken = await reader.by_message_id(PATH, message_id=sent[2].message_id, receive=True, transaction=single)
    assert taken.properties.body == b"by-id"
    cursor = await cursors.open(PATH)
    assert bodies_of([await cursors.receive_current(cursor.id, 0, single)]) == [b"cursor"]
    assert await counts(manager, PATH) == (0, 0)
    plain = await new_queue(manager, "private$/plain")
    await manager.send(plain, MessageProperties(body=b"p"))
    with mq_error(MqErrorCode.MQ_ERROR_TRANSACTION_USAGE):
        await reader.receive(plain, 0, single)
    assert await counts(manager, plain) == (1, 1)


async def test_non_transactional_receive_from_a_transactional_queue(
    manager: QueueManager, reader: QueueReader
) -> None:
    await _transactional_queue(manager, b"a")
    assert bodies_of([await reader.receive(PATH, 0)]) == [b"a"]


async def test_usage_rules(manager: QueueManager, reader: QueueReader, cursors: CursorService) -> None:
    await _transactional_queue(manager, b"t")
    plain = await new_queue(manager, "private$/plain")
    await manager.send(plain, MessageProperties(body=b"p"))
    transaction = await manager.begin_transaction()
    with mq_error(MqErrorCode.MQ_ERROR_TRANSACTION_USAGE):
        await manager.send(PATH, MessageProperties(body=b"x"))
    with mq_error(MqErrorCode.MQ_ERROR_TRANSACTION_USAGE):
        await manager.send(plain, MessageProperties(body=b"x"), transaction.id)
    with mq_error(MqErrorCode.MQ_ERROR_TRANSACTION_USAGE):
        await manager.send(plain, MessageProperties(body=b"x"), SINGLE_MESSAGE_TRANSACTION)
    with mq_error(MqErrorCode.MQ_ERROR_TRANSACTION_USAGE):
        await reader.receive(plain, 0, transaction.id)
    with mq_error(MqErrorCode.MQ_ERROR_TRANSACTION_USAGE):
        await reader.by_lookup_id(plain, Seek.FIRST, receive=True, transaction=transaction.id)
    with mq_error(MqErrorCode.MQ_ERROR_TRANSACTION_USAGE):
        await reader.by_message_id(plain, correlation_id=b"c" * 20, receive=True, transaction=transaction.id)
    cursor = await cursors.open(plain)
    with mq_error(MqErrorCode.MQ_ERROR_TRANSACTION_USAGE):
        await cursors.receive_current(cursor.id, 0, transaction.id)
    assert await counts(manager, PATH) == (1, 1)
    assert await counts(manager, plain) == (1, 1)


async def test_finished_or_unknown_transactions(manager: QueueManager, reader: QueueReader) -> None:
    await _transactional_queue(manager, b"a")
    committed = (await manager.begin_transaction()).id
    await manager.commit(committed)
    aborted = (await manager.begin_transaction()).id
    await manager.abort(aborted)
    for transaction_id in (committed, aborted, "no-such-transaction"):
        with mq_error(MqErrorCode.MQ_ERROR_TRANSACTION_SEQUENCE):
            await manager.commit(transaction_id)
        with mq_error(MqErrorCode.MQ_ERROR_TRANSACTION_SEQUENCE):
            await manager.abort(transaction_id)
        with mq_error(MqErrorCode.MQ_ERROR_TRANSACTION_SEQUENCE):
            await manager.transaction(transaction_id)
        with mq_error(MqErrorCode.MQ_ERROR_TRANSACTION_SEQUENCE):
            await manager.send(PATH, MessageProperties(body=b"x"), transaction_id)
        with mq_error(MqErrorCode.MQ_ERROR_TRANSACTION_SEQUENCE):
            await reader.receive(PATH, 0, transaction_id)
        with mq_error(MqErrorCode.MQ_ERROR_TRANSACTION_SEQUENCE):
            await reader.by_lookup_id(PATH, Seek.FIRST, receive=True, transaction=transaction_id)
    assert await _drain(reader) == [b"a"]


async def test_an_idle_transaction_is_aborted(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    await _transactional_queue(manager, b"a")
    transaction = await manager.begin_transaction()
    await reader.receive(PATH, 0, transaction.id)
    await manager.send(PATH, MessageProperties(body=b"sent"), transaction.id)
    clock.advance(manager.config.transaction_timeout_s - 1)
    assert (await manager.release_expired()).transactions_aborted == 0
    clock.advance(1)
    report = await manager.release_expired()
    assert report.transactions_aborted == 1
    assert (await manager.get_queue(PATH)).id in report.queue_ids
    with mq_error(MqErrorCode.MQ_ERROR_TRANSACTION_SEQUENCE):
        await manager.commit(transaction.id)
    head = await reader.peek(PATH, 0)
    assert head is not None and head.abort_count == 1
    assert await _drain(reader) == [b"a"]


async def test_activity_keeps_a_transaction_alive(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    await _transactional_queue(manager)
    timeout = manager.config.transaction_timeout_s
    transaction = await manager.begin_transaction()
    clock.advance(timeout - 1)
    await manager.send(PATH, MessageProperties(body=b"1"), transaction.id)
    clock.advance(timeout - 1)
    await manager.send(PATH, MessageProperties(body=b"2"), transaction.id)
    clock.advance(timeout - 1)
    assert (await manager.release_expired()).transactions_aborted == 0
    await manager.commit(transaction.id)
    assert await _drain(reader) == [b"1", b"2"]


async def test_a_timed_out_transaction_cannot_be_ended_before_the_sweep(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    """Timed out is timed out, whether or not housekeeping has run yet: it is aborted."""
    await _transactional_queue(manager, b"a", b"b")
    transactions = [await manager.begin_transaction() for _ in range(2)]
    for transaction in transactions:
        await reader.receive(PATH, 0, transaction.id)
        await manager.send(PATH, MessageProperties(body=b"sent"), transaction.id)
    clock.advance(manager.config.transaction_timeout_s)
    for transaction, end in zip(transactions, (manager.commit, manager.abort), strict=True):
        with mq_error(MqErrorCode.MQ_ERROR_TRANSACTION_SEQUENCE):
            await end(transaction.id)
    assert (await manager.release_expired()).transactions_aborted == 0
    assert await _drain(reader) == [b"a", b"b"]


async def test_commit_wakes_a_waiting_receive(
    manager: QueueManager, reader: QueueReader, watched: WatchedWakeUps
) -> None:
    await _transactional_queue(manager)
    transaction = await manager.begin_transaction()
    await manager.send(PATH, MessageProperties(body=b"committed"), transaction.id)
    waiting = asyncio.create_task(reader.receive(PATH, 60_000))
    await watched.until_waiting()
    await manager.commit(transaction.id)
    assert bodies_of([await asyncio.wait_for(waiting, WAIT_LIMIT_S)]) == [b"committed"]


async def test_abort_wakes_a_waiting_receive(
    manager: QueueManager, reader: QueueReader, watched: WatchedWakeUps
) -> None:
    await _transactional_queue(manager, b"a")
    transaction = await manager.begin_transaction()
    await reader.receive(PATH, 0, transaction.id)
    waiting = asyncio.create_task(reader.receive(PATH, 60_000))
    await watched.until_waiting()
    await manager.abort(transaction.id)
    assert bodies_of([await asyncio.wait_for(waiting, WAIT_LIMIT_S)]) == [b"a"]


async def test_a_transactional_waiting_receive(
    manager: QueueManager, reader: QueueReader, watched: WatchedWakeUps
) -> None:
    await _transactional_queue(manager)
    transaction = await manager.begin_transaction()
    waiting = asyncio.create_task(reader.receive(PATH, 60_000, transaction.id))
    await watched.until_waiting()
    await manager.send(PATH, MessageProperties(body=b"s"), SINGLE_MESSAGE_TRANSACTION)
    assert bodies_of([await asyncio.wait_for(waiting, WAIT_LIMIT_S)]) == [b"s"]
    await manager.abort(transaction.id)
    assert await _drain(reader) == [b"s"]
