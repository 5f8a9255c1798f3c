"""Dead-letter queues (reference §7.6, §7.11, §7.12, §8.2-§8.3): which queue, which class,
what the copy keeps, and how applications reach the queues by format name."""

from __future__ import annotations

import uuid

import pytest

from qm.clock import SettableClock
from qm.errors import MqErrorCode
from qm.manager import SINGLE_MESSAGE_TRANSACTION, QueueManager
from qm.model import Delivery, JournalFlags, Message, MessageProperties, QueueSettings
from qm.reading import QueueReader
from qm.store import Seek
from tests.contract.support import bodies_of, counts, mq_error, new_queue
from tests.contract.timer_support import (
    DEADLETTER,
    DEADXACT,
    NACK_Q_DELETED,
    NACK_Q_EXCEED_QUOTA,
    NACK_Q_PURGED,
    NACK_RECEIVE_TIMEOUT,
    SYSTEM_QUEUES,
    everything,
    expire,
    only,
)

pytestmark = pytest.mark.anyio

PATH = "private$/orders"
TRANSACTIONAL = QueueSettings(transactional=True)
DEAD = JournalFlags.DEADLETTER
REMOTE_SENDER = uuid.UUID("0f0e0d0c-0b0a-4908-8706-050403020100")


def _rich(body: bytes = b"payload", journal: int = DEAD, **changes: object) -> MessageProperties:
    """A message with every property the dead-letter copy must keep set to a non-default."""
    properties = MessageProperties(
        body=body,
        label="order 17",
        body_type=8,
        priority=6,
        correlation_id=b"c" * 20,
        app_specific=4711,
        extension=b"ext",
        response_queue="DIRECT=OS:client01\\private$\\replies",
        admin_queue="DIRECT=OS:client01\\private$\\acks",
        acknowledge=0x0E,
        journal=journal,
        delivery=Delivery.EXPRESS,
        time_to_be_received=10,
    )
    return MessageProperties(**{**_fields(properties), **changes})  # type: ignore[arg-type]


def _fields(properties: MessageProperties) -> dict[str, object]:
    return {name: getattr(properties, name) for name in MessageProperties.__slots__}


def _assert_copy(copy: Message, original: Message, message_class: int, destination: str) -> None:
    """Body and properties kept, class rewritten, original queue recorded (reference §7.12)."""
    assert copy.properties.message_class == message_class
    assert copy.destination_queue == destination
    assert copy.message_id == original.message_id
    assert copy.lookup_id != original.lookup_id
    assert copy.source_machine == original.source_machine
    assert copy.sent_time == original.sent_time
    kept = ["body", "label", "body_type", "correlation_id", "app_specific", "extension", "response_queue"]
    kept += ["admin_queue", "acknowledge", "journal", "delivery"]
    for name in kept:
        assert getattr(copy.properties, name) == getattr(original.properties, name), name


# -- which queue, which class -------------------------------------------------------------


