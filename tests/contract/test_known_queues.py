"""Sends and plain receives remember their queue (no queue read before their transaction); a
queue that another process deleted, deleted and created again, or changed, is still handled
correctly."""

from __future__ import annotations

import asyncio

import pytest

from qm.errors import MqError, MqErrorCode
from qm.manager import SINGLE_MESSAGE_TRANSACTION, QueueManager
from qm.model import Message, MessageProperties, QueueChanges, QueueSettings
from qm.reading import QueueReader
from tests.contract.support import bodies_of, counts, mq_error, new_queue

pytestmark = pytest.mark.anyio

PATH = "private$/orders"
OTHER = "private$/invoices"


async def _send(manager: QueueManager, path: str, body: bytes) -> None:
    await manager.send(path, MessageProperties(body=body))


async def _give_orders_id_to_invoices(
    manager: QueueManager, other_process: QueueManager, database_url: str
) -> None:
    """`orders`, which `manager` remembers, is deleted elsewhere and `invoices` created: on
    SQLite the new queue gets the deleted one's ID (the case these tests are about)."""
    remembered = manager.known_queues.get(manager.resolve(PATH).key)
    assert remembered is not None
    await other_process.delete_queue(PATH)
    await new_queue(other_process, OTHER)
    if database_url.startswith("sqlite"):
        assert (await other_process.get_queue(OTHER)).id == remembered.id


async def test_a_send_after_the_queue_was_recreated_elsewhere_reaches_the_new_queue(
    manager: QueueManager, other_process: QueueManager, reader: QueueReader
) -> None:
    await new_queue(manager, PATH)
    await _send(manager, PATH, b"first")
    assert manager.known_queues.get(manager.resolve(PATH).key) is not None
    await other_process.delete_queue(PATH)
    await new_queue(other_process, PATH, QueueSettings(label="again"))
    await _send(manager, PATH, b"second")
    assert bodies_of([await reader.receive(PATH, 0)]) == [b"second"]
    assert (await manager.get_queue(PATH)).settings.label == "again"


async def test_a_send_to_a_queue_deleted_elsewhere_is_refused(
    manager: QueueManager, other_process: QueueManager
) -> None:
    await new_queue(manager, PATH)
    await _send(manager, PATH, b"first")
    await other_process.delete_queue(PATH)
    with mq_error(MqErrorCode.MQ_ERROR_QUEUE_NOT_FOUND):
        await _send(manager, PATH, b"lost?")
    assert manager.known_queues.get(manager.resolve(PATH).key) is None


async def test_a_remembered_id_reused_by_another_queue_is_not_followed(
    manager: QueueManager, other_process: QueueManager, reader: QueueReader, database_url: str
) -> None:
    """SQLite may give a new queue the ID of the last one deleted; the remembered ID must
    then not carry a message into that other queue."""
    await new_queue(manager, PATH)
    await _send(manager, PATH, b"first")
    await _give_orders_id_to_invoices(manager, other_process, database_url)
    with mq_error(MqErrorCode.MQ_ERROR_QUEUE_NOT_FOUND):
        await _send(manager, PATH, b"not for invoices")
    assert await counts(manager, OTHER) == (0, 0)
    assert await reader.receive(OTHER, 0) is None


async def test_a_receive_after_the_queue_was_recreated_elsewhere_reads_the_new_queue(
    manager: QueueManager, other_process: QueueManager, reader: QueueReader
) -> None:
    await new_queue(manager, PATH)
    await _send(manager, PATH, b"first")
    assert bodies_of([await reader.receive(PATH, 0)]) == [b"first"]
    await other_process.delete_queue(PATH)
    await new_queue(other_process, PATH)
    await _send(other_process, PATH, b"second")
    assert bodies_of([await reader.receive(PATH, 0)]) == [b"second"]


async def test_a_receive_from_a_queue_deleted_elsewhere_is_refused(
    manager: QueueManager, other_process: QueueManager, reader: QueueReader
) -> None:
    await new_queue(manager, PATH)
    assert await reader.receive(PATH, 0) is None
    await other_process.delete_queue(PATH)
    with mq_error(MqErrorCode.MQ_ERROR_QUEUE_NOT_FOUND):
        await reader.receive(PATH, 0)


