"""The envelope of a message the gateway sends over SRMP: `message_properties` in reverse.

Timers leave as absolute deadlines computed from the time of this POST and what remains of
the message's lifetimes, so every hop subtracts the time the message spent on it (§3.3)."""

from __future__ import annotations

import math
from datetime import datetime

from qm.model import INFINITE, Acknowledgment, Delivery, JournalFlags, Message, MessageClass
from soap import namespaces as ns
from soap.envelope import (
    CommitmentReceipt,
    DeliveryReceipt,
    Eod,
    Msmq,
    Path,
    Properties,
    Services,
    SrmpEnvelope,
    Stream,
    StreamReceipt,
)
from soap.ids import MESSAGE_ID_SIZE, MessageId, StreamId
from soap.times import SrmpTime, TimerMapping, epoch_of, outbound_timer_fields

_HTTP_FORMAT_PREFIX = "direct="
_RECEIVE_NACKS = frozenset(range(0xC000, 0xC005))
"""NACK classes of a message that left its queue without being received (reference §5.1)."""


def envelope_for(
    message: Message, to_url: str, now: datetime, mapping: TimerMapping, stream: Stream | None = None
) -> SrmpEnvelope:
    """The SRMP envelope of a stored `message` for its remote queue `to_url`."""
    properties = message.properties
    sent = epoch_of(now)
    expires_at, ttrq = outbound_timer_fields(
        sent, _remaining(message.ttbr_deadline, now), _remaining(message.ttrq_deadline, now), mapping
    )
    message_id = MessageId.from_text(message.message_id)
    msmq = Msmq(
        message_class=properties.message_class or MessageClass.NORMAL,
        priority=properties.priority,
        body_type=properties.body_type,
        source_qm_guid=message.source_machine,
        ttrq=ttrq,
        journal=bool(properties.journal & JournalFlags.JOURNAL),
        dead_letter=bool(properties.journal & JournalFlags.DEADLETTER),
        correlation=properties.correlation_id,
        app=properties.app_specific,
        hash_algorithm=0,
        eod=Eod(message.first_in_transaction, message.last_in_transaction) if stream is not None else None,
        admin_mqf=_other_format_names(properties.admin_queue),
        response_mqf=_other_format_names(properties.response_queue),
    )
    path = Path(
        action=ns.LABEL_PREFIX + properties.label,
        to=to_url,
        id=message_id,
        rev_via=_address(properties.response_queue),
    )
    delivery_receipt, commitment_receipt = _receipt_elements(message)
    stream_receipt = _final_receipt_stream(message)
    if stream_receipt is not None and commitment_receipt is None and delivery_receipt is None:
        commitment_receipt = _commitment(message)
    return SrmpEnvelope(
        path=path,
        properties=Properties(expires_at, SrmpTime.from_epoch(sent)),
        services=_services(properties.delivery, properties.acknowledge, properties.admin_queue),
        stream=stream,
        stream_receipt=stream_receipt,
        delivery_receipt=delivery_receipt,
        commitment_receipt=commitment_receipt,
        msmq=msmq,
        body=properties.body or None,
        extension=properties.extension or None,
    )


def _receipt_elements(message: Message) -> tuple[DeliveryReceipt | None, CommitmentReceipt | None]:
    """An acknowledgment travels as the receipt SRMP defines for its class (reference §4.5,
    §4.6): arrival as `<deliveryReceipt>`, receive or a NACK of the receive as
    `<commitmentReceipt>`; the original's ID is the acknowledgment's correlation ID."""
    properties = message.properties
    correlation = properties.correlation_id
    if correlation is None or len(correlation) != MESSAGE_ID_SIZE:
        return None, None
    original = MessageId.from_bytes(correlation)
    when = SrmpTime.from_datetime(message.sent_time)
    if properties.message_class == MessageClass.ACK_REACH_QUEUE:
        return DeliveryReceipt(when, original), None
    if properties.message_class == MessageClass.ACK_RECEIVE or properties.message_class in _RECEIVE_NACKS:
        positive = properties.message_class == MessageClass.ACK_RECEIVE
        return None, CommitmentReceipt(when, positive, original)
    return None, None


def _final_receipt_stream(message: Message) -> StreamReceipt | None:
    """A final receipt (reference §4.4) carries `<streamReceipt>` next to its
    `<commitmentReceipt>`: the stream it reports on and the ordinal the receiver holds."""
    if message.stream is None or message.transactional:
        return None
    message_class = message.properties.message_class
    if message_class != MessageClass.ACK_RECEIVE and not message_class & 0x8000:
        return None
    return StreamReceipt(StreamId.parse(message.stream.stream_id), message.stream.current)


def _commitment(message: Message) -> CommitmentReceipt | None:
    """`<commitmentReceipt>` for a final outcome outside 0xC000-0xC004 (0x8001, deleted)."""
    correlation = message.properties.correlation_id
    if correlation is None or len(correlation) != MESSAGE_ID_SIZE:
        return None
    positive = message.properties.message_class == MessageClass.ACK_RECEIVE
    return CommitmentReceipt(
        SrmpTime.from_datetime(message.sent_time), positive, MessageId.from_bytes(correlation)
    )


def http_url(format_name: str | None) -> str | None:
    """The URL of a `DIRECT=HTTP(S)://` format name, else None."""
    if format_name is None:
        return None
    text = format_name.strip()
    if not text.casefold().startswith(_HTTP_FORMAT_PREFIX):
        return None
    url = text[len(_HTTP_FORMAT_PREFIX) :]
    return url if url.casefold().startswith(("http://", "https://")) else None


def _remaining(deadline: datetime | None, now: datetime) -> int:
    if deadline is None:
        return INFINITE
    return max(0, math.ceil((deadline - now).total_seconds()))


def _services(delivery: int, acknowledge: int, admin_queue: str | None) -> Services | None:
    durable = delivery == Delivery.RECOVERABLE
    admin_url = http_url(admin_queue)
    if admin_url is None:
        return Services(durable=True) if durable else None
    wanted = Acknowledgment(acknowledge)
    positive = bool(wanted & Acknowledgment.POS_RECEIVE)
    negative = bool(wanted & Acknowledgment.NEG_RECEIVE)
    return Services(
        durable=durable,
        delivery_receipt_to=admin_url if wanted & Acknowledgment.POS_ARRIVAL else None,
        commitment_receipt_to=admin_url if positive or negative else None,
        commitment_positive=positive,
        commitment_negative=negative,
    )


def _address(format_name: str | None) -> str | None:
    """`rev/via`: an HTTP queue by its URL, any other queue as `MSMQ:` + its format name."""
    if not format_name:
        return None
    return http_url(format_name) or ns.LABEL_PREFIX + format_name


def _other_format_names(format_name: str | None) -> tuple[str, ...]:
    """Format names an HTTP receiver cannot use as URLs travel in `<Msmq>` (reference §1.5.8)."""
    if not format_name or http_url(format_name) is not None:
        return ()
    return (format_name,)
