"""Helpers for the timer, dead-letter, acknowledgment and computer-journal contract tests."""

from __future__ import annotations

import struct
import uuid

from qm.clock import SettableClock
from qm.manager import QueueManager
from qm.model import Message
from qm.reading import QueueReader

DEADLETTER = "system$;deadletter"
DEADXACT = "system$;deadxact"
COMPUTER_JOURNAL = "system$;journal"
SYSTEM_QUEUES = (DEADLETTER, DEADXACT, COMPUTER_JOURNAL)

NACK_BAD_DST_Q = 0x8000
NACK_REACH_QUEUE_TIMEOUT = 0x8002
NACK_Q_EXCEED_QUOTA = 0x8003
NACK_Q_DELETED = 0xC000
NACK_Q_PURGED = 0xC001
NACK_RECEIVE_TIMEOUT = 0xC002
ACK_REACH_QUEUE = 0x0002
ACK_RECEIVE = 0x4000
"""Message classes (reference §5.1), written out here rather than taken from qm.model."""


async def expire(manager: QueueManager, clock: SettableClock, seconds: float) -> int:
    """Move the clock, then run one sweeper pass; return how many messages it expired."""
    clock.advance(seconds)
    return await manager.expire_due()


async def everything(reader: QueueReader, path: str) -> list[Message]:
    """The available messages of a queue in queue order, without removing them."""
    return await reader.browse(path, 0, 1000)


async def only(reader: QueueReader, path: str) -> Message:
    """The one available message of a queue (fails when there are none or several)."""
    found = await everything(reader, path)
    assert len(found) == 1, [message.properties.body for message in found]
    return found[0]


def msmq_message_id_bytes(message_id: str) -> bytes:
    """`{guid}\\N` as MSMQ's 20-byte OBJECTID (reference §5.8): GUID in its little-endian
    in-memory layout, then the sequence as a little-endian uint32. Written independently of
    qm.acks so that the tests check it rather than repeat it."""
    guid_text, sequence = message_id.rsplit("\\", 1)
    return uuid.UUID(guid_text.strip("{}")).bytes_le + struct.pack("<I", int(sequence))
