"""The statements a send runs on PostgreSQL: the room statement locks the destinations' rows
and takes the counters, one statement inserts and adds to the queues' totals (BEGIN, two
statements, COMMIT); the transaction has its ID before it takes a counter (CommitFence); and
a transaction that does not hold the queues' rows keeps the insert and the totals apart, so
its queue rows are locked in ascending ID order (tests/contract/test_lock_order.py)."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import anyio
import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from qm.clock import SettableClock
from qm.disposal import Placement, PlacementKind
from qm.manager import QueueManager
from qm.model import MessageProperties, QueueSettings
from storage import send_statements
from storage.store import SqlStore
from storage.tables import messages, queues
from tests.contract.support import WAIT_LIMIT_S, counts, store_message
from tests.contract.test_empty_queue_reads import statements_run

pytestmark = pytest.mark.anyio

BODY = MessageProperties(body=b"counted")


@pytest.fixture
def store(manager: QueueManager) -> SqlStore:
    assert isinstance(manager.store, SqlStore)
    return manager.store


def _kinds(seen: Counter[str]) -> Counter[str]:
    """The statements by first word (statements_run also counts `count(` reads)."""
    return Counter({kind: number for kind, number in seen.items() if kind != "counts"})


def _postgresql_only(store: SqlStore) -> None:
    if store.db.sqlite:
        pytest.skip("SQLite sends take their counters with one UPDATE and are left as they were")


async def test_a_send_runs_the_room_statement_and_the_insert_with_the_totals(
    manager: QueueManager, store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A send ENQUEUE_PLAIN does not take (here: its queue not named by its path key) is
    admitted in its transaction (a plain one is one statement: test_plain_sends.py)."""
    _postgresql_only(store)
    queue = await manager.create_queue("private$/one", QueueSettings(quota_kb=1000))
    await manager.send("private$/one", BODY)
    with statements_run(manager, monkeypatch) as seen:
        await store.messages.enqueue([store_message(manager, queue.id, BODY)])
    assert _kinds(seen) == Counter({"SELECT": 1, "WITH": 1}), seen
    assert await counts(manager, "private$/one") == (2, 2 * len(BODY.body))


