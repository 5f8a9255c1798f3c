"""Building requests and receipts (reference §1.3, §4), checked against the vectors' bytes."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from qm.model import MessageClass
from soap.build import build_commitment_receipt, build_delivery_receipt, build_request, build_stream_receipt
from soap.envelope import SrmpEnvelope, StreamReceipt
from soap.ids import MessageId
from soap.mime import boundary_of, parse_content_type
from soap.parse import parse_request
from soap.times import INFINITE_SENTINEL, TimerMapping
from tests.compat.vectors import load

GATEWAY = uuid.UUID("c4a19f02-7d3e-4b1a-8f55-2e9d6a0b7c31")
WINDOWS_SHAPED = [
    "01-express-basic",
    "03-recoverable-binary",
    "04-ttbr-ttrq-unicode",
    "05-correlation-response-admin",
    "06-delivery-receipt-request",
    "07-stream-first",
    "08-stream-second",
    "09-stream-receipt",
    "10-delivery-receipt",
    "13-timer-layout-mismatch",
]


def vector_envelope(name: str) -> SrmpEnvelope:
    vector = load(name)
    return parse_request(vector.request.body, vector.content_type)


def rebuilt(envelope: SrmpEnvelope) -> SrmpEnvelope:
    content_type, body = build_request(envelope)
    return parse_request(body, content_type)


@pytest.mark.parametrize("name", WINDOWS_SHAPED)
def test_windows_shaped_vectors_are_rebuilt_byte_for_byte(name: str) -> None:
    vector = load(name)
    content_type = vector.content_type
    assert content_type is not None
    media = parse_content_type(content_type)
    boundary = boundary_of(media).decode() if "boundary" in media.parameters else None
    assert build_request(vector_envelope(name), boundary) == (content_type, vector.request.body)


def test_the_stream_receipt_of_vector_09() -> None:
    """The receipt the gateway owes for vectors 07 and 08, exactly as vector 09 shows it."""
    first = vector_envelope("07-stream-first")
    assert first.stream is not None and first.stream.send_receipts_to is not None
    receipt = build_stream_receipt(
        stream_id=first.stream.stream_id,
        last_ordinal=2,
        send_receipts_to=first.stream.send_receipts_to,
        destination=first.path.to,
        message_id=MessageId(GATEWAY, 31337),
        sent_at=datetime(2024, 3, 11, 11, 0, 2, tzinfo=UTC),
    )
    vector = load("09-stream-receipt")
    assert build_request(receipt) == (vector.content_type, vector.request.body)


def test_the_delivery_receipt_of_vector_10() -> None:
    received = datetime(2024, 3, 11, 10, 15, 1, tzinfo=UTC)
    original = vector_envelope("06-delivery-receipt-request")
    assert original.services is not None and original.services.delivery_receipt_to is not None
    receipt = build_delivery_receipt(
        original,
        admin_url=original.services.delivery_receipt_to,
        received_at=received,
        message_id=MessageId(GATEWAY, 31338),
        sent_at=received,
    )
    vector = load("10-delivery-receipt")
    assert build_request(receipt) == (vector.content_type, vector.request.body)


def test_receipts_in_the_wire_example_layout() -> None:
    first = vector_envelope("07-stream-first")
    assert first.stream is not None
    receipt = build_stream_receipt(
        stream_id=first.stream.stream_id,
        last_ordinal=1,
        send_receipts_to="http://wks/msmq/private$/order_queue$",
        destination=first.path.to,
        message_id=MessageId(GATEWAY, 1),
        sent_at=datetime(2024, 3, 11, 11, 0, 2, tzinfo=UTC),
        mapping=TimerMapping.WIRE_EXAMPLE,
    )
    assert receipt.properties.expires_at.text == INFINITE_SENTINEL
    assert receipt.msmq is not None and receipt.msmq.ttrq.text == "20240315T110002"


@pytest.mark.parametrize("positive", [True, False])
def test_commitment_receipts(positive: bool) -> None:
    original = vector_envelope("05-correlation-response-admin")
    message_class = MessageClass.ACK_RECEIVE if positive else MessageClass.NACK_RECEIVE_TIMEOUT
    receipt = build_commitment_receipt(
        original,
        admin_url="http://wks-sales07.example.net/msmq/private$/acks",
        decided_at=datetime(2024, 3, 12, tzinfo=UTC),
        message_class=message_class,
        message_id=MessageId(GATEWAY, 5),
        sent_at=datetime(2024, 3, 12, tzinfo=UTC),
    )
    content_type, _ = build_request(receipt)
    parsed = rebuilt(receipt)
    assert parsed == receipt
    assert parsed.commitment_receipt is not None and parsed.commitment_receipt.positive is positive
    assert parsed.commitment_receipt.id == original.message_id
    assert parsed.msmq is not None and parsed.msmq.message_class == message_class
    assert parsed.msmq.correlation == original.message_id.to_bytes() and parsed.msmq.app == 42
    assert parsed.path.label == "price-check" and parsed.path.rev_via == original.path.to
    assert parsed.body == (None if positive else original.body)
    assert (content_type == "text/xml") is positive


def test_final_receipt_of_a_transactional_message() -> None:
    original = vector_envelope("08-stream-second")
    assert original.stream is not None
    receipt = build_commitment_receipt(
        original,
        admin_url="http://wks-sales07.example.net/msmq/private$/order_queue$",
        decided_at=datetime(2024, 3, 12, tzinfo=UTC),
        message_class=MessageClass.ACK_RECEIVE,
        message_id=MessageId(GATEWAY, 6),
        sent_at=datetime(2024, 3, 12, tzinfo=UTC),
        stream_receipt=StreamReceipt(original.stream.stream_id, 2),
    )
    parsed = rebuilt(receipt)
    assert parsed.stream_receipt == StreamReceipt(original.stream.stream_id, 2)
    assert parsed.commitment_receipt is not None


def test_text_is_escaped_and_survives_a_round_trip() -> None:
    original = vector_envelope("01-express-basic")
    for label in ("a & b < c > d", "line\r\nbreak", " spaced ", "tab\there", "😀 ünïcode"):
        envelope = replace(original, path=replace(original.path, action="MSMQ:" + label))
        content_type, body = build_request(envelope)
        assert parse_request(body, content_type).path.label == label


@pytest.mark.parametrize("label", ["bell\x07", "nul\x00", "lone \ud800 surrogate", "\ufffe"])
def test_text_that_xml_cannot_carry_is_refused(label: str) -> None:
    original = vector_envelope("01-express-basic")
    with pytest.raises(ValueError, match=r"XML 1\.0"):
        build_request(replace(original, path=replace(original.path, action="MSMQ:" + label)))


@pytest.mark.parametrize("boundary", ["", "x" * 71, 'a"b', "a\\b", "é", "a\r\nb"])
def test_boundaries_the_content_type_cannot_carry_are_refused(boundary: str) -> None:
    with pytest.raises(ValueError, match="boundary"):
        build_request(vector_envelope("01-express-basic"), boundary)


def test_framing_choices() -> None:
    original = vector_envelope("01-express-basic")
    content_type, body = build_request(original)
    assert content_type.startswith('multipart/related; boundary="MSMQ - SOAP boundary, ')
    assert build_request(original) == (content_type, body)
    no_attachments = replace(original, body=None)
    assert build_request(no_attachments)[0] == "text/xml"
    only_extension = replace(original, body=None, extension=b"ext")
    parsed = rebuilt(only_extension)
    assert (parsed.body, parsed.extension) == (None, b"ext")
    empty_body = rebuilt(replace(original, body=b""))
    assert empty_body.body == b""
