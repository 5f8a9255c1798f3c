"""SRMP requests built in code (through the product's own builder) for stream and forwarding tests."""

from __future__ import annotations

import time
import uuid

from soap.build import build_request
from soap.envelope import Msmq, Path, Properties, Services, SrmpEnvelope, Stream
from soap.ids import MessageId, StreamId
from soap.times import SrmpTime

SENDER_QM = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
HOUR_S = 3600


def stream_request(
    to: str,
    stream_id: StreamId,
    current: int,
    *,
    previous: int | None = None,
    receipts_to: str | None = None,
    body: bytes | None = None,
    expires_after_s: int = HOUR_S,
    ttrq_after_s: int = 2 * HOUR_S,
    dead_letter: bool = False,
) -> tuple[str, bytes]:
    """`(Content-Type, body)` of stream message `current` (with `<start>` when `receipts_to` is
    given); its message ID follows the stream and the ordinal, so a resend is the same message."""
    message_id = MessageId(SENDER_QM, ((stream_id.sequence & 0xFFFF) << 16) | current)
    sent = int(time.time())
    envelope = SrmpEnvelope(
        path=Path(action=f"MSMQ:msg-{current}", to=to, id=message_id),
        properties=Properties(SrmpTime.from_epoch(sent + expires_after_s), SrmpTime.from_epoch(sent)),
        services=Services(durable=True),
        stream=Stream(stream_id, current, previous, receipts_to),
        msmq=Msmq(
            message_class=0,
            priority=0,
            body_type=0,
            source_qm_guid=SENDER_QM,
            ttrq=SrmpTime.from_epoch(sent + ttrq_after_s),
            dead_letter=dead_letter,
        ),
        body=body if body is not None else f"body-{current}".encode(),
    )
    return build_request(envelope)


def new_stream_id() -> StreamId:
    return StreamId(SENDER_QM, (int(time.time()) << 32) | uuid.uuid4().int % 2**31)


def plain_request(
    to: str,
    sequence: int,
    body: bytes = b"hello",
    *,
    admin_url: str | None = None,
    delivery_receipt: bool = True,
) -> tuple[str, bytes]:
    """`(Content-Type, body)` of a recoverable message that is not in a stream; with
    `admin_url`, it asks for both commitment receipts there, and for a delivery receipt unless
    `delivery_receipt` is false."""
    sent = int(time.time())
    envelope = SrmpEnvelope(
        path=Path(action="MSMQ:plain", to=to, id=MessageId(SENDER_QM, sequence)),
        properties=Properties(SrmpTime.from_epoch(sent + HOUR_S), SrmpTime.from_epoch(sent)),
        services=Services(
            durable=True,
            delivery_receipt_to=admin_url if delivery_receipt else None,
            commitment_receipt_to=admin_url,
            commitment_positive=admin_url is not None,
            commitment_negative=admin_url is not None,
        ),
        msmq=Msmq(
            message_class=0,
            priority=3,
            body_type=0,
            source_qm_guid=SENDER_QM,
            ttrq=SrmpTime.from_epoch(sent + 2 * HOUR_S),
        ),
        body=body,
    )
    return build_request(envelope)


def receipted_request(to: str, sequence: int, receipts_to: str | None) -> tuple[str, bytes]:
    """`(Content-Type, body)` of a plain message asking for a delivery receipt (a positive
    arrival acknowledgment) at `receipts_to`."""
    sent = int(time.time())
    envelope = SrmpEnvelope(
        path=Path(action="MSMQ:receipted", to=to, id=MessageId(SENDER_QM, sequence)),
        properties=Properties(SrmpTime.from_epoch(sent + HOUR_S), SrmpTime.from_epoch(sent)),
        services=Services(durable=True, delivery_receipt_to=receipts_to),
        msmq=Msmq(
            message_class=0,
            priority=3,
            body_type=0,
            source_qm_guid=SENDER_QM,
            ttrq=SrmpTime.from_epoch(sent + 2 * HOUR_S),
        ),
        body=b"receipted",
    )
    return build_request(envelope)
