"""The commit of an MSMQ transaction racing a purge or a deletion of its queue on PostgreSQL
(found by the two-process stress, items 2 and 4 of test_lock_order_stress.py), each
orchestrated with a message row held from outside and pg_stat_activity, as in
test_lock_order.py. SQLite has one writer: its transactions never wait for each other's rows."""

from __future__ import annotations

import asyncio

import pytest

from qm.errors import MqError
from qm.manager import QueueManager
from qm.model import JournalFlags, MessageProperties, QueueSettings
from qm.reading import QueueReader
from tests.contract.support import counts
from tests.contract.test_lock_order import _message_row_held, _postgres_only, _until_waiting, _within_limit

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
