"""Every valid vector parsed from its `.http` bytes, against the values its JSON expects.

The HTTP head is split off by hand here; replaying the files over a socket is the route's test.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from qm.model import (
    GUID_NULL,
    INFINITE,
    Acknowledgment,
    Delivery,
    JournalFlags,
    MessageClass,
    MessageProperties,
)
from qm.paths import parse_queue_path
from qm.rules import message_id_for
from soap.envelope import SrmpEnvelope, envelope_timers, message_properties
from soap.ids import MessageId
from soap.parse import check_request_head, parse_request
from soap.times import LayoutMismatch, TimerMapping, Timers, TimerSettings
from soap.urls import parse_http_url, queue_path_of
from tests.compat.vectors import Vector, load, sha256, valid_names, vector_names

ARRIVAL = datetime(2024, 3, 11, 23, 59, 59, tzinfo=UTC)
"""Only used where a vector has no sentAt (none has); far from every vector's sentAt."""
TIMER_KEYS = (
    "timer_mapping",
    "timer_layout_mismatch_handling",
    "ttbr_source",
    "ttrq_source",
    "ttbr_deadline_utc",
    "ttrq_deadline_utc",
    "time_to_be_received_s",
    "time_to_reach_queue_s",
    "timer_layout_mismatch",
    "timer_fields_swapped",
    "ttrq_clamped_to_ttbr",
)
ACK_NAMES = {
    Acknowledgment.POS_ARRIVAL: "AckPosArrival",
    Acknowledgment.POS_RECEIVE: "AckPosReceive",
    Acknowledgment.NEG_RECEIVE: "AckNegReceive",
}
NOT_THE_CODECS = {
    "receiver_state_after",
    "receipts_the_receiver_must_later_send",
    "effect_on_sender",
    "gateway_action",
    "wire_example_mapping",
    "layout_mismatch_clamp",
}
"""Side effects of the receiver (route, queue manager), and the timer overlays (own test)."""
COMBINATIONS = [
    (TimerMapping.SDK, LayoutMismatch.SWAP),
    (TimerMapping.WIRE_EXAMPLE, LayoutMismatch.SWAP),
    (TimerMapping.SDK, LayoutMismatch.CLAMP),
    (TimerMapping.WIRE_EXAMPLE, LayoutMismatch.CLAMP),
]