async def test_a_batch_over_two_queues_adds_to_both_totals_in_the_one_statement(
    manager: QueueManager, store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    _postgresql_only(store)
    first = await manager.create_queue("private$/first", QueueSettings())
    second = await manager.create_queue("private$/second", QueueSettings())
    batch = [store_message(manager, queue.id, BODY) for queue in (second, first, second)]
    with statements_run(manager, monkeypatch) as seen:
        results = await store.messages.enqueue(batch)
    assert _kinds(seen) == Counter({"SELECT": 1, "WITH": 1}), seen
    lookup_ids = [result.lookup_id or 0 for result in results]
    assert 0 not in lookup_ids and lookup_ids == sorted(lookup_ids)  # counters in batch order
    assert await counts(manager, "private$/first") == (1, len(BODY.body))
    assert await counts(manager, "private$/second") == (2, 2 * len(BODY.body))


async def test_a_large_batch_stores_each_message_as_a_lone_send_stores_it(
    manager: QueueManager, store: SqlStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Above send_statements.ROWS_AS_VALUES rows the insert takes a column of values per array
    (on PostgreSQL): every column arrives as from a one-row VALUES list, NULLs included."""
    queue = await manager.create_queue("private$/large", QueueSettings())
    full = MessageProperties(
        body=b"full", label="every column", correlation_id=bytes(range(20)), app_specific=7, priority=5
    )
    alone = store_message(manager, queue.id, full)
    batch = [store_message(manager, queue.id, full) for _ in range(send_statements.ROWS_AS_VALUES + 4)]
    await store.messages.enqueue([alone])
    with statements_run(manager, monkeypatch) as seen:
        await store.messages.enqueue(batch)
    assert store.db.sqlite or _kinds(seen) == Counter({"SELECT": 1, "WITH": 1}), seen
    async with store.engine.connect() as connection:
        found = (await connection.execute(sa.select(messages).order_by(messages.c.lookup_id))).mappings()
        stored = [{**row, "lookup_id": None, "message_id": None} for row in found]
    assert len(stored) == len(batch) + 1 and all(row == stored[0] for row in stored), stored[:2]
    assert await counts(manager, "private$/large") == (len(stored), len(stored) * len(full.body))


async def test_copies_to_several_queues_outside_a_send_add_to_the_totals_in_id_order(
    manager: QueueManager, store: SqlStore, clock: SettableClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A placement's transaction (journal, dead-letter and acknowledgment copies) has not
    locked its targets' rows: one UPDATE per queue in ID order, not an UPDATE ... FROM that
    may lock them in any order. To one queue the merged statement locks one row, as the
    UPDATE would."""
    _postgresql_only(store)
    first = await manager.create_queue("private$/admin-a", QueueSettings())
    second = await manager.create_queue("private$/admin-b", QueueSettings())

    def copy(path: Any) -> Placement:
        return Placement(PlacementKind.ACKNOWLEDGMENT, path, BODY, "", clock.now(), manager.guid, None)

    with statements_run(manager, monkeypatch) as seen:
        await store.messages.place([copy(second.path), copy(first.path)], clock.now())
    assert seen["WITH"] == 0 and seen["INSERT"] == seen["UPDATE"] == 1, seen
    with statements_run(manager, monkeypatch) as seen:
        await store.messages.place([copy(first.path), copy(first.path)], clock.now())
    assert seen["WITH"] == 1 and seen["INSERT"] == seen["UPDATE"] == 0, seen
    assert await counts(manager, "private$/admin-a") == (3, 3 * len(BODY.body))
    assert await counts(manager, "private$/admin-b") == (1, len(BODY.body))


async def _waiting_for_a_lock(connection: AsyncConnection) -> list[Any]:
    """The other sessions of this database waiting for a lock, with their transaction IDs.
    Within a transaction, pg_stat_activity is read once unless its snapshot is cleared."""
    await connection.execute(sa.text("SELECT pg_stat_clear_snapshot()"))
    found = await connection.execute(
        sa.text(
            "SELECT pid, backend_xid, wait_event FROM pg_stat_activity WHERE datname = current_database()"
            " AND wait_event_type = 'Lock' AND pid <> pg_backend_pid()"
        )
    )
    return list(found)


async def _last_counter(connection: AsyncConnection) -> int:
    return int((await connection.execute(sa.text("SELECT last_value FROM message_counter"))).scalar_one())


async def test_a_send_has_its_transaction_id_before_it_takes_its_counters(
    manager: QueueManager, store: SqlStore
) -> None:
    """The room statement may take the counters before it locks the queue's row (an
    InitPlan), and a row lock gives the transaction its ID only once granted: a send that
    waits for the row must already have its ID, or the commit fence would count its counters
    as settled (CommitFence)."""
    _postgresql_only(store)
    queue = await manager.create_queue("private$/held", QueueSettings())
    await manager.send("private$/held", BODY)
    async with store.engine.connect() as holder:
        await holder.execute(sa.select(queues.c.id).where(queues.c.id == queue.id).with_for_update())
        before = await _last_counter(holder)
        sending = asyncio.ensure_future(store.messages.enqueue([store_message(manager, queue.id, BODY)]))
        try:
            with anyio.fail_after(WAIT_LIMIT_S):
                while not (waiting := await _waiting_for_a_lock(holder)):
                    await asyncio.wait({sending}, timeout=0.01)
            assert await _last_counter(holder) > before, "the send waits before it takes counters"
            [(_, transaction_id, _)] = waiting
            assert transaction_id is not None
        finally:
            await holder.rollback()
        [result] = await sending
    assert result.lookup_id is not None
