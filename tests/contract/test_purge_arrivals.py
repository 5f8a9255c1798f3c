"""A message that arrives while a purge runs, found by the two-process stress
(review-locks:scripts/review_lock_stress.py, traced message by message): a send that was
answered "stored" whose message asked for MQMSG_DEADLETTER, then was never received, never
expired, and is in no queue and no dead-letter queue.

On PostgreSQL (READ COMMITTED: each statement sees what was committed when it began) the
purge (storage/removal.py, Removal.purge_queue) removes the messages with
consequences in batches (_remove_followed), then every other available message of the queue
in one bulk DELETE that places nothing. A message committed by a send after the last batch
statement began and before the bulk DELETE began is not in the batches, but is in the bulk
DELETE: it leaves with reason PURGED and no dead-letter copy (reference §7.6, §7.11), and no
negative acknowledgment either. Its queue's totals stay right, so nothing else shows it.

The window is open whenever the purge's queue row is not yet locked: before its first
batch with consequences, and while the last batch waits for the queue's row, which a send
holds until it commits (the plain send locks the row, inserts and commits in one statement).

Either outcome is correct for such a message: left in its queue (it arrived after the purge
looked), or purged with what PURGED earns. The purge now removes only the messages it marked
when it began, so such a message stays; a queue deletion locks the queue's row before its
batches, so a send waits for it and is refused. Every test here lost the message before."""

from __future__ import annotations

import asyncio

import pytest

from qm.clock import SettableClock
from qm.errors import MqErrorCode
from qm.manager import QueueManager
from qm.model import JournalFlags, MessageProperties, QueueSettings
from qm.reading import QueueReader
from storage.store import SqlStore
from tests.contract.support import bodies_of, counts, mq_error
from tests.contract.test_lock_order import (
    _postgres_only,
    _queue_row_held,
    _until_waiting,
    _within_limit,
    pause_after,
)
from tests.contract.timer_support import DEADLETTER, NACK_Q_PURGED, everything

pytestmark = pytest.mark.anyio

PATH = "private$/orders"
DEAD = JournalFlags.DEADLETTER


async def _where_it_is(reader: QueueReader, body: bytes) -> list[str]:
    """The queues the message with this body is in now: its own, or the dead-letter queue
    as a QUEUE_PURGED copy."""
    places = []
    if body in bodies_of(await everything(reader, PATH)):
        places.append(PATH)
    for copy in await everything(reader, DEADLETTER):
        if copy.properties.body == body and copy.properties.message_class == NACK_Q_PURGED:
            places.append(DEADLETTER)
    return places


async def test_a_send_committed_while_a_purge_waits_for_the_queue_row_is_kept_or_dead_lettered(
    manager: QueueManager, reader: QueueReader, other_process: QueueManager, database_url: str
) -> None:
    # No patching: another transaction holds the queue's row; a send (another process) waits
    # for it, then the purge, whose batch took the message asking for a dead letter and now
    # waits for the same row to place the copy. When the row is let go the send commits
    # first (it asked first), then the purge's bulk DELETE begins and sees the new message.
    _postgres_only(database_url)
    orders = await manager.create_queue(PATH, QueueSettings())
    await manager.send(PATH, MessageProperties(body=b"before", journal=DEAD))
    async with _queue_row_held(database_url, orders.id):
        sending = asyncio.create_task(
            other_process.send(PATH, MessageProperties(body=b"during", journal=DEAD))
        )
        await _until_waiting(database_url, 1, sending)
        purging = asyncio.create_task(manager.purge_queue(PATH))
        await _until_waiting(database_url, 2, sending, purging)
    sent, purged = await _within_limit(asyncio.gather(sending, purging))
    assert sent.properties.body == b"during"  # the sender was told it is stored
    assert await _where_it_is(reader, b"before") == [DEADLETTER]
    assert await _where_it_is(reader, b"during") in ([PATH], [DEADLETTER]), (
        f"an acknowledged message asking for a dead letter is gone (purge returned {purged})"
    )
    in_queue = len(await everything(reader, PATH))
    assert await counts(manager, PATH) == (in_queue, in_queue * len(b"during"))


async def test_a_send_committed_between_the_purges_batches_and_its_bulk_delete_is_kept_or_dead_lettered(
    manager: QueueManager,
    reader: QueueReader,
    other_process: QueueManager,
    clock: SettableClock,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The same window, held open: the purge pauses once its batches are done (here there
    # were none with consequences, so it has locked nothing) and a send commits meanwhile.
    _postgres_only(database_url)
    orders = await manager.create_queue(PATH, QueueSettings())
    await manager.send(PATH, MessageProperties(body=b"plain"))  # purged in bulk, rightly
    store = manager.store
    assert isinstance(store, SqlStore)
    batches = pause_after(monkeypatch, store.queues._removal, "_remove_followed")
    purging = asyncio.create_task(store.queues.purge_queue(orders.id, clock.now()))
    await _within_limit(batches.reached.wait())
    sent = await _within_limit(other_process.send(PATH, MessageProperties(body=b"during", journal=DEAD)))
    assert sent.properties.body == b"during"  # the sender was told it is stored
    batches.go_on.set()
    purged = await _within_limit(purging)
    assert await _where_it_is(reader, b"during") in ([PATH], [DEADLETTER]), (
        f"an acknowledged message asking for a dead letter is gone (purge returned {purged})"
    )


async def test_a_send_during_a_queue_deletion_waits_for_it_and_is_refused(
    manager: QueueManager,
    other_process: QueueManager,
    clock: SettableClock,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Removal.delete_queue removes the messages with consequences in batches, then the rest
    # in one bulk DELETE. A message committed in between went with the bulk delete, without its
    # QUEUE_DELETED dead letter. The deletion now locks the queue's row before its batches: a
    # send waits for the deletion and is refused, never stored and then dropped.
    _postgres_only(database_url)
    orders = await manager.create_queue(PATH, QueueSettings())
    store = manager.store
    assert isinstance(store, SqlStore)
    batches = pause_after(monkeypatch, store.queues._removal, "_remove_followed")
    deleting = asyncio.create_task(store.queues.delete_queue(orders.id, clock.now()))
    await _within_limit(batches.reached.wait())
    sending = asyncio.create_task(other_process.send(PATH, MessageProperties(body=b"during", journal=DEAD)))
    await _until_waiting(database_url, 1, sending)
    assert not sending.done()  # waits for the deletion's lock on the queue's row
    batches.go_on.set()
    await _within_limit(deleting)
    with mq_error(MqErrorCode.MQ_ERROR_QUEUE_NOT_FOUND):
        await _within_limit(sending)
