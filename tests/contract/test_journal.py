"""Target journaling (reference §7.13) and purge of locked messages (reference §7.11)."""

from __future__ import annotations

import pytest

from qm.clock import SettableClock
from qm.cursors import CursorService
from qm.manager import SINGLE_MESSAGE_TRANSACTION, QueueManager
from qm.model import MessageProperties, QueueChanges, QueueSettings
from qm.reading import QueueReader
from qm.store import Seek
from tests.contract.support import bodies_of, counts, new_queue, send_bodies

pytestmark = pytest.mark.anyio

PATH = "private$/orders"
JOURNAL = "private$/orders;journal"


async def _journal_bodies(reader: QueueReader) -> list[bytes]:
    return bodies_of(await reader.browse(JOURNAL, 0, 100))


async def test_received_messages_are_copied_to_the_journal(
    manager: QueueManager, reader: QueueReader
) -> None:
    await new_queue(manager, PATH, QueueSettings(journal=True))
    sent = await manager.send(PATH, MessageProperties(body=b"a", label="first", correlation_id=b"c" * 20))
    await send_bodies(manager, PATH, [b"bb"])
    await reader.receive(PATH, 0)
    await reader.receive(PATH, 0)
    assert await counts(manager, JOURNAL) == (2, 3)
    copy = await reader.receive(JOURNAL, 0)
    assert copy is not None
    assert copy.properties.body == b"a"
    assert copy.properties.label == "first"
    assert copy.properties.correlation_id == b"c" * 20
    assert copy.message_id == sent.message_id
    assert copy.destination_queue == "private$\\orders"
    assert copy.queue_id == (await manager.get_queue(JOURNAL)).id


async def test_peeks_and_purges_do_not_journal(manager: QueueManager, reader: QueueReader) -> None:
    await new_queue(manager, PATH, QueueSettings(journal=True))
    await send_bodies(manager, PATH, [b"a", b"b"])
    await reader.peek(PATH, 0)
    await reader.by_lookup_id(PATH, Seek.LAST)
    await manager.purge_queue(PATH)
    assert await counts(manager, JOURNAL) == (0, 0)


async def test_without_journaling_nothing_is_copied(manager: QueueManager, reader: QueueReader) -> None:
    await new_queue(manager, PATH)
    await send_bodies(manager, PATH, [b"a"])
    await reader.receive(PATH, 0)
    assert await counts(manager, JOURNAL) == (0, 0)
    await manager.update_queue(PATH, QueueChanges(journal=True))
    await send_bodies(manager, PATH, [b"b"])
    await reader.receive(PATH, 0)
    assert await _journal_bodies(reader) == [b"b"]


async def test_every_kind_of_receive_journals(
    manager: QueueManager, reader: QueueReader, cursors: CursorService
) -> None:
    await new_queue(manager, PATH, QueueSettings(journal=True))
    sent = await send_bodies(manager, PATH, [b"fifo", b"lookup", b"by-id", b"cursor", b"locked"])
    await reader.receive(PATH, 0)
    await reader.by_lookup_id(PATH, Seek.CURRENT, sent[1].lookup_id, receive=True)
    await reader.by_message_id(PATH, message_id=sent[2].message_id, receive=True)
    cursor = await cursors.open(PATH)
    await cursors.receive_current(cursor.id, 0)
    locked = await reader.receive_locked(PATH, 0, 30)
    assert locked is not None
    assert len(await _journal_bodies(reader)) == 4
    await reader.end_lock(locked[1], commit=True)
    assert sorted(await _journal_bodies(reader)) == sorted(
        [b"fifo", b"lookup", b"by-id", b"cursor", b"locked"]
    )


