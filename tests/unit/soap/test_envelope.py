"""From the typed envelope to MSMQ message properties (reference §1.5, §5)."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import UTC, datetime

from qm.model import (
    GUID_NULL,
    INFINITE,
    Acknowledgment,
    Delivery,
    JournalFlags,
    MessageClass,
    MessageProperties,
)
from qm.rules import validate_properties
from soap.envelope import (
    Msmq,
    Path,
    Properties,
    Services,
    SrmpEnvelope,
    envelope_timers,
    format_name_of,
    has_msmq_prefix,
    message_properties,
)
from soap.ids import DEFAULT_MESSAGE_ID, MessageId
from soap.times import SrmpTime, TimerSettings

SENDER = uuid.UUID("5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93")
ARRIVAL = datetime(2024, 3, 11, 9, 0, tzinfo=UTC)
TO = "http://gw01/msmq/private$/orders"
MSMQ = Msmq(
    message_class=0, priority=6, body_type=8, source_qm_guid=SENDER, ttrq=SrmpTime.parse("20240311T100000")
)


BASE = SrmpEnvelope(
    path=Path("MSMQ:hello", TO, MessageId(SENDER, 9)),
    properties=Properties(SrmpTime.parse("20240311T094000"), SrmpTime.parse("20240311T093000")),
    msmq=MSMQ,
    body=b"payload",
)


def properties_of(envelope: SrmpEnvelope) -> MessageProperties:
    return message_properties(envelope, envelope_timers(envelope, TimerSettings(), ARRIVAL))


def test_a_windows_message() -> None:
    props = properties_of(BASE)
    assert props.label == "hello"
    assert (props.priority, props.body_type, props.message_class) == (6, 8, MessageClass.NORMAL)
    assert props.message_id == f"{{{SENDER}}}\\9"
    assert props.source_machine == SENDER
    assert (props.time_to_be_received, props.time_to_reach_queue) == (1800, 600)
    assert props.sent_time == datetime(2024, 3, 11, 9, 30, tzinfo=UTC)
    assert (props.delivery, props.acknowledge, props.journal) == (Delivery.EXPRESS, 0, 0)
    assert (props.correlation_id, props.app_specific, props.extension) == (None, 0, b"")
    validate_properties(props, max_body_bytes=4 * 1024 * 1024)


def test_defaults_without_msmq() -> None:
    props = properties_of(replace(BASE, msmq=None, body=None))
    assert (props.priority, props.body_type, props.message_class, props.body) == (3, 0, 0, b"")
    assert props.message_id == DEFAULT_MESSAGE_ID.text
    assert props.source_machine == GUID_NULL
    assert props.time_to_be_received == props.time_to_reach_queue == 600


def test_arrival_stands_for_a_missing_sent_at() -> None:
    props = properties_of(replace(BASE, properties=Properties(SrmpTime.parse("20240311T094000"))))
    assert props.time_to_reach_queue == 2400
    assert props.sent_time is None


def test_acknowledgments_and_admin_queue() -> None:
    services = Services(
        durable=True,
        delivery_receipt_to="http://a/msmq/private$/acks",
        commitment_receipt_to="http://a/msmq/private$/acks",
        commitment_positive=True,
        commitment_negative=True,
    )
    props = properties_of(replace(BASE, services=services))
    assert (
        props.acknowledge
        == Acknowledgment.POS_ARRIVAL | Acknowledgment.POS_RECEIVE | Acknowledgment.NEG_RECEIVE
    )
    assert props.admin_queue == "DIRECT=http://a/msmq/private$/acks"
    assert props.delivery is Delivery.RECOVERABLE


def test_a_commitment_request_without_kinds_asks_for_nothing() -> None:
    props = properties_of(replace(BASE, services=Services(commitment_receipt_to="http://a/q")))
    assert props.acknowledge == Acknowledgment.NONE
    assert props.admin_queue == "DIRECT=http://a/q"


def test_format_names_from_msmq_lists_when_there_is_no_url() -> None:
    msmq = replace(MSMQ, admin_mqf=("DIRECT=OS:a\\q",), response_mqf=("PUBLIC=x", "PUBLIC=y"))
    props = properties_of(replace(BASE, msmq=msmq))
    assert (props.admin_queue, props.response_queue) == ("DIRECT=OS:a\\q", "PUBLIC=x,PUBLIC=y")
    via = replace(BASE, msmq=msmq, path=Path("MSMQ:x", TO, MessageId(SENDER, 1), "MSMQ:DIRECT=OS:w\\replies"))
    assert properties_of(via).response_queue == "DIRECT=OS:w\\replies"


def test_journal_flags_and_correlation() -> None:
    msmq = replace(MSMQ, journal=True, dead_letter=True, correlation=bytes(range(20)), app=7)
    props = properties_of(replace(BASE, msmq=msmq))
    assert props.journal == JournalFlags.JOURNAL | JournalFlags.DEADLETTER == 3
    assert (props.correlation_id, props.app_specific) == (bytes(range(20)), 7)


def test_infinite_timers() -> None:
    props = properties_of(replace(BASE, msmq=replace(MSMQ, ttrq=SrmpTime.parse("20380119T031407"))))
    assert (props.time_to_be_received, props.time_to_reach_queue) == (INFINITE, 600)


def test_prefixes() -> None:
    assert has_msmq_prefix("MSMQ:x") and has_msmq_prefix("msmq:") and not has_msmq_prefix("MSMQ")
    assert not has_msmq_prefix("M\u017fmq:x")
    assert format_name_of("MSMQ:PUBLIC=x") == "PUBLIC=x"
    assert format_name_of("https://a/q") == "DIRECT=https://a/q"
    assert BASE.destination_format_name == "DIRECT=" + TO
