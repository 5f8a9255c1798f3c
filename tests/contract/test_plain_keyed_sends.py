"""Sends with a duplicate key (every SRMP arrival: the sender's message ID) take the plain
send's one statement on PostgreSQL (send_statements.ENQUEUE_PLAIN remembers the keys after
it holds the queue's row) with the answers of the admission transaction: a key remembered
already, or repeated in the batch, is a duplicate and takes no room; a message not stored
leaves no key behind, so that its sender may send it again."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import replace

import anyio
import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from qm import rules
from qm.errors import MqErrorCode
from qm.manager import QueueManager
from qm.model import MessageProperties, NewMessage, QueueChanges, QueueSettings
from qm.store import EnqueueOutcome
from storage.tables import messages, received_message_ids
from tests.contract.support import WAIT_LIMIT_S, counts, mq_error, new_queue, sql_store, store_message
from tests.contract.test_plain_receives import driver_calls

pytestmark = pytest.mark.anyio

PATH = "private$/keyed"
SENDER = uuid.UUID("5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93")
ACCEPTED, DUPLICATE = EnqueueOutcome.ACCEPTED, EnqueueOutcome.DUPLICATE


def _srmp(number: int, body: bytes = b"srmp") -> MessageProperties:
    """An SRMP arrival's properties: the sender's message ID and queue manager."""
    return MessageProperties(body=body, message_id=_sender_id(number), source_machine=SENDER)


def _sender_id(number: int) -> str:
    return f"{{{SENDER}}}\\{number}"


async def _keyed(manager: QueueManager, path: str, key: str | None, body: bytes = b"keyed") -> NewMessage:
    """A message for the queue named by its path key, as the queue manager hands it over."""
    queue = await manager.get_queue(path)
    sent = store_message(manager, queue.id, MessageProperties(body=body), key)
    return replace(sent, queue_key=queue.path.key)


async def _remembered(manager: QueueManager) -> set[str]:
    async with sql_store(manager).engine.connect() as connection:
        return set((await connection.execute(sa.select(received_message_ids.c.message_id))).scalars())


async def test_an_srmp_send_is_one_statement_and_so_is_its_duplicate(
    manager: QueueManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """PostgreSQL: no transaction, the sender's message ID kept; SQLite: stored the same."""
    await new_queue(manager, PATH)
    await manager.send(PATH, MessageProperties(body=b"first"))  # the queue looked up
    postgresql = not sql_store(manager).db.sqlite
    with driver_calls(monkeypatch) as calls:
        stored = await manager.deliver(PATH, _srmp(7001), duplicate_key=_sender_id(7001))
        again = await manager.deliver(PATH, _srmp(7001), duplicate_key=_sender_id(7001))
    assert not postgresql or calls == ["WITH", "WITH"], calls
    assert stored is not None and again is None
    assert stored.message_id == _sender_id(7001)
    async with sql_store(manager).engine.connect() as connection:
        row = (
            await connection.execute(sa.select(messages).where(messages.c.lookup_id == stored.lookup_id))
        ).one()
    assert row.message_id == _sender_id(7001) and row.source_machine == str(SENDER)
    assert await counts(manager, PATH) == (2, len(b"first") + len(b"srmp"))


