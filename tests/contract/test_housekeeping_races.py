"""Housekeeping's release of expired two-phase locks racing another process's pass, the lock's
holder and a purge (found by the two-process stress): what a pass removes or puts back is what
it locked, so a message is dead-lettered or received once. Orchestrated with rows held from
outside and pg_stat_activity, as in test_lock_order.py."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import sqlalchemy as sa

import storage.holds
from qm.clock import SettableClock
from qm.errors import MqError
from qm.manager import QueueManager
from qm.model import JournalFlags, Message, MessageProperties, QueueSettings
from qm.reading import QueueReader, _parse_lock_tag
from storage.engine import make_engine
from storage.store import SqlStore
from tests.contract.support import counts
from tests.contract.test_lock_order import (
    _message_row_held,
    _postgres_only,
    _until_waiting,
    _within_limit,
    receive_paused_after_its_claim,
)
from tests.contract.timer_support import DEADLETTER, everything

pytestmark = pytest.mark.anyio

PATH = "private$/orders"
DEAD = JournalFlags.DEADLETTER


async def _dead_letters_of(reader: QueueReader, body: bytes) -> list[Message]:
    return [copy for copy in await everything(reader, DEADLETTER) if copy.properties.body == body]


async def _purge_pending_lock(manager: QueueManager, reader: QueueReader, body: bytes) -> tuple[int, str]:
    """A message locked by a two-phase read for 10 s, then marked by a purge; its lookup ID
    and its lock's token."""
    await manager.create_queue(PATH, QueueSettings())
    await manager.send(PATH, MessageProperties(body=body, journal=DEAD))
    locked = await reader.receive_locked(PATH, 0, 10)
    assert locked is not None
    assert await manager.purge_queue(PATH) == 0  # locked: purge pending
    return _parse_lock_tag(locked[1])


async def test_two_processes_releasing_one_expired_purge_pending_lock_dead_letter_it_once(
    manager: QueueManager,
    reader: QueueReader,
    other_process: QueueManager,
    clock: SettableClock,
    database_url: str,
) -> None:
    _postgres_only(database_url)
    lookup_id, _token = await _purge_pending_lock(manager, reader, b"locked")
    clock.advance(11)  # the lock expired: both processes' housekeeping release it
    async with _message_row_held(database_url, lookup_id):  # as a claim of it would
        first = asyncio.create_task(manager.release_expired())
        await _until_waiting(database_url, 1, first)
        second = asyncio.create_task(other_process.release_expired())
        await _until_waiting(database_url, 2, first, second)
    await _within_limit(asyncio.gather(first, second))
    await _within_limit(asyncio.gather(manager.release_expired(), other_process.release_expired()))
    assert len(await _dead_letters_of(reader, b"locked")) == 1
    assert await counts(manager, PATH) == (0, 0)


async def test_a_lock_committed_as_housekeeping_releases_it_is_received_and_not_dead_lettered(
    manager: QueueManager,
    reader: QueueReader,
    other_process: QueueManager,
    clock: SettableClock,
    database_url: str,
) -> None:
    # The holder's commit was handled a moment before the lock's expiry, housekeeping's pass
    # in another process a moment after it: the commit receives the message.
    _postgres_only(database_url)
    lookup_id, token = await _purge_pending_lock(manager, reader, b"locked")
    before_expiry = clock.now()
    clock.advance(11)
    async with _message_row_held(database_url, lookup_id):
        committing = asyncio.create_task(
            manager.store.messages.end_lock(lookup_id, token, True, before_expiry)
        )
        await _until_waiting(database_url, 1, committing)
        releasing = asyncio.create_task(other_process.release_expired())
        await _until_waiting(database_url, 2, committing, releasing)
    await _within_limit(asyncio.gather(committing, releasing))
    assert await _dead_letters_of(reader, b"locked") == []  # it was received
    assert await counts(manager, PATH) == (0, 0)


