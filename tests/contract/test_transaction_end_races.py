"""A transaction that ends between the queue manager's look at it and the claim or insert
made in it (found by the two-process stress): the receive or send fails with
MQ_ERROR_TRANSACTION_SEQUENCE and the message stays where it was, instead of being held for
a transaction that no longer exists, by nobody, for ever."""

from __future__ import annotations

from typing import Any

import pytest

from qm.errors import MqError, MqErrorCode
from qm.manager import QueueManager
from qm.model import MessageProperties, QueueSettings
from qm.reading import QueueReader
from tests.contract.support import bodies_of, counts

pytestmark = pytest.mark.anyio

PATH = "private$/orders"


def _ended_right_after_the_look(manager: QueueManager, monkeypatch: pytest.MonkeyPatch) -> None:
    """The look at the transaction succeeds; its abort (by its owner, another process or
    housekeeping) comes in just after it."""
    look = manager._active_transaction

    async def looked_then_ended(transaction_id: str, touch: bool = True) -> Any:
        record = await look(transaction_id, touch)
        await manager.store.transactions.finish_transaction(transaction_id, False, manager.clock.now())
        return record

    monkeypatch.setattr(manager, "_active_transaction", looked_then_ended)


async def test_a_receive_in_a_transaction_that_just_ended_takes_nothing(
    manager: QueueManager, reader: QueueReader, monkeypatch: pytest.MonkeyPatch
) -> None:
    await manager.create_queue(PATH, QueueSettings(transactional=True))
    await manager.send(PATH, MessageProperties(body=b"kept"), "single")
    transaction = await manager.begin_transaction()
    with monkeypatch.context() as patched:
        _ended_right_after_the_look(manager, patched)
        with pytest.raises(MqError) as refused:
            await reader.receive(PATH, 0, transaction.id)
    assert refused.value.code is MqErrorCode.MQ_ERROR_TRANSACTION_SEQUENCE
    assert bodies_of([await reader.receive(PATH, 0)]) == [b"kept"]


async def test_a_send_in_a_transaction_that_just_ended_stores_nothing(
    manager: QueueManager, reader: QueueReader, monkeypatch: pytest.MonkeyPatch
) -> None:
    await manager.create_queue(PATH, QueueSettings(transactional=True))
    transaction = await manager.begin_transaction()
    with monkeypatch.context() as patched:
        _ended_right_after_the_look(manager, patched)
        with pytest.raises(MqError) as refused:
            await manager.send(PATH, MessageProperties(body=b"orphan"), transaction.id)
    assert refused.value.code is MqErrorCode.MQ_ERROR_TRANSACTION_SEQUENCE
    assert await counts(manager, PATH) == (0, 0)
