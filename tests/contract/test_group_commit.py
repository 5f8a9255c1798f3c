"""Group commit: concurrent enqueues share one transaction, each answered after its commit,
and a message that cannot be stored fails alone."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from qm.errors import MqError, MqErrorCode
from qm.manager import QueueManager
from qm.model import Message, MessageProperties, NewMessage, QueueSettings
from qm.reading import QueueReader
from qm.rules import duplicate_key
from qm.store import Claim, EnqueueOutcome, EnqueueResult, Selector
from storage.consequences import Consequences
from storage.engine import make_engine
from storage.sending import EnqueueRequest
from storage.tables import messages, received_message_ids
from tests.contract.support import WAIT_LIMIT_S, bodies_of, counts, new_queue, sql_store, store_message

pytestmark = pytest.mark.anyio

PATH = "private$/group-commit"
OTHER = "private$/group-commit-other"
SENDERS = 20


def _message(
    manager: QueueManager, queue_id: int, number: int, duplicate_key: str | None = None
) -> NewMessage:
    return store_message(manager, queue_id, MessageProperties(body=str(number).encode()), duplicate_key)


async def test_concurrent_enqueues_are_written_by_one_commit(
    manager: QueueManager, reader: QueueReader
) -> None:
    await new_queue(manager, PATH)
    queue = await manager.get_queue(PATH)
    store = sql_store(manager)
    commits_before = store.messages.group_commit.stats.commits
    answers = await asyncio.gather(
        *(store.messages.enqueue([_message(manager, queue.id, number)]) for number in range(SENDERS))
    )
    assert store.messages.group_commit.stats.commits - commits_before == 1
    assert [result.outcome for [result] in answers] == [EnqueueOutcome.ACCEPTED] * SENDERS
    assert len({result.lookup_id for [result] in answers}) == SENDERS
    assert await counts(manager, PATH) == (SENDERS, sum(len(str(number)) for number in range(SENDERS)))
    received = [await reader.receive(PATH, 0) for _ in range(SENDERS)]
    # each caller got the lookup ID of its own message; queue order is arrival order
    assert bodies_of(received) == [str(number).encode() for number in range(SENDERS)]
    assert [message.lookup_id for message in received if message] == [
        result.lookup_id for [result] in answers
    ]


async def test_a_message_that_cannot_be_stored_fails_alone(manager: QueueManager) -> None:
    await new_queue(manager, PATH)
    queue = await manager.get_queue(PATH)
    gone = await manager.get_queue(await new_queue(manager, "private$/deleted-meanwhile"))
    await manager.delete_queue("private$/deleted-meanwhile")
    seen_inside: list[int] = []

    async def sees_its_message(connection: AsyncConnection, results: list[EnqueueResult]) -> None:
        """Runs in the batch's transaction: the message is there, not yet committed."""
        [result] = results
        found = await connection.execute(
            sa.select(messages.c.lookup_id).where(messages.c.lookup_id == result.lookup_id)
        )
        seen_inside.extend(found.scalars())

    async def refuses(_connection: AsyncConnection, _results: list[EnqueueResult]) -> None:
        raise RuntimeError("stream state refused")

    requests = [EnqueueRequest([_message(manager, queue.id, number)]) for number in range(10)]
    requests[3] = EnqueueRequest([_message(manager, gone.id, 3)])
    requests[5] = EnqueueRequest([_message(manager, queue.id, 5)], sees_its_message)
    requests[6] = EnqueueRequest([_message(manager, queue.id, 6)], refuses)
    store = sql_store(manager)
    outcomes = await asyncio.gather(
        *(store.messages.enqueue_request(r) for r in requests), return_exceptions=True
    )

    assert isinstance(outcomes[3], MqError) and outcomes[3].code is MqErrorCode.MQ_ERROR_QUEUE_NOT_FOUND
    assert isinstance(outcomes[6], RuntimeError)
    stored = [outcome for index, outcome in enumerate(outcomes) if index not in (3, 6)]
    assert all(isinstance(o, list) and o[0].outcome is EnqueueOutcome.ACCEPTED for o in stored)
    assert len(seen_inside) == 1
    browsed = await manager.store.messages.browse(queue.id, 0, 100, manager.clock.now())
    assert sorted(int(message.properties.body) for message in browsed) == [0, 1, 2, 4, 5, 7, 8, 9]
    assert (await counts(manager, PATH))[0] == 8


async def test_a_duplicate_in_the_same_batch_is_answered_as_such(manager: QueueManager) -> None:
    await new_queue(manager, PATH)
    queue = await manager.get_queue(PATH)
    store = sql_store(manager)
    answers = await asyncio.gather(
        *(store.messages.enqueue([_message(manager, queue.id, number, "srmp-id-1")]) for number in range(2))
    )
    assert sorted(result.outcome.name for [result] in answers) == ["ACCEPTED", "DUPLICATE"]
    assert (await counts(manager, PATH))[0] == 1


async def test_a_batched_receive_takes_the_first_messages_in_queue_order(
    manager: QueueManager, reader: QueueReader
) -> None:
    await new_queue(manager, PATH)
    for number, priority in enumerate([1, 5, 3, 5, 0, 7]):
        await manager.send(PATH, MessageProperties(body=str(number).encode(), priority=priority))
    taken = await reader.receive_many(PATH, 0, 4)
    assert bodies_of(taken) == [b"5", b"1", b"3", b"2"]
    assert (await counts(manager, PATH))[0] == 2
    assert bodies_of(await reader.receive_many(PATH, 0, 100)) == [b"0", b"4"]
    assert await reader.receive_many(PATH, 0, 100) == []
    assert await counts(manager, PATH) == (0, 0)


