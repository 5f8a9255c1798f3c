"""Queue rows are locked in ascending ID order by every transaction that changes totals, so
a receive batch over several queues and a send batch over the same queues cannot deadlock
(PostgreSQL detects the cycle and aborts one of them after a second). A transaction that also
writes into other queues (acknowledgments, dead-letter copies) locks those rows in the same
sweep, and message rows are always taken before queue rows."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

import anyio
import pytest
import sqlalchemy as sa

from qm.clock import SettableClock
from qm.manager import QueueManager
from qm.model import JournalFlags, Message, MessageProperties, Queue, QueueSettings
from qm.reading import QueueReader
from storage import outbox
from storage.engine import make_engine
from storage.receiving import ReceiveRequest
from storage.store import SqlStore
from tests.contract.support import WAIT_LIMIT_S, counts, store_message

pytestmark = pytest.mark.anyio

CONCURRENT = MessageProperties(body=b"concurrent")
ADMIN_FORMAT_NAME = "DIRECT=OS:.\\private$\\admin"
POS_ARRIVAL, POS_RECEIVE = 0x01, 0x02
Result = TypeVar("Result")


WAITING_FOR_A_LOCK = "wait_event_type = 'Lock'"
"""Sessions waiting for a lock (one whose holder has just ended, not woken yet, included)."""
BLOCKED_NOW = "cardinality(pg_blocking_pids(pid)) > 0"
"""Sessions waiting for a lock another transaction holds now."""


def _transactions_waiting_for_a_lock(database_url: str, condition: str = WAITING_FOR_A_LOCK) -> int:
    url = sa.engine.make_url(database_url).set(drivername="postgresql+psycopg")
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as connection:
            waiting = connection.exec_driver_sql(
                f"SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND {condition}"
            )
            return int(waiting.scalar_one())
    finally:
        engine.dispose()


async def test_a_receive_batch_and_a_send_batch_over_two_queues_do_not_deadlock(
    manager: QueueManager, clock: SettableClock, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("SQLite has one writer at a time: its transactions never wait for each other's rows")
    first = await manager.create_queue("private$/first", QueueSettings())
    second = await manager.create_queue("private$/second", QueueSettings())
    for path in ("private$/first", "private$/second"):
        await manager.send(path, MessageProperties(body=b"stocked"))
    store = manager.store
    assert isinstance(store, SqlStore)
    claimed_one, go_on = asyncio.Event(), asyncio.Event()
    place = outbox.place_departed  # right after each queue's claim

    async def pausing_after_the_first_claim(*arguments: Any) -> None:
        if not claimed_one.is_set():
            claimed_one.set()
            await go_on.wait()
        await place(*arguments)

    monkeypatch.setattr(outbox, "place_departed", pausing_after_the_first_claim)
    now = clock.now()
    # the batch asks for the higher queue first, the send batch writes both
    receiving = asyncio.create_task(
        store.messages.receiver._receive_batch(
            [ReceiveRequest(second, now, None), ReceiveRequest(first, now, None)]
        )
    )
    await claimed_one.wait()
    sending = asyncio.create_task(
        store.messages.enqueue([store_message(manager, queue.id, CONCURRENT) for queue in (first, second)])
    )
    with anyio.fail_after(WAIT_LIMIT_S):  # until the send is done, or waits for a row the receive holds
        while not sending.done():
            if await anyio.to_thread.run_sync(_transactions_waiting_for_a_lock, database_url):
                break
            await asyncio.wait({sending}, timeout=0.01)
    go_on.set()
    received, sent = await asyncio.gather(receiving, sending)
    assert [message.properties.body for message in received if isinstance(message, Message)] == [
        b"stocked",
        b"stocked",
    ]
    assert len(sent) == 2


def _postgres_only(database_url: str) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("SQLite has one writer at a time: its transactions never wait for each other's rows")


async def _until_waiting(
    database_url: str, waiting: int, *tasks: asyncio.Task[Any], condition: str = WAITING_FOR_A_LOCK
) -> None:
    """Return once `waiting` transactions wait for a lock (`condition`: BLOCKED_NOW, held now)
    or a task ended (its result tells)."""
    with anyio.fail_after(WAIT_LIMIT_S):
        while not any(task.done() for task in tasks):
            counted = await anyio.to_thread.run_sync(
                _transactions_waiting_for_a_lock, database_url, condition
            )
            if counted >= waiting:
                return
            await asyncio.wait(set(tasks), timeout=0.01, return_when=asyncio.FIRST_COMPLETED)


def _queue_row_held(database_url: str, queue_id: int) -> AbstractAsyncContextManager[None]:
    """Another transaction holds the queue's row (as a send batch's room does) until the block ends."""
    return _row_held(database_url, "SELECT id FROM queues WHERE id = :id FOR UPDATE", queue_id)


def _message_row_held(database_url: str, lookup_id: int) -> AbstractAsyncContextManager[None]:
    """Another transaction holds the message's row (as a receive's claim does) until the block ends."""
    return _row_held(
        database_url, "SELECT lookup_id FROM messages WHERE lookup_id = :id FOR UPDATE", lookup_id
    )


@asynccontextmanager
async def _row_held(database_url: str, locking: str, key: int) -> AsyncIterator[None]:
    engine = make_engine(database_url)
    try:
        async with engine.begin() as connection:
            await connection.execute(sa.text(locking), {"id": key})
            yield
    finally:
        await engine.dispose()


@dataclass(frozen=True)
class Pause:
    """A method made to stop after each call: `reached` once it returned, its result given
    back once `go_on` is set."""

    reached: asyncio.Event
    go_on: asyncio.Event


def pause_after(monkeypatch: pytest.MonkeyPatch, owner: object, name: str) -> Pause:
    """Replace the async method `owner.name` for the test with one that pauses after it."""
    method = getattr(owner, name)
    pause = Pause(asyncio.Event(), asyncio.Event())

    async def paused(*arguments: Any, **keywords: Any) -> Any:
        result = await method(*arguments, **keywords)
        pause.reached.set()
        await pause.go_on.wait()
        return result

    monkeypatch.setattr(owner, name, paused)
    return pause


def pause_before(monkeypatch: pytest.MonkeyPatch, owner: object, name: str) -> Pause:
    """Replace the async function `owner.name` for the test with one that pauses before it
    runs: `reached` once called, run once `go_on` is set."""
    function = getattr(owner, name)
    pause = Pause(asyncio.Event(), asyncio.Event())

    async def paused(*arguments: Any, **keywords: Any) -> Any:
        pause.reached.set()
        await pause.go_on.wait()
        return await function(*arguments, **keywords)

    monkeypatch.setattr(owner, name, paused)
    return pause


async def receive_paused_after_its_claim(
    monkeypatch: pytest.MonkeyPatch, store: SqlStore, queue: Queue, now: datetime
) -> tuple[asyncio.Task[list[Message | BaseException | None]], Pause]:
    """A receive of the queue's first message (PostgreSQL), stopped once its claim returned:
    the claim has committed (the message is taken, no row is held) and what the removal
    earns (a journal copy, an acknowledgment, a final receipt) is not placed yet. It used to
    be a transaction that held the message's row here and then took queue rows."""
    claim = pause_before(monkeypatch, outbox, "place_departed")
    receiving = asyncio.create_task(
        store.messages.receiver._receive_batch([ReceiveRequest(queue, now, None)])
    )
    await _within_limit(claim.reached.wait())
    return receiving, claim


