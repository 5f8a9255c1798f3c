"""The export view as the pipeline reads it (no Spark): what it says of transactional messages."""

from __future__ import annotations

import pytest

from qm.clock import SettableClock
from qm.manager import SINGLE_MESSAGE_TRANSACTION, QueueManager
from qm.model import JournalFlags, MessageProperties, QueueSettings
from qm.reading import QueueReader
from tests.pipeline.conftest import Sql

pytestmark = pytest.mark.anyio
PAYMENTS = "private$/payments"


async def test_transactional_messages_and_their_copies_say_so(
    manager: QueueManager, clock: SettableClock, sql: Sql
) -> None:
    await manager.create_queue(PAYMENTS, QueueSettings(transactional=True, journal=True))
    for label, ttbr in (("kept", 0xFFFFFFFF), ("received", 0xFFFFFFFF), ("expiring", 5)):
        properties = MessageProperties(label=label, time_to_be_received=ttbr, journal=JournalFlags.DEADLETTER)
        await manager.send(PAYMENTS, properties, SINGLE_MESSAGE_TRANSACTION)
    await manager.create_queue("private$/plain", QueueSettings())
    await manager.send("private$/plain", MessageProperties(label="plain"))
    reader = QueueReader(manager)
    received = await reader.receive(PAYMENTS, 0, SINGLE_MESSAGE_TRANSACTION)
    assert received is not None and received.properties.label == "kept"  # FIFO among priority 0
    clock.advance(60)
    assert await manager.expire_due() == 1
    rows = sql.rows("SELECT location, label, transactional FROM message_export_v1 ORDER BY location, label")
    found = {(location, label): bool(flag) for location, label, flag in rows}
    assert found == {
        ("queue", "plain"): False,
        ("queue", "received"): True,
        ("journal", "kept"): True,
        ("deadxact", "expiring"): True,
    }
