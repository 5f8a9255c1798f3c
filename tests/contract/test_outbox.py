"""PostgreSQL receives write what their removal earns to the outbox, in the claim that takes
the message, and the dispatcher places it after the claim's commit (storage/claims.py,
storage/outbox.py): a receive locks no queue row but its own, and what it earned is placed
once, by the receive or, after a crash, by the housekeeping pass."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from datetime import datetime

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from qm.manager import QueueManager
from qm.model import MessageProperties, QueueSettings
from qm.reading import QueueReader
from qm.store import Seek
from storage import outbox
from storage.database import Database
from storage.engine import make_engine
from storage.store import SqlStore
from storage.tables import outbox as outbox_table
from storage.tables import queues
from tests.contract.support import WAIT_LIMIT_S, bodies_of, counts, new_queue
from tests.contract.test_group_commit import _until_a_backend_waits_for_a_lock
from tests.contract.test_plain_receives import driver_calls

pytestmark = pytest.mark.anyio

PATH = "private$/orders"
JOURNAL = "private$/orders;journal"
ADMIN = "private$/admin"
POS_RECEIVE = 0x02


@pytest.fixture(autouse=True)
def _postgresql_only(database_url: str) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("SQLite has one writer: its receive places what follows in its own transaction")


async def _journaling(manager: QueueManager, *bodies: bytes) -> None:
    await new_queue(manager, PATH, QueueSettings(journal=True))
    for body in bodies:
        await manager.send(PATH, MessageProperties(body=body))
    await manager.known_queue(PATH)


async def _outbox_rows(manager: QueueManager) -> int:
    store = manager.store
    assert isinstance(store, SqlStore)
    async with store.engine.connect() as connection:
        found = await connection.execute(sa.select(sa.func.count()).select_from(outbox_table))
        return int(found.scalar_one())


async def test_a_receive_from_a_journaling_queue_is_one_claim_then_the_placement(
    manager: QueueManager, reader: QueueReader, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _journaling(manager, b"kept")
    with driver_calls(monkeypatch) as calls:
        assert bodies_of([await reader.receive(PATH, 0)]) == [b"kept"]
    assert calls[0] == "WITH" and calls[1] == "BEGIN", calls  # the claim commits by itself
    assert await counts(manager, JOURNAL) == (1, 4)
    assert await counts(manager, PATH) == (0, 0)
    assert await _outbox_rows(manager) == 0


async def test_a_receive_takes_its_message_while_another_transaction_holds_its_journal(
    manager: QueueManager, reader: QueueReader, database_url: str
) -> None:
    """The claim locks only its own queue's row: the message is taken (committed) while the
    journal queue's row is held elsewhere; only the copy waits for it."""
    await _journaling(manager, b"kept")
    journal_id = (await manager.get_queue(JOURNAL)).id
    async with _queue_row_held(database_url, journal_id) as connection:
        receiver = asyncio.create_task(reader.receive(PATH, 0))
        await _until_a_backend_waits_for_a_lock(connection)
        assert await counts(manager, PATH) == (0, 0)
        assert await counts(manager, JOURNAL) == (0, 0)
    assert bodies_of([await asyncio.wait_for(receiver, WAIT_LIMIT_S)]) == [b"kept"]
    assert await counts(manager, JOURNAL) == (1, 4)


async def test_what_a_crash_left_in_the_outbox_is_placed_by_housekeeping(
    manager: QueueManager, reader: QueueReader, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _journaling(manager, b"kept")
    await new_queue(manager, ADMIN)
    asking = MessageProperties(
        body=b"asks", admin_queue="DIRECT=OS:.\\private$\\admin", acknowledge=POS_RECEIVE
    )
    await manager.send(PATH, asking)
    with monkeypatch.context() as patched:
        patched.setattr(outbox, "place_departed", _crashed)
        taken = await reader.receive_many(PATH, 0, 10)
    assert bodies_of(taken) == [b"kept", b"asks"]
    assert await _outbox_rows(manager) == 2
    assert await counts(manager, JOURNAL) == (0, 0)
    await manager.release_expired()
    assert await _outbox_rows(manager) == 0
    assert await counts(manager, JOURNAL) == (2, 8)
    assert await counts(manager, ADMIN) == (1, 0)


async def test_the_outbox_is_placed_once_by_a_receive_and_a_pass_at_the_same_time(
    manager: QueueManager, reader: QueueReader, monkeypatch: pytest.MonkeyPatch
) -> None:
    await _journaling(manager, b"once")
    left: list[int] = []

    async def remembered(_db: Database, lookup_ids: Sequence[int], _now: datetime) -> None:
        left.extend(lookup_ids)

    with monkeypatch.context() as patched:
        patched.setattr(outbox, "place_departed", remembered)
        message = await reader.by_lookup_id(PATH, Seek.LAST, receive=True)
    assert bodies_of([message]) == [b"once"] and len(left) == 1
    store = manager.store
    assert isinstance(store, SqlStore)
    now = manager.clock.now()
    await asyncio.gather(
        outbox.place_departed(store.db, left, now),
        manager.release_expired(),
        outbox.place_departed(store.db, left, now),
    )
    assert await counts(manager, JOURNAL) == (1, 4)
    assert await _outbox_rows(manager) == 0


async def _crashed(_db: Database, _lookup_ids: Sequence[int], _now: datetime) -> None:
    """The process died after the claim's commit, before the placement."""


@asynccontextmanager
async def _queue_row_held(database_url: str, queue_id: int) -> AsyncIterator[AsyncConnection]:
    other = make_engine(database_url)
    try:
        async with other.begin() as connection:
            await connection.execute(sa.select(queues.c.id).where(queues.c.id == queue_id).with_for_update())
            yield connection
    finally:
        await other.dispose()
