"""Positive source journaling (reference §5.3, §7.13): the computer journal `system$;journal`
gets a copy of each message this queue manager sent with MQMSG_JOURNAL once it reaches its
local queue, within the journal quota set on the queue manager."""

from __future__ import annotations

import uuid

import pytest

from qm.clock import SettableClock
from qm.errors import MqErrorCode
from qm.manager import SINGLE_MESSAGE_TRANSACTION, QueueManager
from qm.model import INFINITE, JournalFlags, MessageProperties, QueueSettings
from qm.reading import QueueReader
from tests.contract.support import bodies_of, counts, mq_error, new_queue
from tests.contract.timer_support import (
    COMPUTER_JOURNAL,
    DEADLETTER,
    NACK_RECEIVE_TIMEOUT,
    everything,
    expire,
    only,
)

pytestmark = pytest.mark.anyio

PATH = "private$/orders"
JOURNAL = JournalFlags.JOURNAL
TRANSACTIONAL = QueueSettings(transactional=True)


def _journaled(body: bytes, journal: int = JOURNAL, **more: object) -> MessageProperties:
    values: dict[str, object] = {"body": body, "journal": journal, "label": "audit", "app_specific": 9}
    return MessageProperties(**{**values, **more})  # type: ignore[arg-type]


async def test_a_message_sent_here_with_the_journal_flag_is_copied_on_arrival(
    manager: QueueManager, reader: QueueReader
) -> None:
    await new_queue(manager, PATH)
    sent = await manager.send(PATH, _journaled(b"kept", correlation_id=b"c" * 20, priority=6))
    await manager.send(PATH, _journaled(b"not asking", journal=JournalFlags.NONE))
    await manager.send(PATH, _journaled(b"dead-letter only", journal=JournalFlags.DEADLETTER))
    copy = await only(reader, COMPUTER_JOURNAL)
    assert copy.properties.body == b"kept"
    assert copy.message_id == sent.message_id
    assert copy.lookup_id != sent.lookup_id
    assert copy.destination_queue == "private$\\orders"
    assert (copy.properties.label, copy.properties.app_specific) == ("audit", 9)
    assert copy.properties.correlation_id == b"c" * 20 and copy.properties.priority == 6
    assert copy.properties.message_class == 0  # a copy of a delivered message: class unchanged
    assert copy.source_machine == manager.guid
    assert await counts(manager, PATH) == (3, len(b"kept" + b"not asking" + b"dead-letter only"))


async def test_a_message_from_another_computer_is_not_journaled_here(
    manager: QueueManager, reader: QueueReader
) -> None:
    """Its sender's computer journal gets the copy (on the SRMP 200), not this one."""
    await new_queue(manager, PATH)
    remote = uuid.UUID("0f0e0d0c-0b0a-4908-8706-050403020100")
    await manager.send(PATH, _journaled(b"remote", source_machine=remote))
    assert await counts(manager, COMPUTER_JOURNAL) == (0, 0)


async def test_the_copy_is_made_on_arrival_not_on_receive(manager: QueueManager, reader: QueueReader) -> None:
    await new_queue(manager, PATH)
    await manager.send(PATH, _journaled(b"once"))
    assert await counts(manager, COMPUTER_JOURNAL) == (1, 4)
    await reader.receive(PATH, 0)
    assert await counts(manager, COMPUTER_JOURNAL) == (1, 4)


