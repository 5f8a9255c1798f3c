"""Duplicate elimination of SRMP arrivals (reference §1.7 step 9) is keyed by source queue
manager, destination queue and message ID: the message ID alone is chosen by an anonymous
sender, so one sender's (or one queue's) IDs must never suppress another's (issue 18 item 7)."""

from __future__ import annotations

import uuid

import pytest

from qm.manager import QueueManager
from qm.model import MessageProperties
from tests.contract.support import counts, new_queue

pytestmark = pytest.mark.anyio

REAL, JUNK = "private$/orders", "private$/junk"
SENDER = uuid.UUID("5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93")
OTHER_SENDER = uuid.UUID("0e9d2c41-93aa-4f7b-b0f2-6c1d5e8a4b27")
MESSAGE_ID = f"{{{SENDER}}}\\7001"


def from_sender(sender: uuid.UUID) -> MessageProperties:
    return MessageProperties(body=b"x", message_id=MESSAGE_ID, source_machine=sender)


async def test_ids_sent_to_another_queue_suppress_nothing_here(manager: QueueManager) -> None:
    """Pre-sending a sender's future IDs to a junk queue must not make its real messages vanish."""
    await new_queue(manager, REAL)
    await new_queue(manager, JUNK)
    assert await manager.deliver(JUNK, from_sender(SENDER), duplicate_key=MESSAGE_ID) is not None
    assert await manager.deliver(REAL, from_sender(SENDER), duplicate_key=MESSAGE_ID) is not None
    assert await counts(manager, REAL) == (1, 1)


async def test_another_senders_ids_suppress_nothing(manager: QueueManager) -> None:
    await new_queue(manager, REAL)
    assert await manager.deliver(REAL, from_sender(OTHER_SENDER), duplicate_key=MESSAGE_ID) is not None
    assert await manager.deliver(REAL, from_sender(SENDER), duplicate_key=MESSAGE_ID) is not None
    assert await counts(manager, REAL) == (2, 2)


async def test_a_resend_from_the_same_sender_to_the_same_queue_is_a_duplicate(manager: QueueManager) -> None:
    await new_queue(manager, REAL)
    assert await manager.deliver(REAL, from_sender(SENDER), duplicate_key=MESSAGE_ID) is not None
    assert await manager.deliver(REAL, from_sender(SENDER), duplicate_key=MESSAGE_ID) is None
    assert await counts(manager, REAL) == (1, 1)