class Expected:
    """The `expected` block of a vector; records which keys a test compared."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.values = values
        self.seen: set[str] = set()

    def __contains__(self, key: str) -> bool:
        return key in self.values

    def __getitem__(self, key: str) -> Any:
        self.seen.add(key)
        return self.values[key]

    def check(self, key: str, actual: object) -> None:
        if key in self.values:
            assert actual == self[key], key

    def unchecked(self) -> set[str]:
        explained = {key for key in self.values if key.endswith("_note")} | {"body_type_name"}
        return set(self.values) - self.seen - explained - NOT_THE_CODECS - set(TIMER_KEYS)


def parsed(vector: Vector) -> SrmpEnvelope:
    request = vector.request
    check_request_head(request.method, request.headers.get("content-length"))
    assert len(request.body) == int(request.headers["content-length"])
    return parse_request(request.body, vector.content_type)


def iso(moment: datetime | None) -> str:
    return "INFINITE" if moment is None else moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_all_vectors_are_present() -> None:
    assert len(valid_names()) == 13
    assert len(vector_names("m")) == 14


@pytest.mark.parametrize("name", vector_names())
def test_vector_file_is_intact(name: str) -> None:
    vector = load(name)
    assert len(vector.raw) == vector.spec["file_size_bytes"]
    assert sha256(vector.raw) == vector.spec["file_sha256"]
    assert vector.spec["file"] == f"{name}.http"


@pytest.mark.parametrize("name", valid_names())
def test_valid_vector(name: str) -> None:
    vector = load(name)
    assert vector.spec["expected_http_response"]["status"] == 200
    envelope = parsed(vector)
    expected = Expected(vector.spec["expected"])
    props = message_properties(envelope, envelope_timers(envelope, TimerSettings(), ARRIVAL))
    check_destination(vector, envelope, expected)
    check_message_id(envelope, props.message_id, expected)
    check_properties(envelope, props, expected)
    check_acknowledgments(envelope, props, expected)
    check_times(envelope, props, expected)
    check_attachments(envelope, expected)
    check_stream(envelope, expected)
    check_receipts(envelope, expected)
    assert expected.unchecked() == set()


def check_destination(vector: Vector, envelope: SrmpEnvelope, expected: Expected) -> None:
    request = vector.request
    expected.check("url_path", request.target)
    expected.check("destination_format_name", envelope.destination_format_name)
    to = parse_http_url(envelope.path.to, "<to>")
    assert to.host == request.headers["host"].lower()
    _, by_to = queue_path_of(to)
    _, by_request_line = queue_path_of(
        parse_http_url("http://" + request.headers["host"] + request.target, "URL")
    )
    assert by_to.key == by_request_line.key
    if "queue" in expected:
        queue = expected["queue"]
        assert by_to.key == parse_queue_path(f"{queue['type']}$/{queue['name']}".replace("public$/", "")).key
        assert by_to.kind.value == queue["type"]
        assert queue.get("must_be_transactional", False) == (envelope.stream is not None)


def check_message_id(envelope: SrmpEnvelope, stored_id: str | None, expected: Expected) -> None:
    forms = expected["message_id"]
    check_id_forms(envelope.message_id, forms)
    guid = uuid.UUID(forms["lineage_guid"])
    assert stored_id == envelope.message_id.text == message_id_for(guid, forms["uniquifier"])
    assert MessageId.from_text(stored_id) == MessageId.from_text(forms["dotnet_text"]) == envelope.message_id


def check_id_forms(message_id: MessageId, forms: dict[str, Any]) -> None:
    assert message_id.srmp == forms["srmp_text"]
    assert str(message_id.guid) == forms["lineage_guid"]
    assert message_id.sequence == forms["uniquifier"]
    assert message_id.to_bytes().hex() == forms["bytes_hex"]
    assert message_id.dotnet_text == forms["dotnet_text"]
    assert MessageId.from_bytes(bytes.fromhex(forms["bytes_hex"])) == message_id


def check_properties(envelope: SrmpEnvelope, props: MessageProperties, expected: Expected) -> None:
    msmq = envelope.msmq
    expected.check("label", props.label)
    if "label_wire_form" in expected:
        assert f"<action>MSMQ:{expected['label_wire_form']}</action>".encode() in envelope.envelope_xml
    expected.check("class", props.message_class)
    expected.check("class_hex", f"0x{props.message_class:04X}")
    if "class_name" in expected:
        assert "MQMSG_CLASS_" + MessageClass(props.message_class).name == expected["class_name"]
    expected.check("priority", props.priority)
    if "delivery" in expected:
        assert expected["delivery"].split()[0] == props.delivery.name.lower()
    expected.check("positive_journaling", bool(props.journal & JournalFlags.JOURNAL))
    expected.check("negative_journaling", bool(props.journal & JournalFlags.DEADLETTER))
    expected.check("journal_property", props.journal)
    expected.check("correlation_id_hex", None if props.correlation_id is None else props.correlation_id.hex())
    if "correlation_id_as_message_id" in expected:
        assert props.correlation_id is not None
        check_id_forms(MessageId.from_bytes(props.correlation_id), expected["correlation_id_as_message_id"])
    expected.check("app_specific", props.app_specific)
    expected.check("body_type", props.body_type)
    expected.check("hash_algorithm", msmq.hash_algorithm if msmq else None)
    expected.check("source_qm_guid", str(msmq.source_qm_guid) if msmq else None)
    assert props.source_machine == (msmq.source_qm_guid if msmq else GUID_NULL)
    assert props.priority == (msmq.priority if msmq else 3)


def check_acknowledgments(envelope: SrmpEnvelope, props: MessageProperties, expected: Expected) -> None:
    names = [name for flag, name in ACK_NAMES.items() if props.acknowledge & flag]
    expected.check("acknowledgements_requested", names)
    expected.check("ack_property_value", props.acknowledge)
    if "final_ack_required" in expected:
        final = Acknowledgment.POS_RECEIVE | Acknowledgment.NEG_RECEIVE
        assert expected["final_ack_required"] == bool(props.acknowledge & final)
    if "admin_queue" in expected:
        admin = expected["admin_queue"]
        assert props.admin_queue == (None if admin is None else "DIRECT=" + admin)
    if "response_queue" in expected:
        response = expected["response_queue"]
        assert envelope.path.rev_via == response
        assert props.response_queue == (None if response is None else "DIRECT=" + response)


def check_times(envelope: SrmpEnvelope, props: MessageProperties, expected: Expected) -> None:
    properties, msmq = envelope.properties, envelope.msmq
    assert properties.sent_at is not None
    expected.check("sent_at", properties.sent_at.text)
    expected.check("sent_at_utc", iso(properties.sent_at.utc))
    expected.check("expires_at", properties.expires_at.text)
    expected.check("expires_at_utc", iso(properties.expires_at.utc))
    expected.check("expires_at_is_infinite_sentinel", properties.expires_at.infinite)
    expected.check("ttrq", msmq.ttrq.text if msmq else None)
    expected.check("ttrq_utc", iso(msmq.ttrq.utc) if msmq else None)
    expected.check("ttrq_is_infinite_sentinel", msmq.ttrq.infinite if msmq else None)
    assert props.sent_time == properties.sent_at.utc


def check_attachments(envelope: SrmpEnvelope, expected: Expected) -> None:
    body = expected["body"]
    if body is None:
        assert envelope.body is None
    else:
        assert envelope.body is not None
        assert (len(envelope.body), sha256(envelope.body)) == (body["length"], body["sha256"])
    if "body_text" in expected:
        assert envelope.body is not None
        assert envelope.body.decode("utf-16-le") == expected["body_text"]
    if "extension" in expected:
        assert envelope.extension is not None
        extension = expected["extension"]
        assert (len(envelope.extension), sha256(envelope.extension)) == (
            extension["length"],
            extension["sha256"],
        )
    if "attachments_by_content_id_prefix" in expected:
        sizes = {"body@": len(envelope.body or b""), "extension@": len(envelope.extension or b"")}
        assert sizes == expected["attachments_by_content_id_prefix"]
    expected.check("envelope_length", len(envelope.envelope_xml))


def check_stream(envelope: SrmpEnvelope, expected: Expected) -> None:
    eod = envelope.msmq.eod if envelope.msmq else None
    expected.check("first_in_transaction", eod is not None and eod.first)
    expected.check("last_in_transaction", eod is not None and eod.last)
    if "stream" not in expected:
        assert envelope.stream is None
        return
    stream, wanted = envelope.stream, expected["stream"]
    assert stream is not None
    assert stream.stream_id.text == wanted["stream_id_text"]
    assert str(stream.stream_id.sender_qm) == wanted["sender_qm_guid"]
    assert stream.stream_id.sequence == wanted["sequence_id_u64"]
    assert f"0x{stream.stream_id.sequence:016X}" == wanted["sequence_id_hex"]
    assert stream.stream_id.timestamp == wanted["timestamp_high32"]
    assert iso(datetime.fromtimestamp(stream.stream_id.timestamp, UTC)) == wanted["timestamp_utc"]
    assert stream.stream_id.ordinal == wanted["ordinal_low32"]
    assert (stream.current, stream.previous) == (wanted["current"], wanted["previous"])
    assert stream.send_receipts_to == wanted["start_send_receipts_to"]
    assert stream.end == wanted["end_marker_present"]


def check_receipts(envelope: SrmpEnvelope, expected: Expected) -> None:
    kinds = {"stream receipt": envelope.stream_receipt, "delivery receipt": envelope.delivery_receipt}
    if "message_type" in expected:
        assert kinds[expected["message_type"]] is not None
    if "stream_receipt" in expected:
        receipt, wanted = envelope.stream_receipt, expected["stream_receipt"]
        assert receipt is not None
        assert receipt.stream_id.text == wanted["stream_id_text"]
        assert receipt.stream_id.sequence == wanted["sequence_id_u64"]
        assert receipt.last_ordinal == wanted["last_ordinal"]
    if "acknowledged_message_id" in expected:
        delivery = envelope.delivery_receipt
        assert delivery is not None
        assert delivery.id.srmp == expected["acknowledged_message_id"]
        assert iso(delivery.received_at.utc) == expected["received_at_utc"]


@pytest.mark.parametrize(("mapping", "on_mismatch"), COMBINATIONS, ids=lambda value: str(value))
@pytest.mark.parametrize("name", valid_names())
def test_timers_under_each_setting(name: str, mapping: TimerMapping, on_mismatch: LayoutMismatch) -> None:
    vector = load(name)
    expected = vector.spec["expected"]
    wanted = {key: expected[key] for key in TIMER_KEYS} | overlay(expected, mapping, on_mismatch)
    envelope = parsed(vector)
    timers = envelope_timers(envelope, TimerSettings(mapping, on_mismatch), ARRIVAL)
    assert timer_keys(timers) == wanted
    props = message_properties(envelope, timers)
    assert (props.time_to_be_received, props.time_to_reach_queue) == (
        timers.time_to_be_received,
        timers.time_to_reach_queue,
    )


def overlay(expected: dict[str, Any], mapping: TimerMapping, on_mismatch: LayoutMismatch) -> dict[str, Any]:
    """The vectors README's table: which block holds the timer keys of a combination."""
    if on_mismatch is LayoutMismatch.SWAP:
        block = {} if mapping is TimerMapping.SDK else expected["wire_example_mapping"]
    else:
        block = expected["layout_mismatch_clamp"][mapping.value]
    assert not block or set(block) == set(TIMER_KEYS)
    return dict(block)


