"""Queue and message values of the queue manager (reference §5, §7.1). All frozen."""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass
from datetime import datetime

from qm.paths import QueuePath
from qm.streams import StreamPosition

INFINITE = 0xFFFFFFFF
"""Timer value (seconds) and quota value (KB) meaning 'no limit', as MSMQ writes it."""

MAX_LABEL_LENGTH = 249
CORRELATION_ID_SIZE = 20
DEFAULT_PRIORITY = 3
MAX_PRIORITY = 7
GUID_NULL = uuid.UUID(int=0)


class Delivery(enum.IntEnum):
    """PROPID_M_DELIVERY."""

    EXPRESS = 0
    RECOVERABLE = 1


class MessageClass(enum.IntEnum):
    """PROPID_M_CLASS (reference §5.1)."""

    NORMAL = 0x0000
    REPORT = 0x0001
    ACK_REACH_QUEUE = 0x0002
    ORDER_ACK = 0x00FF
    ACK_RECEIVE = 0x4000
    NACK_BAD_DST_Q = 0x8000
    NACK_DELETED = 0x8001
    NACK_REACH_QUEUE_TIMEOUT = 0x8002
    NACK_Q_EXCEED_QUOTA = 0x8003
    NACK_ACCESS_DENIED = 0x8004
    NACK_HOP_COUNT_EXCEEDED = 0x8005
    NACK_BAD_SIGNATURE = 0x8006
    NACK_BAD_ENCRYPTION = 0x8007
    NACK_COULD_NOT_ENCRYPT = 0x8008
    NACK_NOT_TRANSACTIONAL_Q = 0x8009
    NACK_NOT_TRANSACTIONAL_MSG = 0x800A
    NACK_UNSUPPORTED_CRYPTO_PROVIDER = 0x800B
    NACK_SOURCE_COMPUTER_GUID_CHANGED = 0x800C
    NACK_MESSAGE_TOO_LARGE = 0x800D
    NACK_Q_DELETED = 0xC000
    NACK_Q_PURGED = 0xC001
    NACK_RECEIVE_TIMEOUT = 0xC002
    NACK_RECEIVE_TIMEOUT_AT_SENDER = 0xC003
    NACK_RECEIVE_REJECTED = 0xC004


class Acknowledgment(enum.IntFlag):
    """PROPID_M_ACKNOWLEDGE (reference §5.2)."""

    NONE = 0x00
    POS_ARRIVAL = 0x01
    POS_RECEIVE = 0x02
    NEG_ARRIVAL = 0x04
    NEG_RECEIVE = 0x08


class JournalFlags(enum.IntFlag):
    """PROPID_M_JOURNAL (reference §5.3)."""

    NONE = 0
    DEADLETTER = 1
    JOURNAL = 2


@dataclass(frozen=True, slots=True)
class QueueSettings:
    """What a queue's creator chooses (PROPID_Q_*). Quotas in KB, INFINITE = unlimited."""

    label: str = ""
    transactional: bool = False
    quota_kb: int = INFINITE
    journal: bool = False
    journal_quota_kb: int = INFINITE
    base_priority: int = 0


@dataclass(frozen=True, slots=True)
class QueueChanges:
    """A partial update of a queue; None leaves a property as it is.

    Transactional is fixed at creation (reference §5.6) and so is not here.
    """

    label: str | None = None
    quota_kb: int | None = None
    journal: bool | None = None
    journal_quota_kb: int | None = None
    base_priority: int | None = None


@dataclass(frozen=True, slots=True)
class Queue:
    """A queue as stored, with its current totals."""

    id: int
    path: QueuePath
    settings: QueueSettings
    created_at: datetime
    modified_at: datetime
    message_count: int
    byte_count: int
    journal_queue_id: int | None = None


@dataclass(frozen=True, slots=True)
class QueueManagerInfo:
    """The queue manager's identity and machine-wide limits (reference §7.1)."""

    guid: uuid.UUID
    quota_kb: int
    throttled: bool
    message_count: int = 0
    byte_count: int = 0
    journal_quota_kb: int = INFINITE
    """The computer journal's quota (positive source journaling copies)."""


@dataclass(frozen=True, slots=True)
class MessageProperties:
    """What a sender may set (reference §5, PROPID_M_*). Timers are relative seconds."""

    body: bytes = b""
    label: str = ""
    body_type: int = 0
    priority: int = DEFAULT_PRIORITY
    message_class: int = MessageClass.NORMAL
    correlation_id: bytes | None = None
    app_specific: int = 0
    extension: bytes = b""
    response_queue: str | None = None
    admin_queue: str | None = None
    acknowledge: int = Acknowledgment.NONE
    journal: int = JournalFlags.NONE
    delivery: Delivery = Delivery.RECOVERABLE
    time_to_be_received: int = INFINITE
    time_to_reach_queue: int = INFINITE
    sent_time: datetime | None = None
    source_machine: uuid.UUID | None = None
    message_id: str | None = None
    """Kept as given when the sender already assigned one (SRMP); else the QM assigns it."""


@dataclass(frozen=True, slots=True)
class NewMessage:
    """A message ready for the store: properties plus what the queue manager assigned."""

    queue_id: int
    properties: MessageProperties
    message_id: str
    sent_time: datetime
    arrived_time: datetime
    source_machine: uuid.UUID
    ttbr_deadline: datetime | None
    ttrq_deadline: datetime | None
    transaction_id: str | None = None
    first_in_transaction: bool = False
    last_in_transaction: bool = False
    destination_queue: str | None = None
    """For a dead-lettered copy: the path of the queue it was sent to."""
    transactional: bool = False
    """Sent in a transaction (a single-message one included)."""
    duplicate_key: str | None = None
    """When set, the message is stored only if no message with this key arrived recently."""
    stream: StreamPosition | None = None
    """For an SRMP stream message: stored only if the stream accepts it (reference §4.2). For
    a final receipt (placed, never admitted): the stream it reports on (Message.stream)."""
    original_arrived_time: datetime | None = None
    received_time: datetime | None = None
    dead_lettered_time: datetime | None = None
    """Journal and dead-letter copies: when the original arrived, was received, was dead-lettered."""
    queue_key: str | None = None
    """The destination's path key when `queue_id` came from a cache: the store refuses the
    message if the queue with that ID no longer has this key (deleted, ID reused)."""
    srmp_source: str | None = None
    """Message.srmp_source."""


@dataclass(frozen=True, slots=True)
class Message:
    """A message read from a queue. `time_to_be_received` is what remains (reference §7.4)."""

    lookup_id: int
    queue_id: int
    message_id: str
    properties: MessageProperties
    sent_time: datetime
    arrived_time: datetime
    source_machine: uuid.UUID
    ttbr_deadline: datetime | None
    ttrq_deadline: datetime | None
    first_in_transaction: bool
    last_in_transaction: bool
    abort_count: int
    transaction_id: str | None = None
    lock_tag: str | None = None
    destination_queue: str | None = None
    """For a dead-lettered or journaled copy: the path of the queue it was sent to."""
    transactional: bool = False
    stream: StreamPosition | None = None
    """The incoming SRMP stream and ordinal the message arrived on; for a final receipt waiting
    to be sent, the stream it reports on and the ordinal its `<streamReceipt>` covers."""
    srmp_source: str | None = None
    """The source (qm.outbound.srmp_source) of the anonymous SRMP sender that sent it, kept by
    its copies and acknowledgments: the outgoing queues its acknowledgments and final receipts
    need are made on that sender's account (OutgoingQueueLimits). None for the messages of
    principals and of this queue manager."""

    @property
    def body_size(self) -> int:
        return len(self.properties.body)
