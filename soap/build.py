"""Building SRMP requests the way Windows frames them, and the receipts of reference §4.

`build_request` is the inverse of `parse_request`: a message with attachments becomes a
length-framed multipart/related body (reference §1.3), one without becomes bare text/xml.
The receipt builders return envelopes; their timers are written per `srmp_timer_mapping`.
"""

from __future__ import annotations

import uuid
import zlib
from dataclasses import replace
from datetime import datetime

from qm.model import DEFAULT_PRIORITY, INFINITE, MessageClass
from soap import namespaces as ns
from soap.envelope import (
    CommitmentReceipt,
    DeliveryReceipt,
    Msmq,
    Path,
    Properties,
    SrmpEnvelope,
    StreamReceipt,
)
from soap.ids import MessageId, StreamId
from soap.mime import valid_boundary
from soap.times import DEFAULT_TTRQ_S, SrmpTime, TimerMapping, epoch_of, outbound_timer_fields
from soap.writer import envelope_xml

STREAM_RECEIPT_LABEL = "QM Ordering Ack"
_CRLF = b"\r\n"


def build_request(envelope: SrmpEnvelope, boundary: str | None = None) -> tuple[str, bytes]:
    """`(Content-Type, body)` of the POST carrying `envelope`.

    `boundary` defaults to `MSMQ - SOAP boundary, <n>` with `n` derived from the content,
    so that the same message always gets the same bytes.
    """
    xml = envelope_xml(envelope)
    if envelope.body is None and envelope.extension is None:
        return ns.TEXT_XML, xml
    if boundary is None:
        boundary = f"{ns.BOUNDARY_PREFIX}{zlib.crc32(xml) % 100_000}"
    if not valid_boundary(boundary) or '"' in boundary or "\\" in boundary:
        raise ValueError(f"{boundary!r} is not a boundary: 1-70 printable ASCII characters, no quotes")
    content_type = f'{ns.MULTIPART_RELATED}; boundary="{boundary}"; type={ns.TEXT_XML}'
    return content_type, _multipart(envelope, xml, boundary.encode("ascii"))


def _multipart(envelope: SrmpEnvelope, xml: bytes, boundary: bytes) -> bytes:
    guid = _content_id_guid(envelope)
    parts = [_part(b"text/xml; charset=UTF-8", xml, None)]
    if envelope.body is not None:
        parts.append(_part(ns.OCTET_STREAM.encode(), envelope.body, f"{ns.BODY_CONTENT_ID}{guid}"))
    if envelope.extension is not None:
        parts.append(_part(ns.OCTET_STREAM.encode(), envelope.extension, f"{ns.EXTENSION_CONTENT_ID}{guid}"))
    delimiter = b"--" + boundary
    return b"".join(delimiter + _CRLF + part for part in parts) + delimiter + b"--" + _CRLF


def _part(content_type: bytes, payload: bytes, content_id: str | None) -> bytes:
    headers = [b"Content-Type: " + content_type, b"Content-Length: " + str(len(payload)).encode()]
    if content_id is not None:
        headers.append(b"Content-Id: " + content_id.encode("ascii"))
    return _CRLF.join(headers) + _CRLF + _CRLF + payload


def _content_id_guid(envelope: SrmpEnvelope) -> uuid.UUID:
    """Attachments are named after the sending queue manager (reference §1.3 item 4)."""
    if envelope.msmq is not None:
        return envelope.msmq.source_qm_guid
    return envelope.message_id.guid


def build_stream_receipt(
    *,
    stream_id: StreamId,
    last_ordinal: int,
    send_receipts_to: str,
    destination: str,
    message_id: MessageId,
    sent_at: datetime,
    mapping: TimerMapping = TimerMapping.SDK,
) -> SrmpEnvelope:
    """The order acknowledgment of reference §4.3 (vector 09): class 255, label `QM Ordering Ack`.

    `destination` is the stream's destination URL (written as `rev/via`), `message_id` a fresh
    id of the receiving queue manager, whose GUID is also the receipt's `SourceQmGuid`.
    """
    receipt = _receipt(
        label=STREAM_RECEIPT_LABEL,
        to=send_receipts_to,
        destination=destination,
        message_id=message_id,
        sent_at=sent_at,
        mapping=mapping,
        msmq_class=MessageClass.ORDER_ACK,
        priority=0,
        correlation=bytes(20),
        app=0,
    )
    return replace(receipt, stream_receipt=StreamReceipt(stream_id, last_ordinal))


