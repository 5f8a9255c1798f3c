"""Content types and the length-driven multipart parser (reference §1.3, Appendix A)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from soap.errors import SrmpError
from soap.limits import Limits
from soap.mime import (
    MimePart,
    _any_parameters,
    _simple_parameters,
    boundary_of,
    parse_content_type,
    split_multipart,
    strip_angle_brackets,
)

WINDOWS = 'multipart/related; boundary="MSMQ - SOAP boundary, 17311"; type=text/xml'
B = b"MSMQ - SOAP boundary, 17311"


def windows_body(*payloads: bytes, content_id: bool = True) -> bytes:
    """Windows framing: no CRLF before a delimiter, every part with Content-Length."""
    body = b""
    for index, payload in enumerate(payloads):
        headers = f"Content-Type: application/octet-stream\r\nContent-Length: {len(payload)}\r\n"
        if content_id:
            headers += f"Content-Id: part{index}@x\r\n"
        body += b"--" + B + b"\r\n" + headers.encode() + b"\r\n" + payload
    return body + b"--" + B + b"--\r\n"


def refused(body: bytes, boundary: bytes = B, limits: Limits | None = None) -> str:
    with pytest.raises(SrmpError) as error:
        split_multipart(body, boundary, limits or Limits())
    assert error.value.status == 400
    return error.value.reason


def test_windows_content_type() -> None:
    content_type = parse_content_type(WINDOWS)
    assert content_type.media_type == "multipart/related"
    assert content_type.parameters == {"boundary": "MSMQ - SOAP boundary, 17311", "type": "text/xml"}
    assert boundary_of(content_type) == B


def test_rfc_style_content_type_with_unquoted_boundary() -> None:
    content_type = parse_content_type('Multipart/Related; type="text/xml"; boundary=----=_Part_0_918273')
    assert content_type.media_type == "multipart/related"
    assert content_type.parameters["boundary"] == "----=_Part_0_918273"


def test_quoted_strings_honour_escapes_and_separators() -> None:
    content_type = parse_content_type(r'text/xml ; charset = "utf-8" ; x="a;b\"c" ;')
    assert content_type.parameters == {"charset": "utf-8", "x": 'a;b"c'}
    assert content_type.charset == "utf-8"
    assert parse_content_type("TEXT/XML").media_type == "text/xml"


PARAMETER_PIECES = [";", " ", "\t", "\r\n", "=", '"', "\\", "x", "X", "boundary", "a b, c", "é", "-"]


@given(st.lists(st.sampled_from(PARAMETER_PIECES), max_size=16).map("".join))
def test_the_quick_parameter_reader_reads_like_the_full_one(text: str) -> None:
    """Whatever `_simple_parameters` reads, the full reader reads the same (the rest it leaves)."""
    simple = _simple_parameters(text)
    if simple is not None:
        assert _any_parameters(text, text) == simple


def test_the_quick_parameter_reader_takes_what_senders_write() -> None:
    assert _simple_parameters(WINDOWS.partition(";")[2]) == {
        "boundary": "MSMQ - SOAP boundary, 17311",
        "type": "text/xml",
    }
    assert _simple_parameters(" charset=UTF-8") == {"charset": "UTF-8"}
    assert _simple_parameters(r' x="a\"b"') is None
    assert _simple_parameters(" x=1; X=2") is None


@pytest.mark.parametrize(
    "value",
    [
        "",
        "text",
        "text/",
        "/xml",
        "text/xml; boundary",
        "text/xml; =x",
        "text/xml; boundary=",
        'multipart/related; boundary="never ends',
        'multipart/related; boundary="a" junk',
        "multipart/related; boundary=a; boundary=b",
        "text xml/x",
        "text/xml; " + "x" * 2000,
    ],
)
def test_malformed_content_types_are_refused(value: str) -> None:
    with pytest.raises(SrmpError):
        parse_content_type(value)


@pytest.mark.parametrize("boundary", ["", "x" * 71, "a\r\nb", "é"])
def test_boundaries_are_bounded(boundary: str) -> None:
    content_type = parse_content_type(f'multipart/related; boundary="{boundary}"')
    with pytest.raises(SrmpError):
        boundary_of(content_type)
    with pytest.raises(SrmpError):
        boundary_of(parse_content_type("multipart/related"))


def test_windows_framing_is_split_by_length() -> None:
    payload = b"binary\r\n--" + B + b"--\r\n and a fake delimiter"
    parts = split_multipart(windows_body(b"<x/>", payload), B)
    assert [part.payload for part in parts] == [b"<x/>", payload]
    assert parts[1].content_id == "part1@x"
    assert parts[1].content_type is not None
    assert parts[1].content_type.media_type == "application/octet-stream"


def test_empty_and_zero_parts() -> None:
    assert split_multipart(b"--" + B + b"--\r\n", B) == []
    assert [part.payload for part in split_multipart(windows_body(b""), B)] == [b""]


def test_rfc_2046_tolerance() -> None:
    """Preamble, CRLF before delimiters, lower-case headers, padding after a delimiter."""
    body = (
        b"preamble --" + B + b" is not a delimiter here\r\n"
        b"--" + B + b"  \r\ncontent-length: 3\r\n\r\nabc\r\n"
        b"--" + B + b"\r\ncontent-id: <body@x>\r\n\r\nno length\r\n--" + B + b"--\r\nepilogue"
    )
    parts = split_multipart(body, B)
    assert [part.payload for part in parts] == [b"abc", b"no length"]
    assert parts[1].content_id == "body@x"


def test_part_without_headers() -> None:
    parts = split_multipart(b"--" + B + b"\r\n\r\npayload--" + B + b"--", B)
    assert parts == [MimePart({}, b"payload")]


def test_content_id_brackets() -> None:
    assert strip_angle_brackets(" <body@x> ") == "body@x"
    assert strip_angle_brackets("body@x") == "body@x"
    assert strip_angle_brackets("<") == "<"


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"", "opening"),
        (b"no delimiter at all", "opening"),
        (b"--" + B, "garbage"),
        (b"--" + B + b"X\r\n", "garbage"),
        (b"--" + B + b"\r\nContent-Length: 3\r\n\r\nab", "within the request"),
        (b"--" + B + b"\r\nContent-Length: 3\r\n\r\nabc", "not followed"),
        (b"--" + B + b"\r\nContent-Length: 2\r\n\r\nabc--" + B + b"--", "not followed"),
        (b"--" + B + b"\r\nContent-Length: -5\r\n\r\nabc--" + B + b"--", "within the request"),
        (b"--" + B + b"\r\nContent-Length: +3\r\n\r\nabc--" + B + b"--", "within the request"),
        (b"--" + B + b"\r\nContent-Length: 3 3\r\n\r\nabc--" + B + b"--", "within the request"),
        (b"--" + B + b"\r\nContent-Length: 4294967296\r\n\r\nabc--" + B + b"--", "within the request"),
        (
            b"--" + B + b"\r\nContent-Length: " + b"9" * 40 + b"\r\n\r\nabc--" + B + b"--",
            "within the request",
        ),
        (b"--" + B + b"\r\nContent-Length: \xd9\xa3\r\n\r\nabc--" + B + b"--", "within the request"),
        (b"--" + B + b"\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc--" + B + b"--", "twice"),
        (b"--" + B + b"\r\nno colon\r\n\r\nabc--" + B + b"--", "name: value"),
        (b"--" + B + b"\r\nBad Name: x\r\n\r\nabc--" + B + b"--", "name: value"),
        (b"--" + B + b"\r\nContent-Length: 3\r\n", "truncated"),
        (b"--" + B + b"\r\n\r\nabc with a delimiter that never comes", "never reaches"),
        (b"--" + B + b"\r\nContent-Length: 3\r\n\r\nabc--" + B + b"\r\n", "truncated"),
        (b"--" + B + b"\r\nContent-Length: 3\r\n\r\nabc--" + B + b"garbage", "garbage"),
    ],
)
def test_truncation_lies_and_garbage_are_refused(body: bytes, reason: str) -> None:
    assert reason in refused(body)


def test_part_count_and_header_size_are_bounded() -> None:
    limits = Limits(max_parts=3, max_part_header_bytes=100, max_part_headers=4)
    assert "more than 3" in refused(windows_body(b"a", b"b", b"c", b"d"), limits=limits)
    assert len(split_multipart(windows_body(b"a", b"b", b"c"), B, limits)) == 3
    long_header = b"--" + B + b"\r\nX-Long: " + b"y" * 200 + b"\r\n\r\n--" + B + b"--"
    assert "too long" in refused(long_header, limits=limits)
    many = b"--" + B + b"\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(5)) + b"\r\n--" + B + b"--"
    assert "more than 4 headers" in refused(many, limits=limits)


@given(st.lists(st.binary(max_size=300), max_size=6))
def test_windows_framing_round_trips_any_payloads(payloads: list[bytes]) -> None:
    assert [part.payload for part in split_multipart(windows_body(*payloads), B)] == payloads


@given(st.binary(max_size=400))
def test_arbitrary_bodies_split_or_are_refused(body: bytes) -> None:
    try:
        split_multipart(body, b"b")
    except SrmpError as error:
        assert error.status == 400