async def test_ended_without_removal_nothing_is_journaled(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    await new_queue(manager, PATH, QueueSettings(journal=True))
    await send_bodies(manager, PATH, [b"a"])
    locked = await reader.receive_locked(PATH, 0, 30)
    assert locked is not None
    await reader.end_lock(locked[1], commit=False)
    await reader.receive_locked(PATH, 0, 30)
    clock.advance(30)
    await manager.release_expired()
    assert await counts(manager, JOURNAL) == (0, 0)
    assert await counts(manager, PATH) == (1, 1)


async def test_transactional_receives_journal_at_commit_only(
    manager: QueueManager, reader: QueueReader
) -> None:
    await new_queue(manager, PATH, QueueSettings(transactional=True, journal=True))
    await manager.send(PATH, MessageProperties(body=b"t"), SINGLE_MESSAGE_TRANSACTION)
    aborted = await manager.begin_transaction()
    await reader.receive(PATH, 0, aborted.id)
    assert await counts(manager, JOURNAL) == (0, 0)
    await manager.abort(aborted.id)
    assert await counts(manager, JOURNAL) == (0, 0)
    committed = await manager.begin_transaction()
    await reader.receive(PATH, 0, committed.id)
    await manager.commit(committed.id)
    assert await _journal_bodies(reader) == [b"t"]


async def test_the_journal_quota_drops_excess_copies(manager: QueueManager, reader: QueueReader) -> None:
    await new_queue(manager, PATH, QueueSettings(journal=True, journal_quota_kb=1))
    await send_bodies(manager, PATH, [b"1" * 600, b"2" * 600, b"3" * 400])
    received = [await reader.receive(PATH, 0) for _ in range(3)]
    assert all(message is not None for message in received)  # receives never fail for the journal
    assert await _journal_bodies(reader) == [b"1" * 600, b"3" * 400]
    assert await counts(manager, JOURNAL) == (2, 1000)


async def test_a_lowered_journal_quota_applies_to_later_copies(
    manager: QueueManager, reader: QueueReader
) -> None:
    await new_queue(manager, PATH, QueueSettings(journal=True))
    await send_bodies(manager, PATH, [b"1" * 600, b"2" * 600])
    await reader.receive(PATH, 0)
    await manager.update_queue(PATH, QueueChanges(journal_quota_kb=1))
    await reader.receive(PATH, 0)
    assert await _journal_bodies(reader) == [b"1" * 600]


async def test_purge_spares_a_transaction_held_message_until_the_transaction_ends(
    manager: QueueManager, reader: QueueReader
) -> None:
    for commit in (True, False):
        path = f"private$/held-{commit}"
        await new_queue(manager, path, QueueSettings(transactional=True))
        for body in (b"held", b"free1", b"free2"):
            await manager.send(path, MessageProperties(body=body), SINGLE_MESSAGE_TRANSACTION)
        transaction = await manager.begin_transaction()
        assert bodies_of([await reader.receive(path, 0, transaction.id)]) == [b"held"]
        assert await manager.purge_queue(path) == 2
        assert await counts(manager, path) == (1, 4)
        await (manager.commit if commit else manager.abort)(transaction.id)
        assert await counts(manager, path) == (0, 0)
        assert await reader.receive(path, 0) is None


async def test_purge_spares_a_locked_message_until_its_lock_ends(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    for ending in ("commit", "abort", "expiry"):
        path = await new_queue(manager, f"private$/held-{ending}")
        await send_bodies(manager, path, [b"held", b"free"])
        locked = await reader.receive_locked(path, 0, 30)
        assert locked is not None
        assert await manager.purge_queue(path) == 1
        assert await counts(manager, path) == (1, 4)
        if ending == "expiry":
            clock.advance(30)
            assert (await manager.release_expired()).locks_released == 1
        else:
            await reader.end_lock(locked[1], commit=ending == "commit")
        assert await counts(manager, path) == (0, 0)
        assert await reader.receive(path, 0) is None


async def test_messages_sent_after_a_purge_stay(manager: QueueManager, reader: QueueReader) -> None:
    await new_queue(manager, PATH)
    await send_bodies(manager, PATH, [b"held"])
    locked = await reader.receive_locked(PATH, 0, 30)
    assert locked is not None
    await manager.purge_queue(PATH)
    await send_bodies(manager, PATH, [b"after"])
    await reader.end_lock(locked[1], commit=False)
    assert bodies_of([await reader.receive(PATH, 0), await reader.receive(PATH, 0)]) == [b"after"]