async def _within_limit(work: Awaitable[Result]) -> Result:
    return await asyncio.wait_for(work, WAIT_LIMIT_S)


async def test_a_receive_acknowledged_into_a_lower_queue_and_a_send_batch_over_both_do_not_deadlock(
    manager: QueueManager, reader: QueueReader, other_process: QueueManager, database_url: str
) -> None:
    # The receive locks its queue's row for the totals and the admin queue's for the
    # acknowledgment; the send batch locks both in ID order. Taking the higher first deadlocks.
    _postgres_only(database_url)
    admin = await manager.create_queue("private$/admin", QueueSettings())
    orders = await manager.create_queue("private$/orders", QueueSettings())
    assert admin.id < orders.id
    asking = MessageProperties(body=b"order", admin_queue=ADMIN_FORMAT_NAME, acknowledge=POS_RECEIVE)
    await manager.send("private$/orders", asking)
    batch = [store_message(other_process, queue.id, CONCURRENT) for queue in (admin, orders)]
    async with _queue_row_held(database_url, orders.id):
        receiving = asyncio.create_task(reader.receive("private$/orders", 0))
        await _until_waiting(database_url, 1, receiving)
        sending = asyncio.create_task(other_process.store.messages.enqueue(batch))
        await _until_waiting(database_url, 2, receiving, sending)
    received, sent = await _within_limit(asyncio.gather(receiving, sending))
    assert received is not None and received.properties.body == b"order"
    assert len(sent) == 2
    assert await counts(manager, "private$/admin") == (2, len(b"concurrent"))  # the send's and the ack


