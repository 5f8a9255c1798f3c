"""Pure queue-manager rules: lookup IDs, quotas, property limits, deadlines."""

from __future__ import annotations

import math
import uuid
from datetime import datetime, timedelta

from qm.errors import MqError, MqErrorCode
from qm.model import (
    CORRELATION_ID_SIZE,
    GUID_NULL,
    INFINITE,
    MAX_LABEL_LENGTH,
    MAX_PRIORITY,
    MessageProperties,
)
from qm.store import EnqueueOutcome

COUNTER_BITS = 56
COUNTER_MASK = (1 << COUNTER_BITS) - 1
_UINT32_MAX = 0xFFFFFFFF
_UINT16_MAX = 0xFFFF
KB = 1024


def lookup_id_for(priority: int, counter: int) -> int:
    """Reference §5.9: high 8 bits 7 - priority, low 56 bits the QM's counter.

    Numeric order of lookup IDs is then queue order: priority descending, then arrival.
    """
    return ((MAX_PRIORITY - priority) << COUNTER_BITS) | (counter & COUNTER_MASK)


def priority_of(lookup_id: int) -> int:
    return MAX_PRIORITY - (lookup_id >> COUNTER_BITS)


def counter_of(lookup_id: int) -> int:
    return lookup_id & COUNTER_MASK


SEQUENCE_MASK = _UINT32_MAX
"""The bits of a counter a message ID's sequence keeps."""


def message_id_for(guid: uuid.UUID, counter: int) -> str:
    """Message IDs as MSMQ writes them: `{guid}\\sequence` with a 32-bit sequence."""
    return f"{message_id_prefix(guid)}{counter & SEQUENCE_MASK}"


def duplicate_key(source_qm: uuid.UUID | None, queue_id: int, message_id: str) -> str:
    """What duplicate elimination remembers of an SRMP arrival (reference §1.7 step 9): the
    source queue manager, the destination queue and the message ID together. The ID alone is
    chosen by an anonymous sender: keyed on it, IDs sent to one queue (or claimed by another
    sender) would make real messages vanish, answered 200. At most 36 + 10 + 49 + 2 characters
    for the IDs SRMP carries (`{guid}\\uint32`)."""
    return f"{source_qm or GUID_NULL}/{queue_id}/{message_id}"


def message_id_prefix(guid: uuid.UUID) -> str:
    """What comes before the sequence in message_id_for: `{guid}\\`."""
    return f"{{{guid}}}\\"


def stored_size(properties: MessageProperties) -> int:
    """Bytes a message counts against quotas: body plus extension."""
    return len(properties.body) + len(properties.extension)


def admit(
    size: int,
    queue_bytes: int,
    queue_quota_kb: int,
    total_bytes: int,
    manager_quota_kb: int,
    throttled: bool,
) -> EnqueueOutcome:
    """Reference §7.3 steps 1 and 2: machine quota and throttling first, then the queue's."""
    if throttled or exceeds(total_bytes + size, manager_quota_kb):
        return EnqueueOutcome.QUEUE_MANAGER_QUOTA_EXCEEDED
    if exceeds(queue_bytes + size, queue_quota_kb):
        return EnqueueOutcome.QUEUE_QUOTA_EXCEEDED
    return EnqueueOutcome.ACCEPTED


def exceeds(byte_count: int, quota_kb: int) -> bool:
    return quota_kb != INFINITE and byte_count > quota_kb * KB


def validate_properties(properties: MessageProperties, max_body_bytes: int) -> None:
    """Reject out-of-range properties before anything is stored."""
    _check_range("priority", properties.priority, 0, MAX_PRIORITY)
    if len(properties.label) > MAX_LABEL_LENGTH:
        raise MqError(
            MqErrorCode.MQ_ERROR_LABEL_TOO_LONG,
            f"the label has {len(properties.label)} characters; at most {MAX_LABEL_LENGTH}",
        )
    correlation = properties.correlation_id
    if correlation is not None and len(correlation) != CORRELATION_ID_SIZE:
        raise MqError(
            MqErrorCode.MQ_ERROR_ILLEGAL_PROPERTY_SIZE,
            f"a correlation ID has {CORRELATION_ID_SIZE} bytes, not {len(correlation)}",
        )
    if len(properties.body) > max_body_bytes:
        raise body_too_large(len(properties.body), max_body_bytes)
    _check_range("body_type", properties.body_type, 0, _UINT16_MAX)
    _check_range("message_class", properties.message_class, 0, _UINT16_MAX)
    _check_range("app_specific", properties.app_specific, 0, _UINT32_MAX)
    _check_range("acknowledge", properties.acknowledge, 0, 0x0F)
    _check_range("journal", properties.journal, 0, 0x03)
    _check_range("time_to_be_received", properties.time_to_be_received, 0, INFINITE)
    _check_range("time_to_reach_queue", properties.time_to_reach_queue, 0, INFINITE)


def body_too_large(size: int, max_body_bytes: int) -> MqError:
    return MqError(
        MqErrorCode.MQ_ERROR_INSUFFICIENT_RESOURCES,
        f"the body has {size} bytes; this gateway accepts at most {max_body_bytes}",
    )


def _check_range(name: str, value: int, low: int, high: int) -> None:
    if not low <= value <= high:
        raise MqError(
            MqErrorCode.MQ_ERROR_ILLEGAL_PROPERTY_VALUE,
            f"{name} is {value}; it must be between {low} and {high}",
        )


def deadline(start: datetime, seconds: int) -> datetime | None:
    """An absolute deadline, or None for INFINITE."""
    if seconds == INFINITE:
        return None
    return start + timedelta(seconds=seconds)


def remaining_seconds(deadline_at: datetime | None, now: datetime) -> int:
    """What is left of a timer, reported on receive (reference §7.4); INFINITE stays so."""
    if deadline_at is None:
        return INFINITE
    # Rounded up: a message sent with 3600 s reads 3600 right away, and 0 only once due.
    return max(0, math.ceil((deadline_at - now).total_seconds()))


def is_expired(deadline_at: datetime | None, now: datetime) -> bool:
    return deadline_at is not None and deadline_at <= now