def build_delivery_receipt(
    original: SrmpEnvelope,
    *,
    admin_url: str,
    received_at: datetime,
    message_id: MessageId,
    sent_at: datetime,
    mapping: TimerMapping = TimerMapping.SDK,
    priority: int = DEFAULT_PRIORITY,
) -> SrmpEnvelope:
    """A delivery receipt (reference §4.5, vector 10): class 2, correlation = the original's id.

    The priority defaults to 3 as vector 10 shows, where reference §4.5 says "the original's".
    """
    receipt = _receipt(
        label=original.path.label,
        to=admin_url,
        destination=original.path.to,
        message_id=message_id,
        sent_at=sent_at,
        mapping=mapping,
        msmq_class=MessageClass.ACK_REACH_QUEUE,
        priority=priority,
        correlation=original.message_id.to_bytes(),
        app=_app(original),
    )
    delivery = DeliveryReceipt(SrmpTime.from_datetime(received_at), original.message_id)
    return replace(receipt, delivery_receipt=delivery)


def build_commitment_receipt(
    original: SrmpEnvelope,
    *,
    admin_url: str,
    decided_at: datetime,
    message_class: int,
    message_id: MessageId,
    sent_at: datetime,
    mapping: TimerMapping = TimerMapping.SDK,
    priority: int = DEFAULT_PRIORITY,
    stream_receipt: StreamReceipt | None = None,
) -> SrmpEnvelope:
    """A commitment receipt (reference §4.6): positive for class 0x4000, negative for a NACK class.

    A negative receipt carries the original body. With `stream_receipt` it is the final receipt
    of a transactional message (reference §4.4), sent to the stream's `sendReceiptsTo`.
    """
    positive = message_class == MessageClass.ACK_RECEIVE
    decision = CommitmentReceipt(SrmpTime.from_datetime(decided_at), positive, original.message_id)
    receipt = _receipt(
        label=original.path.label,
        to=admin_url,
        destination=original.path.to,
        message_id=message_id,
        sent_at=sent_at,
        mapping=mapping,
        msmq_class=message_class,
        priority=priority,
        correlation=original.message_id.to_bytes(),
        app=_app(original),
    )
    return replace(
        receipt,
        commitment_receipt=decision,
        stream_receipt=stream_receipt,
        body=None if positive else original.body,
    )


def _app(original: SrmpEnvelope) -> int:
    return (original.msmq.app or 0) if original.msmq is not None else 0


def _receipt(
    *,
    label: str,
    to: str,
    destination: str,
    message_id: MessageId,
    sent_at: datetime,
    mapping: TimerMapping,
    msmq_class: int,
    priority: int,
    correlation: bytes,
    app: int,
) -> SrmpEnvelope:
    """Receipts are express, request nothing, expire never (TTBR) and carry the 4-day TTRQ."""
    sent = epoch_of(sent_at)
    expires_at, ttrq = outbound_timer_fields(sent, INFINITE, DEFAULT_TTRQ_S, mapping)
    msmq = Msmq(
        message_class=msmq_class,
        priority=priority,
        body_type=0,
        source_qm_guid=message_id.guid,
        ttrq=ttrq,
        correlation=correlation,
        app=app,
        hash_algorithm=0,
    )
    path = Path(action=ns.LABEL_PREFIX + label, to=to, id=message_id, rev_via=destination)
    return SrmpEnvelope(path=path, properties=Properties(expires_at, SrmpTime.from_epoch(sent)), msmq=msmq)