async def test_an_arrival_acknowledged_into_a_lower_queue_and_a_send_batch_over_both_do_not_deadlock(
    manager: QueueManager, other_process: QueueManager, database_url: str
) -> None:
    _postgres_only(database_url)
    admin = await manager.create_queue("private$/admin", QueueSettings())
    orders = await manager.create_queue("private$/orders", QueueSettings())
    asking = MessageProperties(body=b"order", admin_queue=ADMIN_FORMAT_NAME, acknowledge=POS_ARRIVAL)
    batch = [store_message(other_process, queue.id, CONCURRENT) for queue in (admin, orders)]
    async with _queue_row_held(database_url, orders.id):
        arriving = asyncio.create_task(manager.send("private$/orders", asking))
        await _until_waiting(database_url, 1, arriving)
        sending = asyncio.create_task(other_process.store.messages.enqueue(batch))
        await _until_waiting(database_url, 2, arriving, sending)
    arrived, sent = await _within_limit(asyncio.gather(arriving, sending))
    assert arrived.properties.body == b"order"
    assert len(sent) == 2
    assert await counts(manager, "private$/admin") == (2, len(b"concurrent"))
    assert await counts(manager, "private$/orders") == (2, len(b"order") + len(b"concurrent"))


async def test_a_purge_and_a_receive_holding_one_of_its_messages_do_not_deadlock(
    manager: QueueManager, clock: SettableClock, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The purge removes the messages asking for a dead-letter copy first, then the rest in
    # bulk; a receive holding a message it claimed must not find the queue's row taken by then.
    _postgres_only(database_url)
    journaled = await manager.create_queue("private$/journaled", QueueSettings(journal=True))
    await manager.send("private$/journaled", MessageProperties(body=b"claimed"))
    dead_letter = MessageProperties(body=b"followed", journal=JournalFlags.DEADLETTER)
    await manager.send("private$/journaled", dead_letter)
    store = manager.store
    assert isinstance(store, SqlStore)
    receiving, claim = await receive_paused_after_its_claim(monkeypatch, store, journaled, clock.now())
    purging = asyncio.create_task(store.queues.purge_queue(journaled.id, clock.now()))
    await _until_waiting(database_url, 1, purging)
    claim.go_on.set()
    received, purged = await _within_limit(asyncio.gather(receiving, purging))
    assert [message.properties.body for message in received if isinstance(message, Message)] == [b"claimed"]
    assert purged == 1
    assert await counts(manager, "private$/journaled") == (0, 0)


async def test_a_send_does_not_wait_for_a_key_share_lock_on_its_queue_row(
    manager: QueueManager, database_url: str
) -> None:
    # A row inserted that refers to a queue (a message placed, a cursor opened, a journal
    # made) holds FOR KEY SHARE on the queue's row until its transaction ends: the foreign
    # key's check. A send changes only its queues' totals, and takes their rows FOR NO KEY
    # UPDATE as every other change of totals does; its FOR UPDATE waited for that lock, and
    # made the lock order depend on who had inserted what (the stress: a send's room and a
    # placement's sweep deadlocked).
    _postgres_only(database_url)
    first = await manager.create_queue("private$/first", QueueSettings())
    second = await manager.create_queue("private$/second", QueueSettings())
    batch = [store_message(manager, queue.id, CONCURRENT) for queue in (first, second)]
    key_share = "SELECT id FROM queues WHERE id = :id FOR KEY SHARE"
    async with _row_held(database_url, key_share, second.id):
        await _within_limit(manager.send("private$/second", CONCURRENT))  # ENQUEUE_PLAIN
        assert len(await _within_limit(manager.store.messages.enqueue(batch))) == 2  # the room
    assert await counts(manager, "private$/second") == (2, 2 * len(b"concurrent"))
