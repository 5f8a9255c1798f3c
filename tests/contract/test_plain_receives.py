"""A receive on PostgreSQL is one statement that is its own transaction (storage/claims.py); a
receive whose removal must place something (a journal copy, an acknowledgment) still places
it (storage/outbox.py, right after the claim), even when what makes it so was changed by
another process after this one remembered the queue."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from qm.manager import QueueManager
from qm.model import Message, MessageProperties, Queue, QueueChanges
from qm.reading import QueueReader
from qm.store import Claim, Selector
from storage import driver_sql
from storage.engine import make_engine
from storage.store import SqlStore
from storage.tables import queues
from tests.contract.support import WAIT_LIMIT_S, WatchedWakeUps, bodies_of, counts, new_queue
from tests.contract.test_group_commit import _until_a_backend_waits_for_a_lock

pytestmark = pytest.mark.anyio

PATH = "private$/orders"
ADMIN = "private$/admin"
ADMIN_FORMAT_NAME = "DIRECT=OS:.\\private$\\admin"
POS_RECEIVE = 0x02


@pytest.fixture(autouse=True)
def _postgresql_only(database_url: str) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("SQLite receives in a transaction: BEGIN IMMEDIATE takes the write lock first")


@contextmanager
def driver_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The statements run on the driver in the block, and "BEGIN" for each transaction begun."""
    calls: list[str] = []
    driver = driver_sql._DRIVERS["asyncpg"]
    rows, begin = driver.rows, driver.begin

    async def recorded_rows(self: Any, sql: str, values: Any) -> Any:
        calls.append(sql.split(None, 1)[0].upper())
        return await rows(self, sql, values)

    async def recorded_begin(self: Any) -> None:
        calls.append("BEGIN")
        await begin(self)

    with monkeypatch.context() as patched:
        patched.setattr(driver, "rows", recorded_rows)
        patched.setattr(driver, "begin", recorded_begin)
        yield calls


async def test_a_plain_receive_is_one_statement_and_keeps_the_totals(
    manager: QueueManager, reader: QueueReader, monkeypatch: pytest.MonkeyPatch
) -> None:
    await new_queue(manager, PATH)
    for body in (b"one", b"two!"):
        await manager.send(PATH, MessageProperties(body=body))
    await manager.known_queue(PATH)
    with driver_calls(monkeypatch) as calls:
        assert bodies_of([await reader.receive(PATH, 0)]) == [b"one"]
    assert calls == ["WITH"]
    assert await counts(manager, PATH) == (1, 4)


