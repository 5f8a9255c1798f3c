"""The typed SRMP envelope (reference §1.4-§1.6) and its mapping to MSMQ message properties.

The dataclasses hold what is on the wire, spelled as the specification spells it; the
MSMQ meaning (defaults, `MSMQ:` prefixes, timers) is applied by `message_properties`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime

from qm.model import (
    DEFAULT_PRIORITY,
    GUID_NULL,
    Acknowledgment,
    Delivery,
    JournalFlags,
    MessageClass,
    MessageProperties,
)
from soap.ids import DEFAULT_MESSAGE_ID, MessageId, StreamId
from soap.namespaces import LABEL_PREFIX
from soap.times import SrmpTime, Timers, TimerSettings, epoch_of, resolve_timers


@dataclass(frozen=True, slots=True)
class Path:
    """WS-Routing `<path>`: `action` (label), `to` (destination URL), `id`, `rev/via`."""

    action: str
    to: str
    id: MessageId | None = None
    """None when absent, or unreadable in a message without `<Msmq>` (where it is ignored)."""
    rev_via: str | None = None
    """Response queue: an http(s) URL or `MSMQ:` + format name; None when absent or empty."""

    @property
    def label(self) -> str:
        """The label: what follows `MSMQ:`; without that prefix the message has no label."""
        return self.action[len(LABEL_PREFIX) :] if has_msmq_prefix(self.action) else ""


@dataclass(frozen=True, slots=True)
class Properties:
    """SRMP `<properties>`."""

    expires_at: SrmpTime
    sent_at: SrmpTime | None = None


@dataclass(frozen=True, slots=True)
class Services:
    """SRMP `<services>`: durability and receipt requests."""

    durable: bool = False
    delivery_receipt_to: str | None = None
    """`deliveryReceiptRequest/sendTo`."""
    commitment_receipt_to: str | None = None
    """`commitmentReceiptRequest/sendTo`."""
    commitment_positive: bool = False
    """`commitmentReceiptRequest/positiveOnly`."""
    commitment_negative: bool = False
    """`commitmentReceiptRequest/negativeOnly`."""


@dataclass(frozen=True, slots=True)
class Stream:
    """SRMP `<Stream>` of a transactional (exactly-once, in-order) message (reference §4)."""

    stream_id: StreamId
    current: int
    previous: int | None = None
    send_receipts_to: str | None = None
    """`start/sendReceiptsTo`: present exactly when `<start>` is."""
    start_expires_at: SrmpTime | None = None
    receipt_requested: bool = False
    """`<streamReceiptRequest/>`."""
    end: bool = False


@dataclass(frozen=True, slots=True)
class StreamReceipt:
    stream_id: StreamId
    last_ordinal: int


@dataclass(frozen=True, slots=True)
class DeliveryReceipt:
    received_at: SrmpTime
    id: MessageId


@dataclass(frozen=True, slots=True)
class CommitmentReceipt:
    decided_at: SrmpTime
    positive: bool
    """`<decision>positive</decision>` or `negative`."""
    id: MessageId
    commitment_code: str | None = None
    commitment_detail: str | None = None
    """`xCommitmentDetail`."""


@dataclass(frozen=True, slots=True)
class Eod:
    """`<Eod>`: first/last message of a sender transaction."""

    first: bool = False
    last: bool = False
    connector_id: uuid.UUID | None = None


@dataclass(frozen=True, slots=True)
class Provider:
    type: int
    name: str


@dataclass(frozen=True, slots=True)
class Msmq:
    """The `<Msmq>` block (namespace `msmq.namespace.xml`, reference §1.5.8)."""

    message_class: int
    priority: int
    body_type: int
    source_qm_guid: uuid.UUID
    ttrq: SrmpTime
    journal: bool = False
    dead_letter: bool = False
    correlation: bytes | None = None
    trace: bool = False
    connector_type: uuid.UUID | None = None
    app: int | None = None
    hash_algorithm: int | None = None
    eod: Eod | None = None
    provider: Provider | None = None
    destination_mqf: tuple[str, ...] = ()
    admin_mqf: tuple[str, ...] = ()
    response_mqf: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SrmpEnvelope:
    """One SRMP message: the header blocks, the MIME attachments and the envelope as received."""

    path: Path
    properties: Properties
    services: Services | None = None
    stream: Stream | None = None
    stream_receipt: StreamReceipt | None = None
    delivery_receipt: DeliveryReceipt | None = None
    commitment_receipt: CommitmentReceipt | None = None
    msmq: Msmq | None = None
    signature_present: bool = False
    body: bytes | None = None
    """The `body@` attachment; None when the request had none."""
    extension: bytes | None = None
    """The `extension@` attachment (PROPID_M_EXTENSION)."""
    envelope_xml: bytes = field(default=b"", compare=False, repr=False)
    """The envelope part byte for byte as received (PROPID_M_SOAP_ENVELOPE)."""
    ignored_headers: tuple[str, ...] = field(default=(), compare=False)
    """Header entries not understood and not mustUnderstand, as `{namespace}name`."""

    @property
    def message_id(self) -> MessageId:
        """The id MSMQ gives the message: `<id>` only when `<Msmq>` is present (reference §1.5.1)."""
        if self.msmq is None or self.path.id is None:
            return DEFAULT_MESSAGE_ID
        return self.path.id

    @property
    def destination_format_name(self) -> str:
        return "DIRECT=" + self.path.to

    @property
    def is_receipt(self) -> bool:
        return any((self.stream_receipt, self.delivery_receipt, self.commitment_receipt))


def has_msmq_prefix(text: str) -> bool:
    """`MSMQ:` in any ASCII case."""
    prefix = text[: len(LABEL_PREFIX)]
    return prefix.isascii() and prefix.upper() == LABEL_PREFIX


def format_name_of(address: str) -> str:
    """An SRMP queue address as an MSMQ format name: `MSMQ:` stripped, else `DIRECT=` + URL."""
    if has_msmq_prefix(address):
        return address[len(LABEL_PREFIX) :]
    return "DIRECT=" + address


def envelope_timers(envelope: SrmpEnvelope, settings: TimerSettings, arrival: datetime) -> Timers:
    """Resolve the two timers; without `sentAt` the arrival time stands for it (reference §3.3)."""
    sent_at = envelope.properties.sent_at
    sent = sent_at.epoch if sent_at is not None else epoch_of(arrival)
    ttrq = envelope.msmq.ttrq.epoch if envelope.msmq is not None else None
    return resolve_timers(sent, envelope.properties.expires_at.epoch, ttrq, settings)


def message_properties(envelope: SrmpEnvelope, timers: Timers) -> MessageProperties:
    """The MSMQ message properties of a received message (reference §1.5, §5)."""
    msmq = envelope.msmq
    return MessageProperties(
        body=envelope.body or b"",
        label=envelope.path.label,
        body_type=msmq.body_type if msmq else 0,
        priority=msmq.priority if msmq else DEFAULT_PRIORITY,
        message_class=msmq.message_class if msmq else MessageClass.NORMAL,
        correlation_id=msmq.correlation if msmq else None,
        app_specific=(msmq.app or 0) if msmq else 0,
        extension=envelope.extension or b"",
        response_queue=_response_queue(envelope),
        admin_queue=_admin_queue(envelope),
        acknowledge=acknowledgments(envelope.services),
        journal=_journal(msmq),
        delivery=_delivery(envelope),
        time_to_be_received=timers.time_to_be_received,
        time_to_reach_queue=timers.time_to_reach_queue,
        sent_time=envelope.properties.sent_at.utc if envelope.properties.sent_at else None,
        source_machine=msmq.source_qm_guid if msmq else GUID_NULL,
        message_id=envelope.message_id.text,
    )


def acknowledgments(services: Services | None) -> Acknowledgment:
    """PROPID_M_ACKNOWLEDGE from the receipt requests (reference §5.2)."""
    flags = Acknowledgment.NONE
    if services is None:
        return flags
    if services.delivery_receipt_to is not None:
        flags |= Acknowledgment.POS_ARRIVAL
    if services.commitment_receipt_to is not None and services.commitment_positive:
        flags |= Acknowledgment.POS_RECEIVE
    if services.commitment_receipt_to is not None and services.commitment_negative:
        flags |= Acknowledgment.NEG_RECEIVE
    return flags


def _response_queue(envelope: SrmpEnvelope) -> str | None:
    if envelope.path.rev_via:
        return format_name_of(envelope.path.rev_via)
    if envelope.msmq and envelope.msmq.response_mqf:
        return ",".join(envelope.msmq.response_mqf)
    return None


def _admin_queue(envelope: SrmpEnvelope) -> str | None:
    """MSMQ has one admin queue; Windows writes the same URL into both receipt requests."""
    services = envelope.services
    url = services and (services.delivery_receipt_to or services.commitment_receipt_to)
    if url:
        return format_name_of(url)
    if envelope.msmq and envelope.msmq.admin_mqf:
        return ",".join(envelope.msmq.admin_mqf)
    return None


def _journal(msmq: Msmq | None) -> JournalFlags:
    flags = JournalFlags.NONE
    if msmq is not None and msmq.dead_letter:
        flags |= JournalFlags.DEADLETTER
    if msmq is not None and msmq.journal:
        flags |= JournalFlags.JOURNAL
    return flags


def _delivery(envelope: SrmpEnvelope) -> Delivery:
    """`<durable/>` is recoverable, and so is every stream message (reference §4.1)."""
    durable = envelope.services is not None and envelope.services.durable
    return Delivery.RECOVERABLE if durable or envelope.stream is not None else Delivery.EXPRESS
