"""The envelope of a forwarded message parses back to the message's own properties, with the
time spent on this gateway taken off its lifetimes."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from qm.model import Acknowledgment, Delivery, JournalFlags, Message, MessageProperties
from soap.build import build_request
from soap.envelope import envelope_timers, message_properties
from soap.ids import MessageId
from soap.outbound import envelope_for, http_url
from soap.parse import parse_request
from soap.times import TimerMapping, TimerSettings

SENT = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
SOURCE = uuid.UUID("5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93")
TO = "http://gw02.example.net/msmq/private$/orders"


def stored(properties: MessageProperties, ttbr_s: int | None, ttrq_s: int | None) -> Message:
    return Message(
        lookup_id=1,
        queue_id=1,
        message_id=f"{{{SOURCE}}}\\4711",
        properties=properties,
        sent_time=SENT,
        arrived_time=SENT,
        source_machine=SOURCE,
        ttbr_deadline=None if ttbr_s is None else SENT + timedelta(seconds=ttbr_s),
        ttrq_deadline=None if ttrq_s is None else SENT + timedelta(seconds=ttrq_s),
        first_in_transaction=False,
        last_in_transaction=False,
        abort_count=0,
    )


@pytest.mark.parametrize("mapping", list(TimerMapping))
def test_forwarded_message_parses_back_to_its_properties(mapping: TimerMapping) -> None:
    properties = MessageProperties(
        body=b"\x00\x01 order 17",
        label="order 17",
        body_type=8,
        priority=5,
        correlation_id=bytes(range(20)),
        app_specific=99,
        extension=b"ext",
        response_queue="DIRECT=HTTP://gw01.example.net/msmq/private$/replies",
        admin_queue="DIRECT=HTTP://gw01.example.net/msmq/private$/admin",
        acknowledge=Acknowledgment.POS_ARRIVAL | Acknowledgment.NEG_RECEIVE,
        journal=JournalFlags.DEADLETTER | JournalFlags.JOURNAL,
        delivery=Delivery.RECOVERABLE,
        time_to_be_received=3600,
        time_to_reach_queue=600,
    )
    message = stored(properties, ttbr_s=3600, ttrq_s=600)
    now = SENT + timedelta(seconds=100)  # a hundred seconds on this gateway
    content_type, body = build_request(envelope_for(message, TO, now, mapping))
    envelope = parse_request(body, content_type)
    timers = envelope_timers(envelope, TimerSettings(mapping), now)
    parsed = message_properties(envelope, timers)
    assert envelope.path.to == TO
    assert parsed.time_to_be_received == 3500
    assert parsed.time_to_reach_queue == 500
    assert parsed.message_id == message.message_id
    assert parsed.source_machine == SOURCE
    unchanged = dataclasses.replace(
        parsed,
        time_to_be_received=3600,
        time_to_reach_queue=600,
        sent_time=None,
        source_machine=None,
        message_id=None,
    )
    assert unchanged == properties


def test_express_message_without_lifetimes_stays_express_and_infinite() -> None:
    message = stored(MessageProperties(body=b"x", delivery=Delivery.EXPRESS), None, None)
    content_type, body = build_request(envelope_for(message, TO, SENT, TimerMapping.SDK))
    envelope = parse_request(body, content_type)
    parsed = message_properties(envelope, envelope_timers(envelope, TimerSettings(), SENT))
    assert parsed.delivery == Delivery.EXPRESS
    assert parsed.time_to_be_received == parsed.time_to_reach_queue == MessageProperties().time_to_be_received


@pytest.mark.parametrize(
    ("format_name", "url"),
    [
        ("DIRECT=HTTP://gw/msmq/q", "HTTP://gw/msmq/q"),
        ("direct=https://gw/msmq/private$/q", "https://gw/msmq/private$/q"),
        ("DIRECT=OS:.\\private$\\q", None),
        ("private$\\q", None),
        (None, None),
    ],
)
def test_http_url_of_a_format_name(format_name: str | None, url: str | None) -> None:
    assert http_url(format_name) == url


@pytest.mark.parametrize(
    ("message_class", "delivery", "positive"),
    [(0x0002, True, None), (0x4000, False, True), (0xC002, False, False), (0x8000, False, None)],
)
def test_acknowledgments_travel_as_the_receipts_of_their_class(
    message_class: int, delivery: bool, positive: bool | None
) -> None:
    original = MessageId(SOURCE, 4711)
    ack = stored(
        MessageProperties(message_class=message_class, correlation_id=original.to_bytes()), None, None
    )
    content_type, body = build_request(envelope_for(ack, TO, SENT, TimerMapping.SDK))
    envelope = parse_request(body, content_type)
    assert (envelope.delivery_receipt is not None) is delivery
    if delivery:
        assert envelope.delivery_receipt is not None and envelope.delivery_receipt.id == original
    if positive is None:
        assert envelope.commitment_receipt is None
    else:
        assert envelope.commitment_receipt is not None
        assert (envelope.commitment_receipt.positive, envelope.commitment_receipt.id) == (positive, original)
