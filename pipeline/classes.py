"""Message class names (PROPID_M_CLASS, reference §5.1), written out for the pipeline,
which does not import the queue manager."""

from __future__ import annotations

CLASS_NAMES = {
    0x0000: "NORMAL",
    0x0001: "REPORT",
    0x0002: "ACK_REACH_QUEUE",
    0x00FF: "ORDER_ACK",
    0x4000: "ACK_RECEIVE",
    0x8000: "NACK_BAD_DST_Q",
    0x8001: "NACK_DELETED",
    0x8002: "NACK_REACH_QUEUE_TIMEOUT",
    0x8003: "NACK_Q_EXCEED_QUOTA",
    0x8004: "NACK_ACCESS_DENIED",
    0x8005: "NACK_HOP_COUNT_EXCEEDED",
    0x8006: "NACK_BAD_SIGNATURE",
    0x8007: "NACK_BAD_ENCRYPTION",
    0x8008: "NACK_COULD_NOT_ENCRYPT",
    0x8009: "NACK_NOT_TRANSACTIONAL_Q",
    0x800A: "NACK_NOT_TRANSACTIONAL_MSG",
    0x800B: "NACK_UNSUPPORTED_CRYPTO_PROVIDER",
    0x800C: "NACK_SOURCE_COMPUTER_GUID_CHANGED",
    0x800D: "NACK_MESSAGE_TOO_LARGE",
    0xC000: "NACK_Q_DELETED",
    0xC001: "NACK_Q_PURGED",
    0xC002: "NACK_RECEIVE_TIMEOUT",
    0xC003: "NACK_RECEIVE_TIMEOUT_AT_SENDER",
    0xC004: "NACK_RECEIVE_REJECTED",
}
EXPIRY_CLASSES = (0x8002, 0xC002, 0xC003)
"""A timer ran out: time-to-reach-queue, or time-to-be-received (here or at the sender)."""


def class_name(value: int) -> str:
    return CLASS_NAMES.get(value, "UNKNOWN")


def class_hex(value: int) -> str:
    return f"0x{value:04X}"


def parse_class(text: str) -> int:
    """A class by name (`NACK_RECEIVE_TIMEOUT`, `MQMSG_CLASS_` prefix allowed) or number (`0xC002`)."""
    name = text.strip().upper().removeprefix("MQMSG_CLASS_")
    for value, known in CLASS_NAMES.items():
        if known == name:
            return value
    try:
        value = int(text, 0)
    except ValueError:
        raise ValueError(
            f"unknown message class {text!r}: use a name such as NACK_RECEIVE_TIMEOUT or 0xC002"
        ) from None
    if value not in CLASS_NAMES:
        raise ValueError(f"unknown message class {text!r}")
    return value