async def test_a_holder_ending_a_lock_housekeeping_is_releasing_waits_and_the_message_is_received_once(
    manager: QueueManager,
    reader: QueueReader,
    other_process: QueueManager,
    clock: SettableClock,
    monkeypatch: pytest.MonkeyPatch,
    database_url: str,
) -> None:
    # Read without a lock, the pass put back by lookup ID whatever it had read: here the
    # holder ended the lock (expired) and a transaction received the message meanwhile, the
    # pass made it available again with that transaction's ID on it, and a second transaction
    # received it too; both commits succeeded. Locked, the holder's end waits for the pass.
    _postgres_only(database_url)
    await manager.create_queue(PATH, QueueSettings(transactional=True))
    await manager.send(PATH, MessageProperties(body=b"once"), "single")
    locked = await reader.receive_locked(PATH, 0, 10)
    assert locked is not None
    clock.advance(11)
    housekeeping_store = other_process.store
    assert isinstance(housekeeping_store, SqlStore)
    read, go_on = asyncio.Event(), asyncio.Event()
    unlock = storage.holds.unlock

    async def pausing_before_the_unlock(*arguments: Any) -> None:
        read.set()
        await go_on.wait()
        await unlock(*arguments)

    monkeypatch.setattr(storage.holds, "unlock", pausing_before_the_unlock)
    releasing = asyncio.create_task(other_process.release_expired())
    await _within_limit(read.wait())
    ending = asyncio.create_task(reader.end_lock(locked[1], commit=True))
    await _until_waiting(database_url, 1, ending)
    first = await manager.begin_transaction()
    taken_first = await reader.receive(PATH, 0, first.id)
    go_on.set()
    await _within_limit(releasing)
    with pytest.raises(MqError):
        await _within_limit(ending)  # expired: housekeeping put it back
    if taken_first is None:  # the pass held it: the first transaction receives it now
        taken_first = await reader.receive(PATH, 0, first.id)
    second = await manager.begin_transaction()
    taken_second = await reader.receive(PATH, 0, second.id)
    await manager.commit(first.id)
    await manager.commit(second.id)
    assert [m.properties.body for m in (taken_first, taken_second) if m is not None] == [b"once"]


async def test_a_purge_and_a_receive_of_a_message_whose_lock_expired_under_a_purge_do_not_deadlock(
    manager: QueueManager,
    reader: QueueReader,
    other_process: QueueManager,
    clock: SettableClock,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The holder ended the expired lock of a message a purge had marked: it was put back
    # available and still marked, where housekeeping would have purged it. The next purge did
    # not mark (so lock) it again, but removed it after locking the queue's row; a receive
    # that had claimed it waited for that row (the stress: a purge answered 500, deadlock).
    _postgres_only(database_url)
    journaled = await manager.create_queue(PATH, QueueSettings(journal=True))  # receives take the transaction
    await manager.send(PATH, MessageProperties(body=b"left", journal=DEAD))
    locked = await reader.receive_locked(PATH, 0, 10)
    assert locked is not None
    assert await manager.purge_queue(PATH) == 0  # locked: purge pending
    clock.advance(11)
    with pytest.raises(MqError):
        await reader.end_lock(locked[1], commit=True)  # expired: purged now, as housekeeping would
    store = manager.store
    assert isinstance(store, SqlStore)
    receiving, claim = await receive_paused_after_its_claim(monkeypatch, store, journaled, clock.now())
    purging = asyncio.create_task(other_process.purge_queue(PATH))
    await _until_waiting(database_url, 1, purging)
    claim.go_on.set()
    received, _purged = await _within_limit(asyncio.gather(receiving, purging))
    taken = [message for message in received if isinstance(message, Message)]
    assert len(taken) + len(await _dead_letters_of(reader, b"left")) == 1  # received or purged


async def test_a_keyed_send_and_housekeeping_forgetting_its_key_do_not_deadlock(
    manager: QueueManager, clock: SettableClock, database_url: str
) -> None:
    # A keyed send holds its queue's row, then writes its key (the lock order: queue rows,
    # then keys). The housekeeping pass used to delete the keys past the duplicate window in
    # the transaction that then aborts idle transactions and locks their queues' rows: a send
    # resending a message right at its key's expiry waited for the pass's delete while the
    # pass waited for the send's queue row. The keys are forgotten in a transaction of their own.
    _postgres_only(database_url)
    await manager.create_queue(PATH, QueueSettings(transactional=True))
    await manager.create_queue("private$/keyed", QueueSettings())
    sender_id = "{5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93}\\1"
    assert await manager.deliver("private$/keyed", MessageProperties(body=b"k"), None, sender_id) is not None
    idle = await manager.begin_transaction()
    await manager.send(PATH, MessageProperties(body=b"in an idle transaction"), idle.id)
    clock.advance(manager.config.duplicate_window_s + 1)  # the key and the transaction both expired
    queue = await manager.get_queue(PATH)
    engine = make_engine(database_url)
    try:
        async with engine.begin() as sending:  # as a keyed send to the queue would, in its order
            await sending.execute(
                sa.text("SELECT id FROM queues WHERE id = :id FOR UPDATE"), {"id": queue.id}
            )
            (key,) = (await sending.execute(sa.text("SELECT message_id FROM received_message_ids"))).scalars()
            releasing = asyncio.create_task(manager.release_expired())
            await _until_waiting(database_url, 1, releasing)
            assert not releasing.done()  # the pass waits for the queue's row, to abort into it
            written = await _within_limit(
                sending.execute(
                    sa.text(
                        "INSERT INTO received_message_ids (message_id, received_at) VALUES (:key, 0) "
                        "ON CONFLICT DO NOTHING RETURNING message_id"
                    ),
                    {"key": key},
                )
            )
            assert written.scalars().all() == [key]  # forgotten and committed before the pass waited
        report = await _within_limit(releasing)
    finally:
        await engine.dispose()
    assert report.transactions_aborted == 1
    assert await counts(manager, PATH) == (0, 0)
