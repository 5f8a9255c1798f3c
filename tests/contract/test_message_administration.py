"""Moves, resends and imports on the store, on both stores: totals stay what the rows add up to,
and concurrent work (another move of the same messages, receives, a second gateway process)
never loses a message or delivers one twice."""

from __future__ import annotations

import asyncio

import pytest

from qm.administration import Administration, Imported
from qm.clock import SettableClock
from qm.errors import MqError, MqErrorCode
from qm.manager import QueueManager
from qm.model import JournalFlags, MessageProperties, QueueSettings
from qm.reading import QueueReader
from storage.store import SqlStore
from tests.contract.test_totals import _totals_and_rows

pytestmark = pytest.mark.anyio

ORDERS = "private$/orders"
RETRY = "private$/retry"


async def test_after_moves_resends_imports_and_deletes_totals_are_what_the_rows_add_up_to(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    store = manager.store
    assert isinstance(store, SqlStore)
    administration = Administration(manager, reader)
    await manager.create_queue(ORDERS, QueueSettings(journal=True))
    await manager.create_queue(RETRY, QueueSettings())
    sent = [await manager.send(ORDERS, MessageProperties(body=b"x" * size)) for size in (10, 200, 3000)]
    await administration.move_messages(ORDERS, [sent[0].lookup_id, sent[2].lookup_id], RETRY)
    await administration.delete_message(ORDERS, sent[1].lookup_id)  # a journal copy too
    dead = MessageProperties(body=b"dead", journal=JournalFlags.DEADLETTER, time_to_be_received=5)
    await manager.send(ORDERS, dead)
    clock.advance(10)
    await manager.expire_due()
    await administration.resend_dead_letters("system$;deadletter", None)
    await administration.import_messages(ORDERS, [Imported(MessageProperties(body=b"i" * 77))] * 3)
    kept, rows_add_up_to = await _totals_and_rows(store)
    assert kept == rows_add_up_to
    assert kept[(await manager.get_queue(RETRY)).id] == (2, 3010)
    assert kept[(await manager.get_queue(ORDERS)).id] == (4, 4 + 3 * 77)


async def test_two_moves_of_the_same_messages_move_them_once(
    manager: QueueManager, reader: QueueReader, other_process: QueueManager
) -> None:
    await manager.create_queue(ORDERS, QueueSettings())
    await manager.create_queue(RETRY, QueueSettings())
    sent = [await manager.send(ORDERS, MessageProperties(body=b"m%d" % n)) for n in range(20)]
    chosen = [message.lookup_id for message in sent]
    here = Administration(manager, reader)
    there = Administration(other_process)
    outcomes = await asyncio.gather(
        here.move_messages(ORDERS, chosen, RETRY),
        there.move_messages(ORDERS, list(reversed(chosen)), RETRY),
        return_exceptions=True,
    )
    moved = [outcome for outcome in outcomes if isinstance(outcome, list)]
    refused = [outcome for outcome in outcomes if isinstance(outcome, MqError)]
    assert len(moved) == 1 and len(moved[0]) == 20, outcomes
    assert [error.code for error in refused] == [MqErrorCode.MQ_ERROR_MESSAGE_NOT_FOUND], outcomes
    assert sorted(m.properties.body for m in await reader.browse(RETRY, 0, 100)) == sorted(
        m.properties.body for m in sent
    )
    assert await reader.browse(ORDERS, 0, 100) == []


async def test_a_move_racing_receives_loses_and_repeats_nothing(
    manager: QueueManager, reader: QueueReader, other_process: QueueManager
) -> None:
    await manager.create_queue(ORDERS, QueueSettings())
    await manager.create_queue(RETRY, QueueSettings())
    sent = [await manager.send(ORDERS, MessageProperties(body=b"m%d" % n)) for n in range(40)]
    other_reader = QueueReader(other_process)
    received: list[bytes] = []

    async def receive_all(which: QueueReader) -> None:
        while (message := await which.receive(ORDERS, 0)) is not None:
            received.append(message.properties.body)

    async def move_some() -> list[bytes]:
        chosen = [message.lookup_id for message in sent[::2]]
        try:
            moved = await Administration(manager, reader).move_messages(ORDERS, chosen, RETRY)
        except MqError as error:  # a receive took one of them first: nothing moved
            assert error.code is MqErrorCode.MQ_ERROR_MESSAGE_NOT_FOUND
            return []
        return [item.message.properties.body for item in moved]

    moved, _, _ = await asyncio.gather(move_some(), receive_all(reader), receive_all(other_reader))
    left = [message.properties.body for message in await reader.browse(RETRY, 0, 100)]
    assert sorted(moved) == sorted(left)
    assert sorted(received + left) == sorted(message.properties.body for message in sent)
    kept, rows_add_up_to = await _totals_and_rows(manager.store)  # type: ignore[arg-type]
    assert kept == rows_add_up_to


async def test_a_resend_to_a_queue_the_caller_may_not_write_moves_nothing(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    administration = Administration(manager, reader)
    await manager.create_queue(ORDERS, QueueSettings())
    await manager.create_queue(RETRY, QueueSettings())
    for queue in (ORDERS, RETRY):
        dead = MessageProperties(body=queue.encode(), journal=JournalFlags.DEADLETTER, time_to_be_received=5)
        await manager.send(queue, dead)
    clock.advance(10)
    await manager.expire_due()
    asked: list[str] = []

    async def only_orders(destination: str) -> None:
        asked.append(destination.replace("\\", "/"))  # a dead letter names it private$\orders
        if asked[-1] != ORDERS:
            raise MqError(MqErrorCode.MQ_ERROR_ACCESS_DENIED, f"may not write {destination}")

    with pytest.raises(MqError) as refused:
        await administration.resend_dead_letters("system$;deadletter", None, only_orders)
    assert refused.value.code is MqErrorCode.MQ_ERROR_ACCESS_DENIED
    assert sorted(asked) == sorted([ORDERS, RETRY])
    assert len(await reader.browse("system$;deadletter", 0, 10)) == 2  # nothing moved
    assert await reader.browse(ORDERS, 0, 10) == [] and await reader.browse(RETRY, 0, 10) == []