async def test_a_receive_by_a_remembered_id_reused_by_another_queue_takes_nothing_there(
    manager: QueueManager, other_process: QueueManager, reader: QueueReader, database_url: str
) -> None:
    await new_queue(manager, PATH)
    assert await reader.receive(PATH, 0) is None
    remembered = manager.known_queues.get(manager.resolve(PATH).key)
    assert remembered is not None
    await other_process.delete_queue(PATH)
    await new_queue(other_process, OTHER)
    await _send(other_process, OTHER, b"for invoices only")
    if database_url.startswith("sqlite"):
        assert (await manager.get_queue(OTHER)).id == remembered.id
    with mq_error(MqErrorCode.MQ_ERROR_QUEUE_NOT_FOUND):
        await reader.receive(PATH, 0)
    assert await counts(manager, OTHER) == (1, len(b"for invoices only"))


async def test_journaling_switched_on_elsewhere_applies_to_the_next_receive(
    manager: QueueManager, other_process: QueueManager, reader: QueueReader
) -> None:
    await new_queue(manager, PATH)
    await _send(manager, PATH, b"not journaled")
    await _send(manager, PATH, b"journaled")
    assert bodies_of([await reader.receive(PATH, 0)]) == [b"not journaled"]
    await other_process.update_queue(PATH, QueueChanges(journal=True))
    assert bodies_of([await reader.receive(PATH, 0)]) == [b"journaled"]
    assert bodies_of([await reader.peek(PATH + ";journal", 0)]) == [b"journaled"]


async def test_a_send_to_a_queue_recreated_transactional_elsewhere_is_stored(
    manager: QueueManager, other_process: QueueManager, reader: QueueReader
) -> None:
    """The remembered queue was not transactional; an SRMP stream message (a single-message
    transaction) to the re-created, transactional one must not be refused from memory."""
    await new_queue(manager, PATH)
    await _send(manager, PATH, b"first")
    await other_process.delete_queue(PATH)
    await new_queue(other_process, PATH, QueueSettings(transactional=True))
    stored = await manager.deliver(PATH, MessageProperties(body=b"stream"), SINGLE_MESSAGE_TRANSACTION)
    assert stored is not None
    assert bodies_of([await reader.receive(PATH, 0, SINGLE_MESSAGE_TRANSACTION)]) == [b"stream"]


async def test_sends_in_one_batch_by_a_reused_id_reach_only_their_own_queue(
    manager: QueueManager, other_process: QueueManager, database_url: str
) -> None:
    """On SQLite the new `invoices` gets the deleted `orders`' ID; a send by the remembered
    `orders` and one to `invoices` share a batch: only the second may be stored."""
    await new_queue(manager, PATH)
    await _send(manager, PATH, b"first")
    await _give_orders_id_to_invoices(manager, other_process, database_url)
    await manager.known_queue(OTHER)  # both remembered: the two sends submit in one loop turn
    to_orders, to_invoices = await asyncio.gather(
        _send(manager, PATH, b"for orders"), _send(manager, OTHER, b"for invoices"), return_exceptions=True
    )
    assert isinstance(to_orders, MqError) and to_orders.code is MqErrorCode.MQ_ERROR_QUEUE_NOT_FOUND
    assert to_invoices is None
    assert await counts(manager, OTHER) == (1, len(b"for invoices"))


async def test_receives_in_one_batch_by_a_reused_id_take_only_from_their_own_queue(
    manager: QueueManager, other_process: QueueManager, reader: QueueReader, database_url: str
) -> None:
    await new_queue(manager, PATH)
    assert await reader.receive(PATH, 0) is None  # remembers orders
    await _give_orders_id_to_invoices(manager, other_process, database_url)
    await _send(other_process, OTHER, b"for invoices only")
    await manager.known_queue(OTHER)
    from_orders, from_invoices = await asyncio.gather(
        reader.receive(PATH, 0), reader.receive(OTHER, 0), return_exceptions=True
    )
    assert isinstance(from_orders, MqError) and from_orders.code is MqErrorCode.MQ_ERROR_QUEUE_NOT_FOUND
    assert isinstance(from_invoices, Message) and from_invoices.properties.body == b"for invoices only"
