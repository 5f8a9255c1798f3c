"""The commit of an MSMQ transaction racing a purge or a deletion of its queue on PostgreSQL
(found by the two-process stress, items 2 and 4 of test_lock_order_stress.py), each
orchestrated with a message row held from outside and pg_stat_activity, as in
test_lock_order.py. SQLite has one writer: its transactions never wait for each other's rows."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager

import pytest
import sqlalchemy as sa

from qm.errors import MqError
from qm.manager import QueueManager
from qm.model import JournalFlags, MessageProperties, QueueSettings
from qm.reading import QueueReader
from qm.store import Seek
from storage.engine import make_engine
from storage.store import SqlStore
from tests.contract.support import counts
from tests.contract.test_lock_order import (
    BLOCKED_NOW,
    _message_row_held,
    _postgres_only,
    _until_waiting,
    _within_limit,
    pause_after,
)

pytestmark = pytest.mark.anyio

PATH = "private$/orders"
DEAD = JournalFlags.DEADLETTER


async def test_a_transaction_commit_and_a_purge_of_its_queue_do_not_deadlock(
    manager: QueueManager, reader: QueueReader, other_process: QueueManager, database_url: str
) -> None:
    # The transaction sent S into the queue, then received R (a later message); its commit
    # deleted R, then made S available. The purge marks S, then R.
    _postgres_only(database_url)
    await manager.create_queue(PATH, QueueSettings(transactional=True))
    transaction = await manager.begin_transaction()
    sent = await manager.send(PATH, MessageProperties(body=b"sent"), transaction.id)
    await manager.send(PATH, MessageProperties(body=b"received"), "single")
    received = await reader.receive(PATH, 0, transaction.id)
    assert received is not None and received.properties.body == b"received"
    assert sent.lookup_id < received.lookup_id
    async with _message_row_held(database_url, sent.lookup_id):
        purging = asyncio.create_task(other_process.purge_queue(PATH))
        await _until_waiting(database_url, 1, purging)
        committing = asyncio.create_task(manager.commit(transaction.id))
        await _until_waiting(database_url, 2, purging, committing)
    await _within_limit(asyncio.gather(purging, committing))
    assert await counts(manager, PATH) == (0, 0)


async def test_a_transaction_commit_racing_the_deletion_of_its_queue_is_no_internal_error(
    manager: QueueManager, reader: QueueReader, other_process: QueueManager, database_url: str
) -> None:
    # The commit read its transaction's rows without locking them (_end_rows), then the
    # deletion removed them and the queue; the commit then looked the queue up to place what
    # the receive earns (Consequences._departures) and found no queue: KeyError, a 500 over
    # HTTP (the stress: `KeyError: 100` from POST /api/transactions/{id}/commit).
    _postgres_only(database_url)
    await manager.create_queue(PATH, QueueSettings(transactional=True))
    await manager.send(PATH, MessageProperties(body=b"received", journal=DEAD), "single")
    transaction = await manager.begin_transaction()
    received = await reader.receive(PATH, 0, transaction.id)
    assert received is not None
    async with _message_row_held(database_url, received.lookup_id):
        deleting = asyncio.create_task(other_process.delete_queue(PATH))
        await _until_waiting(database_url, 1, deleting)
        committing = asyncio.create_task(manager.commit(transaction.id))
        await _until_waiting(database_url, 2, deleting, committing)
    await _within_limit(asyncio.wait({deleting, committing}))
    assert deleting.exception() is None
    error = committing.exception()
    assert error is None or isinstance(error, MqError), repr(error)


@asynccontextmanager
async def _key_shared(database_url: str, lookup_id: int) -> AsyncIterator[None]:
    """The message's row held FOR KEY SHARE from outside until the block ends: a commit's FOR
    UPDATE waits for it there, an UPDATE that keeps the key (a purge's mark) does not."""
    engine = make_engine(database_url)
    try:
        async with engine.begin() as connection:
            locking = "SELECT lookup_id FROM messages WHERE lookup_id = :id FOR KEY SHARE"
            await connection.execute(sa.text(locking), {"id": lookup_id})
            yield
    finally:
        await engine.dispose()


async def test_a_commit_and_a_purge_meeting_its_messages_out_of_lookup_order_do_not_deadlock(
    manager: QueueManager, reader: QueueReader, other_process: QueueManager, database_url: str
) -> None:
    # The stress: a 500 from POST /api/transactions/{id}/commit (deadlock_detected). The
    # commit locks its rows in lookup-ID order (`first`, then `later`); the purge's mark, an
    # UPDATE of the queue's rows, locked them in the order its scan met them: by state, then
    # lookup ID, so `later`, received in the transaction after the mark's statement began,
    # through its entry as an available message, before `first`. Here the mark waits at
    # `ahead` (held from outside) meanwhile, and the commit, between its two rows, for a
    # key-share lock on `later` that the mark's UPDATE passes.
    _postgres_only(database_url)
    await manager.create_queue(PATH, QueueSettings(transactional=True))
    for body in (b"ahead", b"first", b"later"):
        await manager.send(PATH, MessageProperties(body=body), "single")
    ahead = await reader.by_lookup_id(PATH, Seek.FIRST)
    transaction = await manager.begin_transaction()
    first = await reader.by_lookup_id(
        PATH, Seek.NEXT, ahead.lookup_id, receive=True, transaction=transaction.id
    )
    async with AsyncExitStack() as later_key_shared:
        async with _message_row_held(database_url, ahead.lookup_id):
            purging = asyncio.create_task(other_process.purge_queue(PATH))
            await _until_waiting(database_url, 1, purging)
            later = await reader.by_lookup_id(PATH, Seek.LAST, receive=True, transaction=transaction.id)
            assert ahead.lookup_id < first.lookup_id < later.lookup_id
            await later_key_shared.enter_async_context(_key_shared(database_url, later.lookup_id))
            committing = asyncio.create_task(manager.commit(transaction.id))
            await _until_waiting(database_url, 2, purging, committing)
        # `ahead` let go: the mark goes on (the old code: it takes `later`), then waits for `first`
        await _until_waiting(database_url, 2, purging, committing, condition=BLOCKED_NOW)
    purged, _ = await _within_limit(asyncio.gather(purging, committing))
    assert purged == 1  # `ahead`; the commit removed the two it received
    assert await counts(manager, PATH) == (0, 0)


async def test_a_commit_and_a_queue_deletion_meeting_its_messages_out_of_lookup_order_do_not_deadlock(
    manager: QueueManager,
    reader: QueueReader,
    other_process: QueueManager,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # As the purge's mark above, the deletion's hold of the queue's messages (SELECT … FOR
    # UPDATE) met `later`, received after its statement began, before `first`. The
    # transaction held no message of the queue when the deletion looked for holders (whose
    # rows it locks first, and a commit deletes its own first), so nothing orders the two.
    _postgres_only(database_url)
    queue = await manager.create_queue(PATH, QueueSettings(transactional=True))
    for body in (b"ahead", b"first", b"later"):
        await manager.send(PATH, MessageProperties(body=body), "single")
    ahead = await reader.by_lookup_id(PATH, Seek.FIRST)
    transaction = await manager.begin_transaction()
    deleting_store = other_process.store
    assert isinstance(deleting_store, SqlStore)
    looked = pause_after(monkeypatch, deleting_store.queues._removal, "_holders")
    deleting = asyncio.create_task(other_process.delete_queue(PATH))
    await _within_limit(looked.reached.wait())  # no holder
    first = await reader.by_lookup_id(
        PATH, Seek.NEXT, ahead.lookup_id, receive=True, transaction=transaction.id
    )
    async with AsyncExitStack() as later_held:
        async with _message_row_held(database_url, ahead.lookup_id):
            looked.go_on.set()
            await _until_waiting(database_url, 1, deleting)
            later = await reader.by_lookup_id(PATH, Seek.LAST, receive=True, transaction=transaction.id)
            assert ahead.lookup_id < first.lookup_id < later.lookup_id
            await later_held.enter_async_context(_message_row_held(database_url, later.lookup_id))
        # the hold goes on, up to `later`
        await _until_waiting(database_url, 1, deleting, condition=BLOCKED_NOW)
        committing = asyncio.create_task(manager.commit(transaction.id))
        await _until_waiting(database_url, 2, deleting, committing, condition=BLOCKED_NOW)
    deleted, _ = await _within_limit(asyncio.gather(deleting, committing))
    assert deleted == 1  # `ahead`; the commit removed the two it received
    assert await manager.store.queues.find_queue(queue.path) is None
