"""Quotas (reference §7.3): queue quota with dead-lettering, machine quota and throttling."""

from __future__ import annotations

import pytest

from qm.errors import MqErrorCode
from qm.manager import SINGLE_MESSAGE_TRANSACTION, QueueManager
from qm.model import INFINITE, JournalFlags, MessageProperties, QueueChanges, QueueSettings
from qm.reading import QueueReader
from tests.contract.support import counts, mq_error, new_queue

pytestmark = pytest.mark.anyio

PATH = "private$/orders"
DEADLETTER = "system$;deadletter"


def _message(size: int, journal: int = JournalFlags.NONE, label: str = "") -> MessageProperties:
    return MessageProperties(body=b"x" * size, journal=journal, label=label)


async def test_queue_quota_is_inclusive(manager: QueueManager) -> None:
    await new_queue(manager, PATH, QueueSettings(quota_kb=1))
    await manager.send(PATH, _message(1000))
    await manager.send(PATH, _message(24))
    assert await counts(manager, PATH) == (2, 1024)


async def test_over_the_queue_quota(manager: QueueManager, reader: QueueReader) -> None:
    await new_queue(manager, PATH, QueueSettings(quota_kb=1))
    await manager.send(PATH, _message(1000))
    with mq_error(MqErrorCode.MQ_ERROR_INSUFFICIENT_RESOURCES):
        await manager.send(PATH, _message(100))
    assert await counts(manager, PATH) == (1, 1000)
    assert await counts(manager, DEADLETTER) == (0, 0)
    await reader.receive(PATH, 0)
    await manager.send(PATH, _message(100))  # room again
    assert await counts(manager, PATH) == (1, 100)


async def test_extensions_count_against_the_quota(manager: QueueManager) -> None:
    await new_queue(manager, PATH, QueueSettings(quota_kb=1))
    with mq_error(MqErrorCode.MQ_ERROR_INSUFFICIENT_RESOURCES):
        await manager.send(PATH, MessageProperties(body=b"x" * 1000, extension=b"e" * 25))
    assert await counts(manager, PATH) == (0, 0)


async def test_a_rejected_message_asking_for_it_is_dead_lettered(
    manager: QueueManager, reader: QueueReader
) -> None:
    await new_queue(manager, PATH, QueueSettings(quota_kb=1))
    await manager.send(PATH, _message(1000))
    with mq_error(MqErrorCode.MQ_ERROR_INSUFFICIENT_RESOURCES):
        await manager.send(PATH, _message(100, JournalFlags.DEADLETTER, label="too much"))
    assert await counts(manager, PATH) == (1, 1000)
    assert await counts(manager, DEADLETTER) == (1, 100)
    dead = await reader.receive(DEADLETTER, 0)
    assert dead is not None
    assert dead.properties.message_class == 0x8003  # MessageClass.NACK_Q_EXCEED_QUOTA
    assert dead.properties.body == b"x" * 100
    assert dead.properties.label == "too much"
    assert dead.destination_queue == "private$\\orders"


async def test_a_quota_change_affects_later_arrivals(manager: QueueManager) -> None:
    await new_queue(manager, PATH, QueueSettings(quota_kb=2))
    await manager.send(PATH, _message(2000))
    await manager.update_queue(PATH, QueueChanges(quota_kb=1))
    assert await counts(manager, PATH) == (1, 2000)
    with mq_error(MqErrorCode.MQ_ERROR_INSUFFICIENT_RESOURCES):
        await manager.send(PATH, _message(1))
    await manager.update_queue(PATH, QueueChanges(quota_kb=INFINITE))
    await manager.send(PATH, _message(1))
    assert await counts(manager, PATH) == (2, 2001)


async def test_uncommitted_sends_count_against_the_quota(manager: QueueManager) -> None:
    await new_queue(manager, PATH, QueueSettings(transactional=True, quota_kb=1))
    transaction = await manager.begin_transaction()
    await manager.send(PATH, _message(1000), transaction.id)
    with mq_error(MqErrorCode.MQ_ERROR_INSUFFICIENT_RESOURCES):
        await manager.send(PATH, _message(100), SINGLE_MESSAGE_TRANSACTION)
    await manager.abort(transaction.id)
    await manager.send(PATH, _message(100), SINGLE_MESSAGE_TRANSACTION)
    assert await counts(manager, PATH) == (1, 100)


async def test_a_zero_quota_admits_only_empty_messages(manager: QueueManager) -> None:
    await new_queue(manager, PATH, QueueSettings(quota_kb=0))
    await manager.send(PATH, _message(0))
    with mq_error(MqErrorCode.MQ_ERROR_INSUFFICIENT_RESOURCES):
        await manager.send(PATH, _message(1))
    assert await counts(manager, PATH) == (1, 0)


async def test_machine_quota(manager: QueueManager) -> None:
    await new_queue(manager, PATH)
    await new_queue(manager, "private$/other")
    info = await manager.configure(quota_kb=1, throttled=None)
    assert (info.quota_kb, info.throttled) == (1, False)
    await manager.send(PATH, _message(1000))
    with mq_error(MqErrorCode.MQ_ERROR_INSUFFICIENT_RESOURCES):
        await manager.send("private$/other", _message(100, JournalFlags.DEADLETTER))
    assert await counts(manager, "private$/other") == (0, 0)
    assert await counts(manager, DEADLETTER) == (0, 0)  # machine quota: no dead letter (§7.3 step 1)
    await manager.configure(quota_kb=INFINITE, throttled=None)
    await manager.send("private$/other", _message(100))
    assert (await manager.info()).byte_count == 1100


async def test_dead_letters_count_against_the_machine_quota(manager: QueueManager) -> None:
    await new_queue(manager, PATH, QueueSettings(quota_kb=1))
    await manager.send(PATH, _message(1024))
    with mq_error(MqErrorCode.MQ_ERROR_INSUFFICIENT_RESOURCES):
        await manager.send(PATH, _message(500, JournalFlags.DEADLETTER))
    await manager.configure(quota_kb=2, throttled=None)  # 1524 bytes stored
    await new_queue(manager, "private$/other")
    with mq_error(MqErrorCode.MQ_ERROR_INSUFFICIENT_RESOURCES):
        await manager.send("private$/other", _message(600))
    await manager.send("private$/other", _message(500))


async def test_throttled(manager: QueueManager) -> None:
    await new_queue(manager, PATH)
    info = await manager.configure(quota_kb=None, throttled=True)
    assert info.throttled
    with mq_error(MqErrorCode.MQ_ERROR_INSUFFICIENT_RESOURCES):
        await manager.send(PATH, _message(0))
    assert await counts(manager, PATH) == (0, 0)
    info = await manager.configure(quota_kb=None, throttled=False)
    assert not info.throttled and info.quota_kb == INFINITE
    await manager.send(PATH, _message(0))
    assert await counts(manager, PATH) == (1, 0)


async def test_machine_quota_out_of_range(manager: QueueManager) -> None:
    for quota_kb in (-1, INFINITE + 1):
        with mq_error(MqErrorCode.MQ_ERROR_ILLEGAL_PROPERTY_VALUE):
            await manager.configure(quota_kb=quota_kb, throttled=True)
    info = await manager.info()
    assert (info.quota_kb, info.throttled) == (manager.config.initial_quota_kb, False)
