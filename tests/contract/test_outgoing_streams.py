"""An outgoing queue's stream row (reference §4.1) is created by whichever writer first sends a
transactional message through it. Two writers (two gateway processes, or a send racing a
receipt) may both find it missing: the second must take the first one's row, not fail with a
unique violation on its primary key (issue 17 item 1)."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from qm.clock import SettableClock
from qm.manager import QueueManager
from qm.model import MessageProperties
from qm.paths import outgoing_queue_path
from tests.contract.support import sql_store, store_message
from tests.contract.test_lock_order import _until_waiting, _within_limit, pause_after

pytestmark = pytest.mark.anyio

REMOTE_URL = "HTTP://remote.example/msmq/private$/far"


async def test_two_writers_creating_the_same_outgoing_stream_share_one_row(
    manager: QueueManager,
    other_process: QueueManager,
    clock: SettableClock,
    database_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Was: SqlOutgoing._outgoing_stream read the row, found none and inserted it. On
    # PostgreSQL the second writer's insert waited for the first one's uncommitted row, then
    # failed with UniqueViolation on pk_outgoing_streams: a 500 for a send, a red suite.
    first, second = sql_store(manager), sql_store(other_process)
    outgoing = (
        await first.outgoing.ensure_outgoing_queue(outgoing_queue_path(REMOTE_URL), clock.now())
    ).queue
    transactional = MessageProperties(body=b"in the stream")
    sent = await first.messages.enqueue(
        [
            dataclasses.replace(store_message(manager, outgoing.id, transactional), transactional=True)
            for _ in range(2)
        ]
    )
    [one, two] = [message.lookup_id for message in sent]
    assert one is not None and two is not None
    created = pause_after(monkeypatch, first.outgoing, "_outgoing_stream")
    creating = asyncio.create_task(
        first.outgoing.outgoing_stream_position(outgoing.id, one, "uuid:first", clock.now())
    )
    await _within_limit(created.reached.wait())  # the row inserted, not committed
    racing = asyncio.create_task(
        second.outgoing.outgoing_stream_position(outgoing.id, two, "uuid:second", clock.now())
    )
    if database_url.startswith("postgresql"):
        await _until_waiting(database_url, 1, racing)  # its insert waits for the first one's row
    # (SQLite: its BEGIN IMMEDIATE waits for the first commit, whenever it starts)
    created.go_on.set()
    position_one, position_two = await _within_limit(asyncio.gather(creating, racing))
    assert position_one.stream_id == position_two.stream_id == "uuid:first"
    assert (position_one.ordinal, position_two.ordinal) == (1, 2)