async def test_concurrent_receives_are_taken_by_one_commit_one_message_each(manager: QueueManager) -> None:
    """Plain receives that arrive together share a transaction: each caller gets its own
    message, the queues' first ones handed out in the order the callers asked; a caller
    beyond a queue's messages gets None."""
    await new_queue(manager, PATH)
    await new_queue(manager, OTHER)
    for number, priority in enumerate([0, 3, 0, 7]):
        await manager.send(PATH, MessageProperties(body=str(number).encode(), priority=priority))
    await manager.send(OTHER, MessageProperties(body=b"other"))
    orders, other = await manager.get_queue(PATH), await manager.get_queue(OTHER)
    store = sql_store(manager)
    commits_before = store.messages.receive_group.stats.commits
    now = manager.clock.now()
    callers = [orders] * 5 + [other] * 2
    taken = await asyncio.gather(*(store.messages.take(queue, Selector(), now, Claim()) for queue in callers))
    assert store.messages.receive_group.stats.commits - commits_before == 1
    assert bodies_of(taken[:4]) == [b"3", b"1", b"0", b"2"]
    assert taken[4] is None
    assert bodies_of(taken[5:6]) == [b"other"] and taken[6] is None
    assert await counts(manager, PATH) == (0, 0)
    assert await counts(manager, OTHER) == (0, 0)


async def test_a_receive_cancelled_before_its_batch_takes_nothing(manager: QueueManager) -> None:
    await new_queue(manager, PATH)
    for body in (b"kept", b"second"):
        await manager.send(PATH, MessageProperties(body=body))
    queue = await manager.get_queue(PATH)
    store = sql_store(manager)
    now = manager.clock.now()
    blocker = asyncio.ensure_future(store.messages.take(queue, Selector(), now, Claim()))
    await asyncio.sleep(0)  # one turn of the loop: the first receive's batch is under way
    doomed = asyncio.ensure_future(store.messages.take(queue, Selector(), now, Claim()))
    await asyncio.sleep(0)  # queued behind it
    doomed.cancel()
    assert bodies_of([await blocker]) == [b"kept"]
    assert bodies_of([await store.messages.take(queue, Selector(), now, Claim())]) == [b"second"]


async def test_a_receive_cancelled_while_its_batch_runs_takes_nothing(
    manager: QueueManager, monkeypatch: pytest.MonkeyPatch, database_url: str
) -> None:
    """SQLite: the caller is cancelled after its message was taken but before the commit: the
    batch is rolled back and runs again without it, so the message stays in the queue."""
    if not database_url.startswith("sqlite"):
        pytest.skip(
            "PostgreSQL's receive is one claim that commits by itself, journaling or not; its"
            " transaction, where another holds the queue's row, is test_plain_receives.py's"
            " test_a_receive_cancelled_while_a_send_holds_the_queue_row_takes_nothing"
        )
    await new_queue(manager, PATH, QueueSettings(journal=True))
    await manager.send(PATH, MessageProperties(body=b"only"))
    queue = await manager.get_queue(PATH)
    store = sql_store(manager)
    inside, release = asyncio.Event(), asyncio.Event()
    removed = Consequences.removed

    async def held(self: Consequences, *args: Any, **kwargs: Any) -> None:
        inside.set()  # the message is deleted in this transaction, not yet committed
        await release.wait()
        await removed(self, *args, **kwargs)

    monkeypatch.setattr(Consequences, "removed", held)
    receiver = asyncio.create_task(store.messages.take(queue, Selector(), manager.clock.now(), Claim()))
    await asyncio.wait_for(inside.wait(), WAIT_LIMIT_S)
    receiver.cancel()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await receiver
    await store.messages.receive_group.close()  # the batch has ended, one way or the other
    assert await counts(manager, PATH) == (1, 4)


async def test_a_late_duplicate_takes_no_room_from_the_rest_of_its_batch(
    manager: QueueManager, database_url: str
) -> None:
    """Another process holds message K uncommitted; a copy of K and another message come in
    one batch against a 1 KB quota. K turns out a duplicate, so the other message fits."""
    if not database_url.startswith("postgresql"):
        pytest.skip("a second writer holding a key uncommitted needs PostgreSQL")
    await new_queue(manager, PATH, QueueSettings(quota_kb=1))
    await manager.known_queue(PATH)
    key = duplicate_key(None, (await manager.get_queue(PATH)).id, "K")
    other = make_engine(database_url)
    try:
        async with other.begin() as connection:
            await connection.execute(sa.insert(received_message_ids).values(message_id=key, received_at=0))
            answers = asyncio.gather(
                manager.deliver(PATH, MessageProperties(body=b"a" * 600), None, "K"),
                manager.send(PATH, MessageProperties(body=b"b" * 600)),
                return_exceptions=True,
            )
            await _until_a_backend_waits_for_a_lock(connection)
        duplicate, other_message = await answers
    finally:
        await other.dispose()
    assert duplicate is None
    assert isinstance(other_message, Message)
    assert await counts(manager, PATH) == (1, 600)


async def _until_a_backend_waits_for_a_lock(connection: AsyncConnection) -> None:
    """Poll the server until some session of this database is blocked on a lock."""
    async with asyncio.timeout(WAIT_LIMIT_S):
        for _ in itertools.count():
            if await sessions_waiting_for_a_lock(connection):
                return
            await asyncio.sleep(0.01)  # the server has no event to wait on for this


async def sessions_waiting_for_a_lock(connection: AsyncConnection) -> int:
    """How many sessions of this database wait for a lock now. Within a transaction the server
    reads pg_stat_activity once unless its snapshot is cleared."""
    await connection.execute(sa.text("SELECT pg_stat_clear_snapshot()"))
    waiting = sa.text(
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE datname = current_database() AND wait_event_type = 'Lock'"
    )
    return int((await connection.execute(waiting)).scalar_one())
