"""Messages whose send commits after a later message's: lookup IDs are allocated before the
commit, so a message can become available below one that a trigger or a cursor has passed.

Two ways, each driven step by step: a gateway transaction committed after a later send (both
stores), and, on PostgreSQL, a second gateway process whose transaction took the lower
counter and commits last (SQLite has one writer: it commits in counter order)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from qm.clock import SettableClock
from qm.config import ManagerConfig
from qm.cursors import CursorService
from qm.manager import QueueManager
from qm.model import MessageProperties, QueueSettings
from qm.rules import counter_of
from storage.counters import allocate_counters
from storage.engine import make_engine
from storage.inserts import insert_messages
from storage.store import SqlStore
from tests.contract.support import WAIT_LIMIT_S, WatchedWakeUps, new_queue, store_message
from tests.contract.test_triggers import QUEUE, bodies, rig

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def late_copy(
    manager: QueueManager, database_url: str, clock: SettableClock, body: bytes
) -> AsyncIterator[None]:
    """A second process puts a message into the queue in a transaction that takes its counter
    before it locks the queue's row, and stays open until the block ends. A send can: its room
    statement takes the counters in an InitPlan that PostgreSQL may run before the lock on the
    queue's row is granted. Both processes share the wake-ups, as LISTEN/NOTIFY would."""
    if database_url.startswith("sqlite"):
        pytest.skip("SQLite has one writer: transactions commit in the order they took counters")
    held = SqlStore(make_engine(database_url))
    allocated, release = asyncio.Event(), asyncio.Event()
    other = QueueManager(held, manager.wakeups, clock, ManagerConfig())
    await other.start()
    queue = await manager.get_queue(QUEUE)

    async def insert() -> None:
        """Stops right after taking its counter, until the test releases it."""
        async with held.db.transaction() as connection:
            counters = await allocate_counters(held.db, connection, 1)
            allocated.set()
            await release.wait()
            batch = [store_message(other, queue.id, MessageProperties(body=body))]
            await insert_messages(held.db, connection, batch, counters)

    placing = asyncio.ensure_future(insert())
    try:
        async with asyncio.timeout(WAIT_LIMIT_S):
            await allocated.wait()
        yield
    finally:
        release.set()
        await placing
        await held.close()


async def late_in_transaction(manager: QueueManager, body: bytes) -> str:
    """A message sent in a gateway transaction left open: it has its lookup ID, and becomes
    available when the test commits the transaction."""
    transaction = await manager.begin_transaction()
    await manager.send(QUEUE, MessageProperties(body=body), transaction.id)
    return transaction.id


@pytest.mark.parametrize(("peek_once", "expected"), [(False, "early late early"), (True, "early late")])
async def test_trigger_processes_a_message_committed_after_a_later_one_in_another_process(
    manager: QueueManager,
    watched: WatchedWakeUps,
    database_url: str,
    clock: SettableClock,
    peek_once: bool,
    expected: str,
) -> None:
    """T1 takes the lower counter and stays open, T2 takes a higher one and commits, the
    walker processes T2's message, then T1 commits: its message is processed next (it lands
    behind the cursor, as a higher-priority arrival would, with the same double activation)."""
    await new_queue(manager, QUEUE)
    async with rig(manager, peek_once=peek_once) as r:
        await r.trigger()
        await r.service().refresh()
        await watched.until_waiting()
        async with late_copy(manager, database_url, clock, b"late"):
            await manager.send(QUEUE, MessageProperties(body=b"early"))
            await r.server.until(1)
            await watched.until_waiting()
        await r.server.until(len(expected.split()))
        await watched.until_waiting()
        assert bodies(r.server.hits) == expected.split()


async def test_waiting_cursor_moves_to_a_message_committed_after_a_later_one_in_another_process(
    manager: QueueManager,
    watched: WatchedWakeUps,
    database_url: str,
    clock: SettableClock,
    cursors: CursorService,
) -> None:
    """A cursor waiting at the end moves to the new message wherever it lands (reference
    §7.5): a message is new when it becomes available, whatever counter it was given."""
    await new_queue(manager, QUEUE)
    cursor = await cursors.open(QUEUE)
    async with late_copy(manager, database_url, clock, b"late"):
        await manager.send(QUEUE, MessageProperties(body=b"early"))
        first = await cursors.peek_current(cursor.id, 0)
        assert first is not None and first.properties.body == b"early"
        waiting = asyncio.ensure_future(cursors.peek_next(cursor.id, int(WAIT_LIMIT_S * 1000)))
        await watched.until_waiting()
    arrived = await waiting
    assert arrived is not None and arrived.properties.body == b"late"


async def test_trigger_processes_a_message_whose_transaction_commits_after_a_later_send(
    manager: QueueManager, watched: WatchedWakeUps
) -> None:
    await new_queue(manager, QUEUE, QueueSettings(transactional=True))
    async with rig(manager, peek_once=True) as r:
        await r.trigger()
        await r.service().refresh()
        await watched.until_waiting()
        transaction = await late_in_transaction(manager, b"late")
        await manager.send(QUEUE, MessageProperties(body=b"early"), "single")
        await r.server.until(1)
        await watched.until_waiting()
        await manager.commit(transaction)
        await r.server.until(2)
        await watched.until_waiting()
        assert bodies(r.server.hits) == ["early", "late"]


async def test_waiting_cursor_moves_to_a_message_whose_transaction_commits_after_a_later_send(
    manager: QueueManager, watched: WatchedWakeUps, cursors: CursorService
) -> None:
    await new_queue(manager, QUEUE, QueueSettings(transactional=True))
    cursor = await cursors.open(QUEUE)
    transaction = await late_in_transaction(manager, b"late")
    await manager.send(QUEUE, MessageProperties(body=b"early"), "single")
    first = await cursors.peek_current(cursor.id, 0)
    assert first is not None and first.properties.body == b"early"
    waiting = asyncio.ensure_future(cursors.peek_next(cursor.id, int(WAIT_LIMIT_S * 1000)))
    await watched.until_waiting()
    await manager.commit(transaction)
    arrived = await waiting
    assert arrived is not None and arrived.properties.body == b"late"


async def test_a_settled_counter_stays_below_an_open_transaction(manager: QueueManager) -> None:
    """The store's settled counter (what waits and walks measure arrivals from) never
    reaches a message whose transaction is still open, and catches up after the commit."""
    await new_queue(manager, QUEUE, QueueSettings(transactional=True))
    transaction = await late_in_transaction(manager, b"late")
    sent = await manager.send(QUEUE, MessageProperties(body=b"early"), "single")
    late = counter_of(sent.lookup_id) - 1
    assert await manager.store.messages.counter_high_water() < late
    await manager.commit(transaction)
    assert await manager.store.messages.counter_high_water() == counter_of(sent.lookup_id)
