"""Acknowledgment messages (reference §5.2, §7.14): who gets one, and what it carries."""

from __future__ import annotations

import struct
import uuid
from dataclasses import replace
from datetime import datetime

from qm.model import INFINITE, Acknowledgment, Delivery, MessageClass, MessageProperties


def requested(acknowledge: int, message_class: int) -> bool:
    """Does an original message with these MQMSG_ACKNOWLEDGMENT_* flags want this class?"""
    if message_class == MessageClass.ACK_REACH_QUEUE:
        return bool(acknowledge & Acknowledgment.POS_ARRIVAL)
    if message_class == MessageClass.ACK_RECEIVE:
        return bool(acknowledge & Acknowledgment.POS_RECEIVE)
    if message_class & 0xC000 == 0xC000:
        return bool(acknowledge & Acknowledgment.NEG_RECEIVE)
    if message_class & 0x8000:
        return bool(acknowledge & Acknowledgment.NEG_ARRIVAL)
    return False


def acknowledgment(
    original: MessageProperties,
    original_message_id: str,
    message_class: int,
    destination_format_name: str,
    source_machine: uuid.UUID,
    now: datetime,
    transactional: bool = False,
) -> MessageProperties:
    """The acknowledgment of `original`, to be sent to its admin queue (reference §7.14)."""
    negative = bool(message_class & 0x8000)
    return replace(
        MessageProperties(),
        body=original.body if negative else b"",
        label=original.label,
        body_type=original.body_type if negative else 0,
        priority=0 if transactional else original.priority,
        message_class=message_class,
        correlation_id=message_id_bytes(original_message_id),
        app_specific=original.app_specific,
        response_queue=destination_format_name,
        delivery=Delivery.EXPRESS,
        time_to_be_received=INFINITE,
        time_to_reach_queue=INFINITE,
        sent_time=now,
        source_machine=source_machine,
    )


def message_id_bytes(message_id: str) -> bytes | None:
    """`{guid}\\N` (or `guid\\N`) as MSMQ's 20 bytes: GUID in its in-memory layout, uint32 LE."""
    guid_text, separator, sequence = message_id.rpartition("\\")
    try:
        guid = uuid.UUID(guid_text.strip("{}"))
        number = int(sequence) & 0xFFFFFFFF
    except ValueError:
        return None
    if not separator:
        return None
    return guid.bytes_le + struct.pack("<I", number)