async def test_concurrent_plain_receives_of_one_queue_take_their_messages_in_one_statement(
    manager: QueueManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    await new_queue(manager, PATH)
    for body in (b"1", b"2", b"3"):
        await manager.send(PATH, MessageProperties(body=body))
    queue = await manager.known_queue(PATH)
    store = manager.store
    assert isinstance(store, SqlStore)
    now = manager.clock.now()
    blocker = asyncio.ensure_future(store.messages.take(queue, Selector(), now, Claim()))
    await asyncio.sleep(0)  # its batch is under way: the next four queue up behind it
    with driver_calls(monkeypatch) as calls:
        followers = (store.messages.take(queue, Selector(), now, Claim()) for _ in range(4))
        taken = await asyncio.gather(blocker, *followers)
    assert bodies_of(taken[:3]) == [b"1", b"2", b"3"] and taken[3:] == [None, None]
    assert calls.count("BEGIN") == 0 and "WITH" in calls
    assert await counts(manager, PATH) == (0, 0)


async def test_journaling_switched_on_elsewhere_still_makes_the_journal_copy(
    manager: QueueManager, reader: QueueReader, other_process: QueueManager
) -> None:
    await new_queue(manager, PATH)
    await manager.known_queue(PATH)  # remembered here without journaling
    await manager.send(PATH, MessageProperties(body=b"kept"))
    await other_process.update_queue(PATH, QueueChanges(journal=True))
    assert bodies_of([await reader.receive(PATH, 0)]) == [b"kept"]
    assert bodies_of([await reader.receive(f"{PATH};journal", 0)]) == [b"kept"]


async def test_a_receive_acknowledgment_behind_a_plain_message_is_made(
    manager: QueueManager, reader: QueueReader
) -> None:
    """Two receives in one batch: the first message is plain, the second asks for a receive
    acknowledgment; one claim takes both, and the acknowledgment is placed."""
    await new_queue(manager, PATH)
    await new_queue(manager, ADMIN)
    await manager.send(PATH, MessageProperties(body=b"plain"))
    asking = MessageProperties(body=b"asks", admin_queue=ADMIN_FORMAT_NAME, acknowledge=POS_RECEIVE)
    await manager.send(PATH, asking)
    queue = await manager.known_queue(PATH)
    store = manager.store
    assert isinstance(store, SqlStore)
    now = manager.clock.now()
    blocker = asyncio.ensure_future(store.messages.take(queue, Selector(), now, Claim()))
    await asyncio.sleep(0)
    taken = await asyncio.gather(blocker, store.messages.take(queue, Selector(), now, Claim()))
    assert bodies_of(taken) == [b"plain", b"asks"]
    assert await counts(manager, ADMIN) == (1, 0)


async def test_a_receive_acknowledgment_asked_for_is_made(manager: QueueManager, reader: QueueReader) -> None:
    await new_queue(manager, PATH)
    await new_queue(manager, ADMIN)
    asking = MessageProperties(body=b"asks", admin_queue=ADMIN_FORMAT_NAME, acknowledge=POS_RECEIVE)
    await manager.send(PATH, asking)
    assert bodies_of([await reader.receive(PATH, 0)]) == [b"asks"]
    assert await counts(manager, ADMIN) == (1, 0)
    assert await counts(manager, PATH) == (0, 0)


async def _two_waiting_receivers(
    manager: QueueManager, reader: QueueReader, watched: WatchedWakeUps, monkeypatch: pytest.MonkeyPatch
) -> tuple[list[int], list[asyncio.Task[Message | None]]]:
    """A remembered, empty queue with two receivers waiting on it, and the wake-ups handed on
    from then on."""
    await new_queue(manager, PATH)
    await manager.known_queue(PATH)
    handed_on = _recorded_hand_ons(watched, monkeypatch)
    receivers = [asyncio.create_task(reader.receive(PATH, 60_000)) for _ in range(2)]
    await watched.until_waiting(2)
    return handed_on, receivers


def _recorded_hand_ons(watched: WatchedWakeUps, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The queue IDs of the wake-ups handed on from now on."""
    handed_on: list[int] = []
    pass_on = watched.pass_on

    def recorded(queue_id: int) -> None:
        handed_on.append(queue_id)
        pass_on(queue_id)

    monkeypatch.setattr(watched, "pass_on", recorded)
    return handed_on


async def test_a_message_stranded_without_a_wake_up_does_not_hold_back_the_next(
    manager: QueueManager,
    reader: QueueReader,
    watched: WatchedWakeUps,
    other_process: QueueManager,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Another process's message brings no wake-up here (these wake-ups poll once a minute).
    A local message then wakes one of two waiting receivers, which takes the other process's
    message, first in queue order; what it read of the queue shows one more, so it hands the
    wake-up on and the second receiver takes the local message at once."""
    handed_on, receivers = await _two_waiting_receivers(manager, reader, watched, monkeypatch)
    await other_process.send(PATH, MessageProperties(body=b"stranded"))
    await manager.send(PATH, MessageProperties(body=b"local"))
    received = await asyncio.wait_for(asyncio.gather(*receivers), WAIT_LIMIT_S)
    assert sorted(bodies_of(received)) == [b"local", b"stranded"]
    assert len(handed_on) == 1


async def test_a_woken_receiver_that_took_the_last_message_hands_no_wake_up_on(
    manager: QueueManager, reader: QueueReader, watched: WatchedWakeUps, monkeypatch: pytest.MonkeyPatch
) -> None:
    handed_on, receivers = await _two_waiting_receivers(manager, reader, watched, monkeypatch)
    await manager.send(PATH, MessageProperties(body=b"only"))
    done, waiting = await asyncio.wait(receivers, timeout=WAIT_LIMIT_S, return_when=asyncio.FIRST_COMPLETED)
    assert bodies_of([task.result() for task in done]) == [b"only"]
    await watched.until_waiting(1)  # the other receiver still waits, not woken for nothing
    assert handed_on == []
    for task in waiting:
        task.cancel()


async def test_a_receive_cancelled_while_a_send_holds_the_queue_row_takes_nothing(
    manager: QueueManager, database_url: str
) -> None:
    """The claim never waits for the queue's row (a statement that commits by itself would
    take the message for a caller cancelled meanwhile): its waiting form runs in a
    transaction instead, and rolls back for the cancelled caller."""
    queue, store = await _queue_with(manager, b"precious")
    async with _queue_row_held(database_url, queue.id) as connection:
        receiver = asyncio.create_task(store.messages.take(queue, Selector(), manager.clock.now(), Claim()))
        await _until_a_backend_waits_for_a_lock(connection)
        receiver.cancel()
    with pytest.raises(asyncio.CancelledError):
        await receiver
    await store.messages.receive_group.close()  # the batch has ended, one way or the other
    assert await counts(manager, PATH) == (1, len(b"precious"))


async def test_a_message_asking_only_for_negative_acknowledgments_is_received_in_one_statement(
    manager: QueueManager, reader: QueueReader, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A receive places an acknowledgment only for MQMSG_ACKNOWLEDGMENT_POS_RECEIVE."""
    await new_queue(manager, PATH)
    await new_queue(manager, ADMIN)
    negative_only = 0x04 | 0x08  # NACK_REACH_QUEUE, NACK_RECEIVE
    asking = MessageProperties(body=b"asks", admin_queue=ADMIN_FORMAT_NAME, acknowledge=negative_only)
    await manager.send(PATH, asking)
    await manager.known_queue(PATH)
    with driver_calls(monkeypatch) as calls:
        assert bodies_of([await reader.receive(PATH, 0)]) == [b"asks"]
    assert calls == ["WITH"]
    assert await counts(manager, ADMIN) == (0, 0)


async def _queue_with(manager: QueueManager, body: bytes) -> tuple[Queue, SqlStore]:
    """PATH with one message sent through `manager`, remembered there, and the store."""
    await new_queue(manager, PATH)
    await manager.send(PATH, MessageProperties(body=body))
    store = manager.store
    assert isinstance(store, SqlStore)
    return await manager.known_queue(PATH), store


@asynccontextmanager
async def _queue_row_held(database_url: str, queue_id: int) -> AsyncIterator[AsyncConnection]:
    """A transaction of another connection holding the queue's row for the block."""
    other = make_engine(database_url)
    try:
        async with other.begin() as connection:
            await connection.execute(sa.select(queues.c.id).where(queues.c.id == queue_id).with_for_update())
            yield connection
    finally:
        await other.dispose()
