"""PostgreSQL sends write what an arrival earns (its acknowledgment, its computer-journal copy)
to the outbox, in the statement or transaction that stores the message, and the dispatcher
places it after the commit (storage/sending.py, storage/outbox.py): a send locks no queue row
but its destinations', and an arrival's placement is made once, whoever makes it."""

from __future__ import annotations

import asyncio

import pytest

from qm.manager import QueueManager
from qm.model import MessageProperties, QueueSettings
from qm.reading import QueueReader
from storage import outbox
from tests.contract.support import WAIT_LIMIT_S, bodies_of, counts, new_queue
from tests.contract.test_group_commit import _until_a_backend_waits_for_a_lock
from tests.contract.test_outbox import _crashed, _outbox_rows, _queue_row_held
from tests.contract.test_plain_receives import driver_calls

pytestmark = pytest.mark.anyio

PATH = "private$/orders"
ADMIN = "private$/admin"
ADMIN_FORMAT_NAME = "DIRECT=OS:.\\private$\\admin"
POS_ARRIVAL, POS_RECEIVE = 0x01, 0x02
ASKING = MessageProperties(body=b"asks", admin_queue=ADMIN_FORMAT_NAME, acknowledge=POS_ARRIVAL)


@pytest.fixture(autouse=True)
def _postgresql_only(database_url: str) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("SQLite has one writer: its send places what follows in its own transaction")


async def test_a_send_asking_for_an_arrival_acknowledgment_is_one_statement_then_the_placement(
    manager: QueueManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    await new_queue(manager, PATH)
    await new_queue(manager, ADMIN)
    await manager.send(PATH, MessageProperties(body=b"first"))  # the queue looked up
    with driver_calls(monkeypatch) as calls:
        await manager.send(PATH, ASKING)
    assert calls[0] == "WITH" and calls[1] == "BEGIN", calls  # the send commits by itself
    assert await counts(manager, PATH) == (2, len(b"first") + len(b"asks"))
    assert await counts(manager, ADMIN) == (1, 0)
    assert await _outbox_rows(manager) == 0


@pytest.mark.parametrize("quota_kb", [None, 64], ids=["plain", "admitted"])
async def test_a_send_stores_its_message_while_another_transaction_holds_its_admin_queue(
    manager: QueueManager, database_url: str, quota_kb: int | None
) -> None:
    """Only the acknowledgment waits for the admin queue's row, not the message."""
    settings = QueueSettings() if quota_kb is None else QueueSettings(quota_kb=quota_kb)
    await new_queue(manager, PATH, settings)
    await new_queue(manager, ADMIN)
    admin_id = (await manager.get_queue(ADMIN)).id
    async with _queue_row_held(database_url, admin_id) as connection:
        sender = asyncio.create_task(manager.send(PATH, ASKING))
        await _until_a_backend_waits_for_a_lock(connection)
        assert await counts(manager, PATH) == (1, len(b"asks"))
        assert await counts(manager, ADMIN) == (0, 0)
    await asyncio.wait_for(sender, WAIT_LIMIT_S)
    assert await counts(manager, ADMIN) == (1, 0)
    assert await _outbox_rows(manager) == 0


async def test_an_arrival_left_in_the_outbox_does_not_stop_the_receipt_of_its_message(
    manager: QueueManager, reader: QueueReader, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash after the send's commit leaves the arrival's outbox row; the message is received
    meanwhile (its receipt writes a row of its own); both acknowledgments are placed, once."""
    await new_queue(manager, PATH)
    await new_queue(manager, ADMIN)
    both = MessageProperties(
        body=b"asks", admin_queue=ADMIN_FORMAT_NAME, acknowledge=POS_ARRIVAL | POS_RECEIVE
    )
    with monkeypatch.context() as patched:
        patched.setattr(outbox, "place_departed", _crashed)
        await manager.send(PATH, both)
    assert await _outbox_rows(manager) == 1
    assert await counts(manager, ADMIN) == (0, 0)
    assert bodies_of([await reader.receive(PATH, 0)]) == [b"asks"]
    await manager.release_expired()
    assert await counts(manager, ADMIN) == (2, 0)
    assert await _outbox_rows(manager) == 0


async def test_a_placement_that_fails_after_the_commit_fails_no_send(
    manager: QueueManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The message is stored and answered as such, once; the housekeeping pass places its
    acknowledgment later."""
    await new_queue(manager, PATH)
    await new_queue(manager, ADMIN)

    async def failing(*_: object) -> None:
        raise RuntimeError("the placement failed")

    with monkeypatch.context() as patched:
        patched.setattr(outbox, "place_departed", failing)
        sent = await manager.send(PATH, ASKING)
    assert sent.lookup_id and await counts(manager, PATH) == (1, len(b"asks"))
    await manager.release_expired()
    assert await counts(manager, ADMIN) == (1, 0)
    assert await _outbox_rows(manager) == 0
