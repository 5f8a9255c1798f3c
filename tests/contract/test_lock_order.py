"""Queue rows are locked in ascending ID order by every transaction that changes totals, so
a receive batch over several queues and a send batch over the same queues cannot deadlock
(PostgreSQL detects the cycle and aborts one of them after a second)."""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import pytest
import sqlalchemy as sa

from qm.clock import SettableClock
from qm.manager import QueueManager
from qm.model import Message, MessageProperties, QueueSettings
from storage.message_store import ReceiveRequest
from storage.store import SqlStore
from tests.contract.support import WAIT_LIMIT_S, store_message

pytestmark = pytest.mark.anyio

CONCURRENT = MessageProperties(body=b"concurrent")


def _transactions_waiting_for_a_lock(database_url: str) -> int:
    url = sa.engine.make_url(database_url).set(drivername="postgresql+psycopg")
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as connection:
            waiting = connection.exec_driver_sql(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND wait_event_type = 'Lock'"
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
    claim = store._delete_first

    async def pausing_after_the_first_claim(*arguments: Any) -> list[Any]:
        found = await claim(*arguments)
        if not claimed_one.is_set():
            claimed_one.set()
            await go_on.wait()
        return found

    monkeypatch.setattr(store, "_delete_first", pausing_after_the_first_claim)
    now = clock.now()
    # the batch asks for the higher queue first, the send batch writes both
    receiving = asyncio.create_task(
        store._receive_batch([ReceiveRequest(second, now, None), ReceiveRequest(first, now, None)])
    )
    await claimed_one.wait()
    sending = asyncio.create_task(
        store.enqueue([store_message(manager, queue.id, CONCURRENT) for queue in (first, second)])
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