async def test_an_expired_message_asking_for_it_goes_to_deadletter_with_receive_timeout(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    await new_queue(manager, PATH)
    sent = await manager.send(PATH, _rich())
    assert await expire(manager, clock, 10) == 1
    copy = await only(reader, DEADLETTER)
    _assert_copy(copy, sent, NACK_RECEIVE_TIMEOUT, "private$\\orders")
    assert copy.properties.priority == 6
    assert await counts(manager, DEADLETTER) == (1, len(b"payload") + len(b"ext"))
    assert await counts(manager, PATH) == (0, 0)
    assert await counts(manager, DEADXACT) == (0, 0)


@pytest.mark.parametrize("journal", [JournalFlags.NONE, JournalFlags.JOURNAL])
async def test_without_the_deadletter_flag_an_expired_message_is_discarded(
    manager: QueueManager, clock: SettableClock, journal: int
) -> None:
    await new_queue(manager, PATH)
    await manager.send(PATH, _rich(journal=journal))
    assert await expire(manager, clock, 10) == 1
    assert await counts(manager, PATH) == (0, 0)
    for system_queue in (DEADLETTER, DEADXACT):
        assert await counts(manager, system_queue) == (0, 0)


async def test_an_expired_transactional_message_sent_here_goes_to_deadxact(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    await new_queue(manager, PATH, TRANSACTIONAL)
    sent = await manager.send(PATH, _rich(), SINGLE_MESSAGE_TRANSACTION)
    await manager.send(PATH, _rich(b"discarded", journal=0), SINGLE_MESSAGE_TRANSACTION)
    assert await expire(manager, clock, 10) == 2
    copy = await only(reader, DEADXACT)
    _assert_copy(copy, sent, NACK_RECEIVE_TIMEOUT, "private$\\orders")
    assert copy.properties.priority == 0  # transactional messages have priority 0
    assert await counts(manager, DEADLETTER) == (0, 0)


async def test_a_transactional_message_of_a_remote_sender_is_not_dead_lettered_here(
    manager: QueueManager, clock: SettableClock
) -> None:
    """Its sender keeps its own transactional dead-letter queue (reference §7.12)."""
    await new_queue(manager, PATH, TRANSACTIONAL)
    await manager.send(PATH, _rich(source_machine=REMOTE_SENDER), SINGLE_MESSAGE_TRANSACTION)
    assert await expire(manager, clock, 10) == 1
    for system_queue in SYSTEM_QUEUES:
        assert await counts(manager, system_queue) == (0, 0)


async def test_a_non_transactional_message_of_a_remote_sender_dies_in_this_deadletter(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    await new_queue(manager, PATH)
    sent = await manager.send(PATH, _rich(source_machine=REMOTE_SENDER))
    assert await expire(manager, clock, 10) == 1
    copy = await only(reader, DEADLETTER)
    _assert_copy(copy, sent, NACK_RECEIVE_TIMEOUT, "private$\\orders")
    assert copy.source_machine == REMOTE_SENDER


async def test_purge_dead_letters_what_asks_for_it_with_queue_purged(
    manager: QueueManager, reader: QueueReader
) -> None:
    await new_queue(manager, PATH)
    await new_queue(manager, "private$/txn", TRANSACTIONAL)
    asking = await manager.send(PATH, _rich(b"asking"))
    await manager.send(PATH, _rich(b"not asking", journal=0))
    transactional = await manager.send("private$/txn", _rich(b"xact"), SINGLE_MESSAGE_TRANSACTION)
    assert await manager.purge_queue(PATH) == 2
    assert await manager.purge_queue("private$/txn") == 1
    _assert_copy(await only(reader, DEADLETTER), asking, NACK_Q_PURGED, "private$\\orders")
    _assert_copy(await only(reader, DEADXACT), transactional, NACK_Q_PURGED, "private$\\txn")


async def test_a_large_purge_dead_letters_every_message_asking_for_it(
    manager: QueueManager, reader: QueueReader
) -> None:
    """Purge removes messages with consequences in batches (of 500): none may be left out."""
    await new_queue(manager, PATH)
    for number in range(1203):
        await manager.send(PATH, MessageProperties(body=b"%04d" % number, journal=number % 2))
    assert await manager.purge_queue(PATH) == 1203
    assert await counts(manager, PATH) == (0, 0)
    assert await counts(manager, DEADLETTER) == (601, 601 * 4)


async def test_a_purge_pending_message_is_dead_lettered_when_its_lock_ends_unreceived(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    await new_queue(manager, PATH)
    await new_queue(manager, "private$/txn", TRANSACTIONAL)
    for ending in ("abort", "expiry", "commit"):
        await manager.send(PATH, _rich(ending.encode(), time_to_be_received=3600))
        locked = await reader.receive_locked(PATH, 0, 30)
        assert locked is not None
        assert await manager.purge_queue(PATH) == 0
        if ending == "expiry":
            clock.advance(30)
            await manager.release_expired()
        else:
            await reader.end_lock(locked[1], commit=ending == "commit")
    await manager.send(
        "private$/txn", _rich(b"xact abort", time_to_be_received=3600), SINGLE_MESSAGE_TRANSACTION
    )
    transaction = await manager.begin_transaction()
    await reader.receive("private$/txn", 0, transaction.id)
    await manager.purge_queue("private$/txn")
    await manager.abort(transaction.id)
    dead = await everything(reader, DEADLETTER)
    assert bodies_of(dead) == [b"abort", b"expiry"]  # a committed lock was received, not purged
    assert {copy.properties.message_class for copy in dead} == {NACK_Q_PURGED}
    xact = await only(reader, DEADXACT)
    assert (xact.properties.body, xact.properties.message_class) == (b"xact abort", NACK_Q_PURGED)


async def test_a_send_purged_before_its_transaction_commits_is_dead_lettered_at_commit(
    manager: QueueManager, reader: QueueReader
) -> None:
    await new_queue(manager, PATH, TRANSACTIONAL)
    transaction = await manager.begin_transaction()
    sent = await manager.send(PATH, _rich(time_to_be_received=3600), transaction.id)
    await manager.purge_queue(PATH)
    await manager.commit(transaction.id)
    assert await counts(manager, PATH) == (0, 0)
    copy = await only(reader, DEADXACT)
    assert (copy.message_id, copy.properties.message_class) == (sent.message_id, NACK_Q_PURGED)


async def test_deleting_a_queue_dead_letters_its_messages_with_queue_deleted(
    manager: QueueManager, reader: QueueReader
) -> None:
    await new_queue(manager, PATH, QueueSettings(journal=True))
    await new_queue(manager, "private$/txn", TRANSACTIONAL)
    asking = await manager.send(PATH, _rich(b"asking"))
    await manager.send(PATH, _rich(b"not asking", journal=0))
    await manager.send(PATH, _rich(b"journaled"))
    await reader.by_lookup_id(PATH, Seek.LAST, receive=True)  # a copy now sits in the journal
    transactional = await manager.send("private$/txn", _rich(b"xact"), SINGLE_MESSAGE_TRANSACTION)
    assert await manager.delete_queue(PATH) == 3  # two messages and the journal copy
    assert await manager.delete_queue("private$/txn") == 1
    _assert_copy(await only(reader, DEADLETTER), asking, NACK_Q_DELETED, "private$\\orders")
    _assert_copy(await only(reader, DEADXACT), transactional, NACK_Q_DELETED, "private$\\txn")
    with mq_error(MqErrorCode.MQ_ERROR_QUEUE_NOT_FOUND):
        await manager.get_queue(PATH)


async def test_a_message_refused_for_the_queue_quota_is_dead_lettered_with_exceed_quota(
    manager: QueueManager, reader: QueueReader
) -> None:
    await new_queue(manager, PATH, QueueSettings(quota_kb=0))
    await new_queue(manager, "private$/txn", QueueSettings(transactional=True, quota_kb=0))
    with mq_error(MqErrorCode.MQ_ERROR_INSUFFICIENT_RESOURCES):
        await manager.send(PATH, _rich(b"too big"))
    with mq_error(MqErrorCode.MQ_ERROR_INSUFFICIENT_RESOURCES):
        await manager.send(PATH, _rich(b"too big, not asking", journal=0))
    with mq_error(MqErrorCode.MQ_ERROR_INSUFFICIENT_RESOURCES):
        await manager.send("private$/txn", _rich(b"xact too big"), SINGLE_MESSAGE_TRANSACTION)
    copy = await only(reader, DEADLETTER)
    assert copy.properties.message_class == NACK_Q_EXCEED_QUOTA
    assert copy.properties.body == b"too big" and copy.properties.label == "order 17"
    assert copy.destination_queue == "private$\\orders"
    assert copy.message_id  # the refused message had no ID yet: the copy got one
    xact = await only(reader, DEADXACT)
    assert (xact.properties.body, xact.properties.message_class) == (b"xact too big", NACK_Q_EXCEED_QUOTA)
    assert await counts(manager, PATH) == (0, 0)


# -- the dead-letter queues themselves ----------------------------------------------------


async def test_copies_from_one_pass_are_placed_in_deadline_order(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    """A late pass handles several expiries at once; the dead-letter queue still shows them
    in the order their deadlines passed (then queue order), as a punctual sweeper would."""
    await new_queue(manager, PATH)
    for body, seconds in ((b"third", 12), (b"second", 11), (b"first", 10), (b"fourth", 12)):
        await manager.send(PATH, _rich(body, priority=3, time_to_be_received=seconds))
    assert await expire(manager, clock, 12) == 4
    assert bodies_of(await everything(reader, DEADLETTER)) == [b"first", b"second", b"third", b"fourth"]


async def test_purging_a_dead_letter_queue_or_a_journal_produces_no_further_copies(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    """Copies keep the DEADLETTER flag; removing them from the queue manager's own queues
    must not dead-letter them again (nor acknowledge them)."""
    await new_queue(manager, PATH, QueueSettings(journal=True))
    await new_queue(manager, "private$/txn", TRANSACTIONAL)
    await manager.send(PATH, _rich(b"received", time_to_be_received=3600))
    await reader.receive(PATH, 0)
    await manager.send(PATH, _rich(b"expired"))
    await manager.send("private$/txn", _rich(b"xact"), SINGLE_MESSAGE_TRANSACTION)
    assert await expire(manager, clock, 10) == 2
    assert await manager.purge_queue(DEADLETTER) == 1
    assert await manager.purge_queue(DEADXACT) == 1
    assert await manager.purge_queue(f"{PATH};journal") == 1
    for queue in (DEADLETTER, DEADXACT, f"{PATH};journal"):
        assert await counts(manager, queue) == (0, 0)


async def test_applications_read_peek_and_remove_in_dead_letter_queues(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    await new_queue(manager, PATH)
    sent = [
        await manager.send(PATH, _rich(body, time_to_be_received=seconds))
        for body, seconds in ((b"one", 10), (b"two", 11), (b"three", 12))
    ]
    assert [await expire(manager, clock, seconds) for seconds in (10, 1, 1)] == [1, 1, 1]
    assert bodies_of([await reader.peek(DEADLETTER, 0)]) == [b"one"]
    first = await reader.by_lookup_id(DEADLETTER, Seek.FIRST)
    by_id = await reader.by_message_id(DEADLETTER, message_id=sent[1].message_id, receive=True)
    assert by_id.properties.body == b"two"
    assert bodies_of([await reader.receive(DEADLETTER, 0)]) == [b"one"]
    assert first.properties.body == b"one"
    assert await manager.purge_queue(DEADLETTER) == 1
    assert await counts(manager, DEADLETTER) == (0, 0)


@pytest.mark.parametrize("name", ["system$;deadletter", "system$;deadxact", "SYSTEM$;DeadLetter"])
async def test_applications_never_send_to_a_dead_letter_queue(manager: QueueManager, name: str) -> None:
    for target in (name, f"DIRECT=OS:.\\{name}", f"MACHINE={{{manager.guid}}};{name.split(';')[1]}"):
        with mq_error(MqErrorCode.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION):
            await manager.send(target, MessageProperties(body=b"x"))
    with mq_error(MqErrorCode.MQ_ERROR_ACCESS_DENIED):
        await manager.delete_queue(name)
    for system_queue in SYSTEM_QUEUES:
        assert await counts(manager, system_queue) == (0, 0)


# -- format names -------------------------------------------------------------------------


async def test_dead_letter_and_journal_queues_resolve_from_their_format_names(manager: QueueManager) -> None:
    await new_queue(manager, PATH)
    guid = manager.guid
    expected = {
        f"MACHINE={{{guid}}};DEADLETTER": DEADLETTER,
        f"MACHINE={guid};deadxact": DEADXACT,
        f"machine={{{str(guid).upper()}}};JOURNAL": "system$;journal",
        "DIRECT=OS:.\\SYSTEM$;DEADLETTER": DEADLETTER,
        "DIRECT=OS:localhost\\system$;deadxact": DEADXACT,
        "DIRECT=TCP:127.0.0.1\\SYSTEM$;JOURNAL": "system$;journal",
        "FormatName:DIRECT=OS:.\\system$;deadletter": DEADLETTER,
        "DIRECT=OS:.\\private$\\orders": PATH,
        "DIRECT=OS:LOCALHOST\\PRIVATE$\\Orders;journal": f"{PATH};journal",
        "DIRECT=http://localhost/msmq/private$/orders": PATH,
        "system$;deadletter": DEADLETTER,
    }
    for name, path in expected.items():
        assert (await manager.get_queue(name)).id == (await manager.get_queue(path)).id, name


@pytest.mark.parametrize(
    "name",
    [
        "MACHINE={0f0e0d0c-0b0a-4908-8706-050403020100};DEADLETTER",
        "DIRECT=OS:otherhost\\SYSTEM$;DEADLETTER",
        "DIRECT=OS:otherhost\\private$\\orders",
        "DIRECT=TCP:10.1.2.3\\private$\\orders",
        "DIRECT=HTTP://gw02.example.net/msmq/private$/orders",
        "PRIVATE=0f0e0d0c-0b0a-4908-8706-050403020100\\00000001",
        "PUBLIC=0f0e0d0c-0b0a-4908-8706-050403020100",
    ],
)
async def test_format_names_of_other_computers_are_unsupported_here(manager: QueueManager, name: str) -> None:
    await new_queue(manager, PATH)
    with mq_error(MqErrorCode.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION):
        await manager.get_queue(name)
    with mq_error(MqErrorCode.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION):
        await manager.send(name, MessageProperties(body=b"x"))
    with mq_error(MqErrorCode.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION):
        await manager.purge_queue(name)
    assert await counts(manager, PATH) == (0, 0)


@pytest.mark.parametrize(
    "name",
    ["MACHINE=not-a-guid;DEADLETTER", "MACHINE={00000000-0000-0000-0000-000000000000}", "DIRECT=FTP:x\\q"],
)
async def test_malformed_format_names_are_illegal(manager: QueueManager, name: str) -> None:
    with mq_error(MqErrorCode.MQ_ERROR_ILLEGAL_FORMATNAME):
        await manager.get_queue(name)


async def test_a_dead_letter_queue_is_read_through_its_format_name(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    await new_queue(manager, PATH)
    await manager.send(PATH, _rich(b"dead"))
    await expire(manager, clock, 10)
    name = f"MACHINE={{{manager.guid}}};DEADLETTER"
    assert bodies_of([await reader.peek(name, 0)]) == [b"dead"]
    assert bodies_of(await reader.browse("DIRECT=OS:.\\SYSTEM$;DEADLETTER", 0, 10)) == [b"dead"]
    assert bodies_of([await reader.receive(name, 0)]) == [b"dead"]
    assert await counts(manager, DEADLETTER) == (0, 0)