def timer_keys(timers: Timers) -> dict[str, Any]:
    def seconds(value: int) -> int | str:
        return "INFINITE (0xFFFFFFFF)" if value == INFINITE else value

    return {
        "timer_mapping": timers.settings.mapping.value,
        "timer_layout_mismatch_handling": timers.settings.on_mismatch.value,
        "ttbr_source": timers.ttbr_source.value,
        "ttrq_source": timers.ttrq_source.value,
        "ttbr_deadline_utc": iso(timers.ttbr_deadline),
        "ttrq_deadline_utc": iso(timers.ttrq_deadline),
        "time_to_be_received_s": seconds(timers.time_to_be_received),
        "time_to_reach_queue_s": seconds(timers.time_to_reach_queue),
        "timer_layout_mismatch": timers.layout_mismatch,
        "timer_fields_swapped": timers.fields_swapped,
        "ttrq_clamped_to_ttbr": timers.ttrq_clamped_to_ttbr,
    }


def test_stream_messages_are_recoverable_even_without_durable() -> None:
    envelope = parsed(load("07-stream-first"))
    assert envelope.services is not None
    without_durable = SrmpEnvelope(
        envelope.path, envelope.properties, stream=envelope.stream, msmq=envelope.msmq
    )
    props = message_properties(without_durable, envelope_timers(without_durable, TimerSettings(), ARRIVAL))
    assert props.delivery is Delivery.RECOVERABLE
