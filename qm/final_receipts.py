"""Final receipts of transactional messages (reference §4.4): the outcome of a stream message
at its destination, reported to the stream's sender so that it can dead-letter a failure in its
transactional dead-letter queue.

Pure rules. The receiving side places a final receipt, in the removal's own transaction, in
the outgoing queue of the stream's `sendReceiptsTo` URL (an outbox row, sent like any outgoing
message); the sending side settles its waiting message when the receipt comes back.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from qm import acks
from qm.model import INFINITE, Delivery, JournalFlags, Message, MessageClass, MessageProperties

FINAL_CLASSES = frozenset(
    {
        MessageClass.ACK_RECEIVE,
        MessageClass.NACK_Q_DELETED,
        MessageClass.NACK_Q_PURGED,
        MessageClass.NACK_RECEIVE_TIMEOUT,
        MessageClass.NACK_DELETED,
        MessageClass.NACK_RECEIVE_REJECTED,
    }
)
"""The outcomes of reference §4.4's table: received (0x4000), queue deleted (0xC000), purged
(0xC001), TTBR expired in the queue (0xC002), deleted before being received (0x8001), rejected
by the receiving application (0xC004)."""


@dataclass(frozen=True, slots=True)
class StreamOrigin:
    """The incoming stream a message arrived on, as its receiver keeps it (reference §4.2)."""

    stream_id: str
    send_receipts_to: str
    destination: str
    """The URL the sender wrote in `<to>`: the receipt's `rev/via`."""
    last_ordinal: int
    """The stream's highest contiguous accepted ordinal: what the receipt's `<streamReceipt>` covers."""


def final_class(removal_class: int) -> int | None:
    """The class of the final receipt for a message that left its queue with this class
    (the class of its removal reason), or None when the removal is not a final outcome."""
    return removal_class if removal_class in FINAL_CLASSES else None


def wanted(message: Message, transactional: bool) -> bool:
    """Only transactional stream messages sent with negative source journaling (MQMSG_DEADLETTER,
    `<Msmq><DeadLetter/>`) earn a final receipt [Spec]."""
    dead_letter = bool(message.properties.journal & JournalFlags.DEADLETTER)
    return transactional and dead_letter and message.stream is not None


def receipt_properties(
    original: Message, message_class: int, origin: StreamOrigin, source_machine: uuid.UUID, now: datetime
) -> MessageProperties:
    """The final receipt's properties: an acknowledgment of the original (reference §7.14:
    correlation = the original's ID, its label and AppSpecific, priority 0, express, never
    expiring) without its body (the sender holds the message itself), with the stream's
    destination URL as `rev/via`."""
    return MessageProperties(
        label=original.properties.label,
        priority=0,
        message_class=message_class,
        correlation_id=acks.message_id_bytes(original.message_id),
        app_specific=original.properties.app_specific,
        response_queue=f"DIRECT={origin.destination}" if origin.destination else None,
        delivery=Delivery.EXPRESS,
        time_to_be_received=INFINITE,
        time_to_reach_queue=INFINITE,
        sent_time=now,
        source_machine=source_machine,
    )