async def test_a_transactional_message_is_journaled_when_its_transaction_commits(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    await new_queue(manager, PATH, TRANSACTIONAL)
    await manager.send(PATH, _journaled(b"single"), SINGLE_MESSAGE_TRANSACTION)
    assert bodies_of(await everything(reader, COMPUTER_JOURNAL)) == [b"single"]
    aborted = await manager.begin_transaction()
    await manager.send(PATH, _journaled(b"aborted"), aborted.id)
    await manager.abort(aborted.id)
    committed = await manager.begin_transaction()
    await manager.send(PATH, _journaled(b"committed"), committed.id)
    await manager.send(PATH, _journaled(b"too late", time_to_reach_queue=5), committed.id)
    assert bodies_of(await everything(reader, COMPUTER_JOURNAL)) == [b"single"]
    clock.advance(5)
    await manager.commit(committed.id)
    assert bodies_of(await everything(reader, COMPUTER_JOURNAL)) == [b"single", b"committed"]


async def test_a_refused_message_is_not_journaled(manager: QueueManager) -> None:
    await new_queue(manager, PATH, QueueSettings(quota_kb=0))
    with mq_error(MqErrorCode.MQ_ERROR_INSUFFICIENT_RESOURCES):
        await manager.send(PATH, _journaled(b"too big"))
    assert await counts(manager, COMPUTER_JOURNAL) == (0, 0)


async def test_both_flags_journal_on_arrival_and_dead_letter_on_expiry(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    await new_queue(manager, PATH)
    both = JournalFlags.JOURNAL | JournalFlags.DEADLETTER
    await manager.send(PATH, _journaled(b"both", journal=both, time_to_be_received=10))
    assert await expire(manager, clock, 10) == 1
    assert bodies_of(await everything(reader, COMPUTER_JOURNAL)) == [b"both"]
    dead = await only(reader, DEADLETTER)
    assert (dead.properties.body, dead.properties.message_class) == (b"both", NACK_RECEIVE_TIMEOUT)


async def test_the_journal_quota_drops_excess_copies_silently(
    manager: QueueManager, reader: QueueReader
) -> None:
    await new_queue(manager, PATH)
    info = await manager.configure(quota_kb=None, throttled=None, journal_quota_kb=1)
    assert info.journal_quota_kb == 1
    assert (await manager.info()).journal_quota_kb == 1
    assert (await manager.get_queue(COMPUTER_JOURNAL)).settings.quota_kb == 1
    for body in (b"1" * 600, b"2" * 600, b"3" * 424):
        await manager.send(PATH, _journaled(body))  # every send succeeds
    assert await counts(manager, PATH) == (3, 1624)
    assert bodies_of(await everything(reader, COMPUTER_JOURNAL)) == [b"1" * 600, b"3" * 424]
    assert await counts(manager, COMPUTER_JOURNAL) == (2, 1024)
    await manager.purge_queue(COMPUTER_JOURNAL)
    await manager.send(PATH, _journaled(b"2" * 600))
    assert await counts(manager, COMPUTER_JOURNAL) == (1, 600)


async def test_the_journal_quota_is_unlimited_by_default_and_can_be_lifted(manager: QueueManager) -> None:
    assert (await manager.info()).journal_quota_kb == INFINITE
    await new_queue(manager, PATH)
    await manager.configure(quota_kb=None, throttled=None, journal_quota_kb=0)
    await manager.send(PATH, _journaled(b"dropped"))
    await manager.send(PATH, _journaled(b""))  # an empty copy fits a zero quota
    assert await counts(manager, COMPUTER_JOURNAL) == (1, 0)
    info = await manager.configure(quota_kb=None, throttled=None, journal_quota_kb=INFINITE)
    assert info.journal_quota_kb == INFINITE and info.quota_kb == INFINITE and not info.throttled
    await manager.send(PATH, _journaled(b"kept"))
    assert await counts(manager, COMPUTER_JOURNAL) == (2, 4)


async def test_a_journal_quota_out_of_range_is_refused(manager: QueueManager) -> None:
    for value in (-1, INFINITE + 1):
        with mq_error(MqErrorCode.MQ_ERROR_ILLEGAL_PROPERTY_VALUE):
            await manager.configure(quota_kb=None, throttled=None, journal_quota_kb=value)
    assert (await manager.info()).journal_quota_kb == INFINITE


async def test_the_computer_journal_is_read_peeked_and_purged_by_name_or_format_name(
    manager: QueueManager, reader: QueueReader
) -> None:
    await new_queue(manager, PATH)
    for body in (b"a", b"b", b"c"):
        await manager.send(PATH, _journaled(body))
    by_machine = f"MACHINE={{{manager.guid}}};JOURNAL"
    assert bodies_of([await reader.peek(by_machine, 0)]) == [b"a"]
    assert bodies_of([await reader.receive("DIRECT=OS:.\\SYSTEM$;JOURNAL", 0)]) == [b"a"]
    assert await manager.purge_queue(by_machine) == 2
    assert await counts(manager, COMPUTER_JOURNAL) == (0, 0)
    with mq_error(MqErrorCode.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION):
        await manager.send(by_machine, MessageProperties(body=b"x"))
    with mq_error(MqErrorCode.MQ_ERROR_ACCESS_DENIED):
        await manager.delete_queue(COMPUTER_JOURNAL)
