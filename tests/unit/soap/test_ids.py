"""Message IDs, stream IDs, GUIDs and correlation IDs (reference §5.8)."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qm.model import GUID_NULL
from qm.rules import message_id_for
from soap.errors import SrmpError
from soap.ids import (
    DEFAULT_MESSAGE_ID,
    MessageId,
    StreamId,
    format_correlation,
    parse_correlation,
    parse_decimal,
    parse_guid,
)

SENDER = uuid.UUID("5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93")


def test_the_worked_example_of_the_reference() -> None:
    message_id = MessageId.from_srmp("uuid:7001@5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93")
    assert message_id == MessageId(SENDER, 7001)
    assert message_id.to_bytes().hex() == "1a7e0c5b3d2f8e4c9a610d4f2b7c8e93591b0000"
    assert format_correlation(message_id.to_bytes()) == "Gn4MWz0vjkyaYQ1PK3yOk1kbAAA="
    assert message_id.dotnet_text == "5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93\\7001"
    assert message_id.text == "{5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93}\\7001"
    assert message_id.srmp == "uuid:7001@5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93"


def test_default_id_of_senders_without_msmq() -> None:
    assert DEFAULT_MESSAGE_ID.text == "{00000000-0000-0000-0000-000000000000}\\1"
    assert format_correlation(DEFAULT_MESSAGE_ID.to_bytes()) == "AAAAAAAAAAAAAAAAAAAAAAEAAAA="


def test_upper_case_guids_are_read() -> None:
    assert MessageId.from_srmp("uuid:1@5B0C7E1A-2F3D-4C8E-9A61-0D4F2B7C8E93").guid == SENDER
    assert parse_guid(" 5B0C7E1A-2F3D-4C8E-9A61-0D4F2B7C8E93 ") == SENDER


@pytest.mark.parametrize(
    "text",
    [
        "",
        "uuid:7001",
        "uuid:@5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93",
        "uuid:-1@5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93",
        "uuid:4294967296@5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93",
        "uuid:12345678901@5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93",
        "uuid:1@5b0c7e1a2f3d4c8e9a610d4f2b7c8e93",
        "uuid:1@{5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93}",
        "uid:1@5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93",
        "uuid:\uff11@5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93",
    ],
)
def test_malformed_srmp_ids_are_refused(text: str) -> None:
    with pytest.raises(SrmpError) as refused:
        MessageId.from_srmp(text)
    assert refused.value.status == 400


def test_sequences_above_two_to_the_31_print_negative_in_dotnet_form() -> None:
    message_id = MessageId(SENDER, 0xFFFFFFFF)
    assert message_id.dotnet_text.endswith("\\-1")
    assert message_id.text.endswith("\\4294967295")
    assert MessageId.from_text(message_id.dotnet_text) == message_id == MessageId.from_text(message_id.text)


def test_text_forms_are_checked() -> None:
    for text in ("", "5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93", "{5b0c7e1a}\\1", "x\\1"):
        with pytest.raises(ValueError, match="message ID"):
            MessageId.from_text(text)
    with pytest.raises(ValueError, match="32-bit"):
        MessageId.from_text("5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93\\9999999999")
    with pytest.raises(ValueError, match="32-bit"):
        MessageId(SENDER, -1)
    with pytest.raises(ValueError, match="20 bytes"):
        MessageId.from_bytes(bytes(16))


guids = st.uuids()
sequences = st.integers(min_value=0, max_value=0xFFFFFFFF)


@given(guids, sequences)
def test_every_form_round_trips(guid: uuid.UUID, sequence: int) -> None:
    message_id = MessageId(guid, sequence)
    assert MessageId.from_srmp(message_id.srmp) == message_id
    assert MessageId.from_bytes(message_id.to_bytes()) == message_id
    assert MessageId.from_text(message_id.text) == message_id
    assert MessageId.from_text(message_id.dotnet_text) == message_id
    assert message_id.text == message_id_for(guid, sequence)
    assert parse_correlation(format_correlation(message_id.to_bytes())) == message_id.to_bytes()


def test_stream_id_of_the_reference() -> None:
    stream_id = StreamId.parse("uid:5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93\\7345014887912833027")
    assert stream_id == StreamId(SENDER, 0x65EEBC20_00000003)
    assert (stream_id.timestamp, stream_id.ordinal) == (1710144544, 3)
    assert stream_id.text == "uid:5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93\\7345014887912833027"
    assert StreamId.parse(f"uid:{GUID_NULL}\\4839986701558349830").timestamp == 1126897219


def test_any_scheme_before_the_stream_guid_is_kept() -> None:
    stream_id = StreamId.parse("uri:5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93\\1")
    assert stream_id.scheme == "uri"
    assert stream_id.text.startswith("uri:")


@pytest.mark.parametrize(
    "text",
    [
        "",
        "5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93\\1",
        "uid:5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93/1",
        "uid:5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93\\",
        "uid:5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93\\18446744073709551616",
        "uid:not-a-guid\\1",
    ],
)
def test_malformed_stream_ids_are_refused(text: str) -> None:
    with pytest.raises(SrmpError):
        StreamId.parse(text)


@given(guids, st.integers(min_value=0, max_value=2**64 - 1))
def test_stream_ids_round_trip(guid: uuid.UUID, sequence: int) -> None:
    stream_id = StreamId(guid, sequence)
    assert StreamId.parse(stream_id.text) == stream_id
    assert (stream_id.timestamp << 32) | stream_id.ordinal == sequence


@pytest.mark.parametrize(
    "text",
    [
        "",
        "AAAA",
        "EREREREREREREREREREREQ==",
        "not base64!",
        "Gn4MWz0vjkyaYQ1PK3yOk1kbAAA",
        "Gn4MWz0vjkyaYQ1P\u00e9",
    ],
)
def test_correlation_must_be_base64_of_twenty_bytes(text: str) -> None:
    with pytest.raises(SrmpError) as refused:
        parse_correlation(text)
    assert refused.value.status == 400


def test_decimals_are_ascii_digits_within_range() -> None:
    assert parse_decimal(" 42 ", "x", 100) == 42
    for text in ("", "-1", "+1", "1e3", "0x10", "٣", "101", "1" * 25):
        with pytest.raises(SrmpError):
            parse_decimal(text, "x", 100)
    with pytest.raises(SrmpError):
        parse_decimal("0", "x", 10, minimum=1)