async def test_a_remembered_key_is_a_duplicate_and_takes_no_room(
    manager: QueueManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 1 KB queue: the copy of a stored message and a new one of 600 bytes each in one batch.
    The statement's admission counts the whole batch (1,200 bytes): the transaction decides, and
    the copy takes no room. With room for both, one statement decides."""
    await new_queue(manager, PATH, QueueSettings(quota_kb=1))
    [first] = await sql_store(manager).messages.enqueue([await _keyed(manager, PATH, "k/1", b"a" * 100)])
    assert first.outcome is ACCEPTED
    batch = [await _keyed(manager, PATH, "k/1", b"b" * 600), await _keyed(manager, PATH, "k/2", b"c" * 600)]
    assert [r.outcome for r in await sql_store(manager).messages.enqueue(batch)] == [DUPLICATE, ACCEPTED]
    assert await counts(manager, PATH) == (2, 700)
    small = [await _keyed(manager, PATH, key, b"d" * 10) for key in ("k/2", "k/3", "k/1", None)]
    with driver_calls(monkeypatch) as calls:
        results = await sql_store(manager).messages.enqueue(small)
    assert [r.outcome for r in results] == [DUPLICATE, ACCEPTED, DUPLICATE, ACCEPTED]
    assert sql_store(manager).db.sqlite or calls == ["WITH"], calls
    assert [r.lookup_id is None for r in results] == [True, False, True, False]
    assert await counts(manager, PATH) == (4, 720)
    assert await _remembered(manager) == {"k/1", "k/2", "k/3"}


async def test_a_key_repeated_in_a_batch_is_stored_once(
    manager: QueueManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    await new_queue(manager, PATH)
    batch = [await _keyed(manager, PATH, key) for key in ("k/9", "k/9", None, "k/8", "k/9", "k/8")]
    with driver_calls(monkeypatch) as calls:
        results = await sql_store(manager).messages.enqueue(batch)
    assert [r.outcome for r in results] == [ACCEPTED, DUPLICATE, ACCEPTED, ACCEPTED, DUPLICATE, DUPLICATE]
    assert sql_store(manager).db.sqlite or calls == ["WITH"], calls
    lookup_ids = [r.lookup_id for r in results if r.lookup_id is not None]
    assert len(set(lookup_ids)) == 3 and lookup_ids == sorted(lookup_ids)  # in message order
    assert await counts(manager, PATH) == (3, 3 * len(b"keyed"))
    [again] = await sql_store(manager).messages.enqueue([await _keyed(manager, PATH, "k/9")])
    assert again.outcome is DUPLICATE


async def test_a_refused_send_leaves_no_key_so_its_sender_may_send_it_again(manager: QueueManager) -> None:
    """Refused by the quota, the message is not stored and its key not remembered (the
    statement stores and remembers nothing where it cannot admit; the transaction forgets
    what it refused), and the copy sent again once there is room is stored; a copy of it sent
    to the full queue is answered as a duplicate."""
    await new_queue(manager, PATH, QueueSettings(quota_kb=0))
    await manager.known_queue(PATH)
    with mq_error(MqErrorCode.MQ_ERROR_INSUFFICIENT_RESOURCES):
        await manager.deliver(PATH, _srmp(1), duplicate_key=_sender_id(1))
    assert await _remembered(manager) == set()
    await manager.configure(quota_kb=64, throttled=True)
    with mq_error(MqErrorCode.MQ_ERROR_INSUFFICIENT_RESOURCES):
        await manager.deliver(PATH, _srmp(1), duplicate_key=_sender_id(1))
    assert await _remembered(manager) == set()
    await manager.configure(quota_kb=64, throttled=False)
    await manager.update_queue(PATH, QueueChanges(quota_kb=1))
    assert await manager.deliver(PATH, _srmp(1), duplicate_key=_sender_id(1)) is not None
    await manager.update_queue(PATH, QueueChanges(quota_kb=0))  # full: a copy is a duplicate still
    assert await manager.deliver(PATH, _srmp(1), duplicate_key=_sender_id(1)) is None
    assert await counts(manager, PATH) == (1, len(b"srmp"))


async def _waiting_on_a_transaction(connection: AsyncConnection) -> bool:
    """Whether some session waits for another's transaction to end (a key it inserted)."""
    await connection.execute(sa.text("SELECT pg_stat_clear_snapshot()"))
    waiting = sa.text("SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = 'transactionid'")
    return bool((await connection.execute(waiting)).scalar_one())


async def _row_locked(manager: QueueManager, queue_id: int) -> bool:
    """Whether some session holds the queue's row (tried without waiting, from a session of its own)."""
    try:
        async with sql_store(manager).engine.connect() as connection:
            await connection.execute(
                sa.text("SELECT id FROM queues WHERE id = :id FOR UPDATE NOWAIT"), {"id": queue_id}
            )
            await connection.rollback()
    except sa.exc.DBAPIError as error:
        return getattr(error.orig, "sqlstate", None) == "55P03"
    return False


@pytest.mark.parametrize("other_commits", [True, False], ids=["committed", "rolled-back"])
async def test_a_copy_another_session_holds_uncommitted_is_decided_by_its_end(
    manager: QueueManager, database_url: str, monkeypatch: pytest.MonkeyPatch, other_commits: bool
) -> None:
    """Another process has remembered the key and not committed: the one statement waits for
    its end; the key committed, the message is a duplicate; rolled back, it is stored. Either
    way one copy, and the statement held the queue's row before it waited for the key."""
    if not database_url.startswith("postgresql"):
        pytest.skip("SQLite has one writer: no copy is held uncommitted while another is sent")
    await new_queue(manager, PATH)
    queue = await manager.get_queue(PATH)
    await manager.known_queue(PATH)
    key = rules.duplicate_key(SENDER, queue.id, _sender_id(5))
    async with sql_store(manager).engine.connect() as other:
        await other.execute(sa.insert(received_message_ids).values(message_id=key, received_at=0))
        with driver_calls(monkeypatch) as calls:
            sending = asyncio.ensure_future(manager.deliver(PATH, _srmp(5), duplicate_key=_sender_id(5)))
            try:
                with anyio.fail_after(WAIT_LIMIT_S):
                    while not await _waiting_on_a_transaction(other):
                        await asyncio.wait({sending}, timeout=0.01)
                assert await _row_locked(manager, queue.id), "the queue's row is held before the key"
            finally:
                await (other.commit() if other_commits else other.rollback())
            stored = await sending
    assert calls == ["WITH"], calls
    assert (stored is None) is other_commits
    assert await counts(manager, PATH) == ((0, 0) if other_commits else (1, len(b"srmp")))
    assert await _remembered(manager) == {key}
