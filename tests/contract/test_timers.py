"""Timers (reference §7.7): TTBR and TTRQ deadlines, the first-message rule of transactions,
and the sweeper's pass (`QueueManager.expire_due`), driven by the settable clock."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from qm.clock import SettableClock
from qm.config import ManagerConfig, TransactionTtbr
from qm.cursors import CursorService
from qm.errors import MqErrorCode
from qm.manager import SINGLE_MESSAGE_TRANSACTION, QueueManager
from qm.model import INFINITE, JournalFlags, MessageProperties, NewMessage, QueueSettings
from qm.reading import QueueReader
from qm.store import Seek
from storage.engine import make_engine
from storage.store import SqlStore
from storage.wakeups import LocalWakeUps
from tests.contract.support import bodies_of, counts, mq_error, new_queue, store_message
from tests.contract.timer_support import (
    DEADLETTER,
    DEADXACT,
    NACK_REACH_QUEUE_TIMEOUT,
    NACK_RECEIVE_TIMEOUT,
    everything,
    expire,
    only,
)

pytestmark = pytest.mark.anyio

PATH = "private$/orders"
OTHER = "private$/invoices"
TRANSACTIONAL = QueueSettings(transactional=True)
DEAD = JournalFlags.DEADLETTER


def _timed(body: bytes, ttbr: int = INFINITE, ttrq: int = INFINITE, journal: int = DEAD) -> MessageProperties:
    return MessageProperties(body=body, time_to_be_received=ttbr, time_to_reach_queue=ttrq, journal=journal)


# -- deadlines at send --------------------------------------------------------------------


async def test_time_to_be_received_defaults_to_infinite_and_never_expires(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    await new_queue(manager, PATH)
    sent = await manager.send(PATH, MessageProperties(body=b"forever", journal=DEAD))
    assert sent.properties.time_to_be_received == INFINITE
    assert sent.ttbr_deadline is None and sent.ttrq_deadline is None
    assert await expire(manager, clock, 10 * 365 * 86_400) == 0
    received = await reader.receive(PATH, 0)
    assert received is not None and received.properties.time_to_be_received == INFINITE
    assert await counts(manager, DEADLETTER) == (0, 0)


async def test_deadlines_are_stored_absolute_from_the_clock(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    await new_queue(manager, PATH)
    start = clock.now()
    await manager.send(PATH, _timed(b"a", ttbr=600, ttrq=60))
    clock.advance(100)
    await manager.send(PATH, _timed(b"b", ttbr=600))
    first, second = await everything(reader, PATH)
    assert first.ttbr_deadline == start + timedelta(seconds=600)
    assert first.ttrq_deadline == start + timedelta(seconds=60)
    assert second.ttbr_deadline == start + timedelta(seconds=700)
    assert first.properties.time_to_be_received == 500  # what remains, as reads report it
    assert first.properties.time_to_reach_queue == 60  # as sent


async def test_a_later_time_to_reach_queue_is_clamped_to_the_time_to_be_received(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    await new_queue(manager, PATH)
    start = clock.now()
    clamped = await manager.send(PATH, _timed(b"clamped", ttbr=10, ttrq=100))
    kept = await manager.send(PATH, _timed(b"kept", ttbr=100, ttrq=10))
    infinite = await manager.send(PATH, _timed(b"infinite", ttbr=10))
    assert clamped.ttbr_deadline == clamped.ttrq_deadline == start + timedelta(seconds=10)
    assert (kept.ttbr_deadline, kept.ttrq_deadline) == (
        start + timedelta(seconds=100),
        start + timedelta(seconds=10),
    )
    assert infinite.ttrq_deadline == start + timedelta(seconds=10)
    stored = {message.properties.body: message for message in await everything(reader, PATH)}
    assert stored[b"clamped"].ttrq_deadline == start + timedelta(seconds=10)


async def test_a_time_to_reach_queue_does_not_expire_a_message_already_in_its_queue(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    """A local send reaches its queue at once: only the TTBR runs afterwards."""
    await new_queue(manager, PATH)
    await manager.send(PATH, _timed(b"arrived", ttrq=5))
    assert await expire(manager, clock, 3600) == 0
    assert bodies_of([await reader.receive(PATH, 0)]) == [b"arrived"]
    assert await counts(manager, DEADLETTER) == (0, 0)


# -- reads never return an expired message ------------------------------------------------


async def test_no_read_returns_a_message_past_its_deadline_before_the_sweeper_runs(
    manager: QueueManager, reader: QueueReader, cursors: CursorService, clock: SettableClock
) -> None:
    await new_queue(manager, PATH)
    expiring = await manager.send(PATH, _timed(b"expiring", ttbr=10))
    clock.advance(10)  # exactly at the deadline: expired
    assert await reader.peek(PATH, 0) is None
    assert await reader.browse(PATH, 0, 10) == []
    with mq_error(MqErrorCode.MQ_ERROR_MESSAGE_NOT_FOUND):
        await reader.by_lookup_id(PATH, Seek.FIRST)
    with mq_error(MqErrorCode.MQ_ERROR_MESSAGE_NOT_FOUND):
        await reader.by_lookup_id(PATH, Seek.CURRENT, expiring.lookup_id, receive=True)
    with mq_error(MqErrorCode.MQ_ERROR_MESSAGE_NOT_FOUND):
        await reader.by_message_id(PATH, message_id=expiring.message_id, receive=True)
    cursor = await cursors.open(PATH)
    assert await cursors.peek_current(cursor.id, 0) is None
    assert await reader.receive_locked(PATH, 0, 30) is None
    assert await reader.receive(PATH, 0) is None
    # Still stored until the sweeper removes it; then it is gone, dead-lettered.
    assert await counts(manager, PATH) == (1, 8)
    assert await manager.expire_due() == 1
    assert await counts(manager, PATH) == (0, 0)
    assert bodies_of([await only(reader, DEADLETTER)]) == [b"expiring"]


async def test_a_waiting_receive_does_not_take_a_message_that_expired_meanwhile(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    await new_queue(manager, PATH)
    await manager.send(PATH, _timed(b"late", ttbr=5))
    clock.advance(5)
    assert await reader.receive(PATH, 50) is None


async def test_a_read_reports_the_remaining_time_to_be_received_rounded_up(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    await new_queue(manager, PATH)
    await manager.send(PATH, _timed(b"timed", ttbr=3600))
    clock.advance(1000.5)
    peeked = await reader.peek(PATH, 0)
    [browsed] = await everything(reader, PATH)
    received = await reader.receive(PATH, 0)
    assert peeked is not None and received is not None
    assert {peeked.properties.time_to_be_received, browsed.properties.time_to_be_received} == {2600}
    assert received.properties.time_to_be_received == 2600


# -- the first-message rule for transactions ----------------------------------------------


async def test_messages_of_a_transaction_get_the_time_to_be_received_of_its_first(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    await new_queue(manager, PATH, TRANSACTIONAL)
    await new_queue(manager, OTHER, TRANSACTIONAL)
    transaction = await manager.begin_transaction()
    await manager.send(PATH, _timed(b"first", ttbr=100), transaction.id)
    await manager.send(OTHER, _timed(b"longer", ttbr=1000), transaction.id)
    await manager.send(PATH, _timed(b"infinite"), transaction.id)
    await manager.commit(transaction.id)
    stored = [*await everything(reader, PATH), *await everything(reader, OTHER)]
    assert {message.properties.time_to_be_received for message in stored} == {100}
    assert {message.ttbr_deadline for message in stored} == {clock.now() + timedelta(seconds=100)}
    assert await expire(manager, clock, 100) == 3
    assert sorted(bodies_of(await everything(reader, DEADXACT))) == [b"first", b"infinite", b"longer"]


async def test_an_infinite_first_message_makes_the_whole_transaction_infinite(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    await new_queue(manager, PATH, TRANSACTIONAL)
    transaction = await manager.begin_transaction()
    await manager.send(PATH, _timed(b"first"), transaction.id)
    await manager.send(PATH, _timed(b"short", ttbr=10), transaction.id)
    await manager.commit(transaction.id)
    assert await expire(manager, clock, 3600) == 0
    assert bodies_of(await everything(reader, PATH)) == [b"first", b"short"]


async def test_single_message_transactions_keep_their_own_time_to_be_received(
    manager: QueueManager, reader: QueueReader
) -> None:
    await new_queue(manager, PATH, TRANSACTIONAL)
    await manager.send(PATH, _timed(b"a", ttbr=100), SINGLE_MESSAGE_TRANSACTION)
    await manager.send(PATH, _timed(b"b", ttbr=1000), SINGLE_MESSAGE_TRANSACTION)
    remaining = [message.properties.time_to_be_received for message in await everything(reader, PATH)]
    assert remaining == [100, 1000]


async def test_separate_transactions_have_separate_first_messages(
    manager: QueueManager, reader: QueueReader
) -> None:
    await new_queue(manager, PATH, TRANSACTIONAL)
    one = await manager.begin_transaction()
    two = await manager.begin_transaction()
    await manager.send(PATH, _timed(b"one", ttbr=100), one.id)
    await manager.send(PATH, _timed(b"two", ttbr=200), two.id)
    await manager.send(PATH, _timed(b"one again", ttbr=999), one.id)
    await manager.send(PATH, _timed(b"two again", ttbr=999), two.id)
    await manager.commit(one.id)
    await manager.commit(two.id)
    remaining = {m.properties.body: m.properties.time_to_be_received for m in await everything(reader, PATH)}
    assert remaining == {b"one": 100, b"two": 200, b"one again": 100, b"two again": 200}


@pytest.mark.parametrize("manager_config", [ManagerConfig(transaction_ttbr=TransactionTtbr.PER_MESSAGE)])
async def test_per_message_setting_keeps_each_messages_time_to_be_received(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    await new_queue(manager, PATH, TRANSACTIONAL)
    transaction = await manager.begin_transaction()
    await manager.send(PATH, _timed(b"first", ttbr=100), transaction.id)
    await manager.send(PATH, _timed(b"longer", ttbr=1000), transaction.id)
    await manager.send(PATH, _timed(b"infinite"), transaction.id)
    await manager.commit(transaction.id)
    remaining = [message.properties.time_to_be_received for message in await everything(reader, PATH)]
    assert remaining == [100, 1000, INFINITE]
    assert await expire(manager, clock, 100) == 1
    assert bodies_of(await everything(reader, PATH)) == [b"longer", b"infinite"]
    assert await expire(manager, clock, 900) == 1
    assert bodies_of(await everything(reader, PATH)) == [b"infinite"]


# -- time to reach queue at commit --------------------------------------------------------


async def test_a_message_whose_ttrq_ran_out_before_commit_is_dead_lettered_not_delivered(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    await new_queue(manager, PATH, TRANSACTIONAL)
    transaction = await manager.begin_transaction()
    await manager.send(PATH, _timed(b"on time"), transaction.id)
    late = await manager.send(PATH, _timed(b"late", ttrq=5), transaction.id)
    await manager.send(PATH, _timed(b"late, not asking", ttrq=5, journal=0), transaction.id)
    clock.advance(5)
    await manager.commit(transaction.id)
    assert bodies_of(await everything(reader, PATH)) == [b"on time"]
    assert await counts(manager, PATH) == (1, 7)
    dead = await only(reader, DEADXACT)
    assert dead.properties.body == b"late"
    assert dead.properties.message_class == NACK_REACH_QUEUE_TIMEOUT
    assert dead.message_id == late.message_id
    assert dead.destination_queue == "private$\\orders"
    assert await counts(manager, DEADLETTER) == (0, 0)


async def test_a_ttrq_still_running_at_commit_delivers(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    await new_queue(manager, PATH, TRANSACTIONAL)
    transaction = await manager.begin_transaction()
    await manager.send(PATH, _timed(b"in time", ttrq=5), transaction.id)
    clock.advance(4.999)
    await manager.commit(transaction.id)
    assert bodies_of(await everything(reader, PATH)) == [b"in time"]
    assert await counts(manager, DEADXACT) == (0, 0)


# -- the sweeper --------------------------------------------------------------------------


async def test_one_pass_expires_a_message_deep_inside_a_big_queue(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    queue = await manager.get_queue(await new_queue(manager, PATH))
    await _bulk(manager, queue.id, 1000, b"before")
    expiring = await manager.send(PATH, _timed(b"expiring", ttbr=10))
    await _bulk(manager, queue.id, 1000, b"behind")
    assert await counts(manager, PATH) == (2001, 2000 * 6 + 8)
    assert await expire(manager, clock, 9.9) == 0
    assert await expire(manager, clock, 0.1) == 1
    assert await counts(manager, PATH) == (2000, 2000 * 6)
    neighbours = await reader.browse(PATH, expiring.lookup_id - 2, 3)
    assert bodies_of(neighbours) == [b"before", b"behind", b"behind"]
    assert (await only(reader, DEADLETTER)).message_id == expiring.message_id
    assert await manager.expire_due() == 0


async def _bulk(manager: QueueManager, queue_id: int, number: int, body: bytes) -> None:
    """Store many messages in one transaction (a send each would take minutes on SQLite)."""
    batch = [store_message(manager, queue_id, MessageProperties(body=body)) for _ in range(number)]
    await manager.store.messages.enqueue(batch)


@pytest.mark.parametrize("manager_config", [ManagerConfig(sweep_batch=3)])
async def test_one_pass_works_through_several_batches_in_every_queue(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    await new_queue(manager, PATH)
    await new_queue(manager, OTHER)
    await new_queue(manager, "public-queue")
    await new_queue(manager, "private$/txn", TRANSACTIONAL)
    for number in range(4):
        for path in (PATH, OTHER, "public-queue"):
            await manager.send(path, _timed(b"due", ttbr=10 + number, journal=0))
        await manager.send(PATH, _timed(b"later", ttbr=100))
    await manager.send("private$/txn", _timed(b"due", ttbr=5, journal=0), SINGLE_MESSAGE_TRANSACTION)
    assert await expire(manager, clock, 20) == 13
    assert bodies_of(await everything(reader, PATH)) == [b"later"] * 4
    for path in (OTHER, "public-queue", "private$/txn"):
        assert await counts(manager, path) == (0, 0)


async def test_expiry_happens_at_the_deadline_not_before(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    await new_queue(manager, PATH)
    await manager.send(PATH, _timed(b"ten", ttbr=10))
    await manager.send(PATH, _timed(b"twenty", ttbr=20))
    assert await expire(manager, clock, 9.999) == 0
    assert await expire(manager, clock, 0.001) == 1
    assert bodies_of(await everything(reader, PATH)) == [b"twenty"]
    assert await expire(manager, clock, 5) == 0
    assert await expire(manager, clock, 5) == 1
    assert [m.properties.body for m in await everything(reader, DEADLETTER)] == [b"ten", b"twenty"]


async def test_the_sweeper_skips_a_message_held_by_a_transaction_until_the_abort(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    await new_queue(manager, PATH, TRANSACTIONAL)
    sent = await manager.send(PATH, _timed(b"held", ttbr=10), SINGLE_MESSAGE_TRANSACTION)
    transaction = await manager.begin_transaction()
    assert bodies_of([await reader.receive(PATH, 0, transaction.id)]) == [b"held"]
    assert await expire(manager, clock, 20) == 0
    assert await counts(manager, PATH) == (1, 4)
    assert await counts(manager, DEADXACT) == (0, 0)
    await manager.abort(transaction.id)
    assert await reader.receive(PATH, 0) is None  # back in place, but past its deadline
    assert await manager.expire_due() == 1
    dead = await only(reader, DEADXACT)
    assert (dead.message_id, dead.properties.message_class) == (sent.message_id, NACK_RECEIVE_TIMEOUT)
    assert await counts(manager, PATH) == (0, 0)


async def test_a_message_held_by_a_transaction_past_its_deadline_is_received_at_commit(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    await new_queue(manager, PATH, TRANSACTIONAL)
    await manager.send(PATH, _timed(b"held", ttbr=10), SINGLE_MESSAGE_TRANSACTION)
    transaction = await manager.begin_transaction()
    await reader.receive(PATH, 0, transaction.id)
    assert await expire(manager, clock, 20) == 0
    await manager.commit(transaction.id)
    assert await counts(manager, PATH) == (0, 0)
    assert await manager.expire_due() == 0


async def test_the_sweeper_skips_a_two_phase_lock_until_it_expires(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    await new_queue(manager, PATH)
    await manager.send(PATH, _timed(b"locked", ttbr=10))
    assert await reader.receive_locked(PATH, 0, 60) is not None
    assert await expire(manager, clock, 30) == 0
    assert await counts(manager, PATH) == (1, 6)
    clock.advance(30)
    assert (await manager.release_expired()).locks_released == 1
    assert await manager.expire_due() == 1
    assert bodies_of([await only(reader, DEADLETTER)]) == [b"locked"]


async def test_an_uncommitted_send_is_not_swept(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    await new_queue(manager, PATH, TRANSACTIONAL)
    transaction = await manager.begin_transaction()
    await manager.send(PATH, _timed(b"pending", ttbr=10), transaction.id)
    assert await expire(manager, clock, 10) == 0
    assert await counts(manager, PATH) == (1, 7)
    await manager.commit(transaction.id)  # its TTRQ (clamped to the TTBR) ran out before commit
    assert await counts(manager, PATH) == (0, 0)
    dead = await only(reader, DEADXACT)
    assert dead.properties.message_class == NACK_REACH_QUEUE_TIMEOUT


async def test_copies_the_queue_manager_places_never_expire(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    await new_queue(manager, PATH, QueueSettings(journal=True))
    await manager.send(PATH, _timed(b"journaled", ttbr=10))
    await manager.send(PATH, _timed(b"dead", ttbr=10))
    await reader.receive(PATH, 0)
    assert await expire(manager, clock, 10) == 1
    assert await expire(manager, clock, 10 * 365 * 86_400) == 0
    journaled = await only(reader, f"{PATH};journal")
    dead = await only(reader, DEADLETTER)
    assert journaled.ttbr_deadline is None and dead.ttbr_deadline is None
    assert journaled.properties.time_to_be_received == dead.properties.time_to_be_received == INFINITE


async def test_two_sweepers_on_one_database_never_handle_a_message_twice(
    manager: QueueManager, reader: QueueReader, clock: SettableClock, database_url: str
) -> None:
    """Two gateway processes (two engines, two queue managers) sweep the same due messages."""
    queue = await manager.get_queue(await new_queue(manager, PATH))
    now = clock.now()
    batch = [
        NewMessage(
            queue_id=queue.id,
            properties=MessageProperties(body=b"%04d" % number, time_to_be_received=10, journal=DEAD),
            message_id="",
            sent_time=now,
            arrived_time=now,
            source_machine=manager.guid,
            ttbr_deadline=now + timedelta(seconds=10),
            ttrq_deadline=now + timedelta(seconds=10),
        )
        for number in range(600)
    ]
    await manager.store.messages.enqueue(batch)
    config = ManagerConfig(sweep_batch=20)
    stores = [SqlStore(make_engine(database_url)) for _ in range(2)]
    sweepers = [QueueManager(store, LocalWakeUps(), clock, config) for store in stores]
    try:
        for sweeper in sweepers:
            await sweeper.start()
        clock.advance(10)
        expired = await asyncio.gather(*(sweeper.expire_due() for sweeper in sweepers))
    finally:
        for store in stores:
            await store.close()
    assert sum(expired) == 600
    assert await counts(manager, PATH) == (0, 0)
    assert await counts(manager, DEADLETTER) == (600, 2400)
    copies = await everything(reader, DEADLETTER)
    assert sorted(bodies_of(copies)) == [b"%04d" % number for number in range(600)]
    assert len({copy.message_id for copy in copies}) == 600
