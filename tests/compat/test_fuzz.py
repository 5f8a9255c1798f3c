"""Damaged vectors: the codec parses them or refuses them with SrmpError, never anything else."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from soap.envelope import SrmpEnvelope
from soap.errors import SrmpError
from soap.mime import parse_content_type
from soap.parse import parse_request
from tests.compat.vectors import Vector, load, valid_names

VECTORS = {name: load(name) for name in valid_names()}
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def outcome(body: bytes, content_type: str | None) -> SrmpEnvelope | SrmpError:
    try:
        return parse_request(body, content_type)
    except SrmpError as error:
        assert error.status in (400, 413)
        assert error.reason
        return error


def last_byte_that_matters(vector: Vector) -> int:
    """A multipart body may lose its final CRLF (the epilogue); an envelope loses nothing."""
    body = vector.request.body
    return len(body) - 2 if body.endswith(b"--\r\n") else len(body)


@pytest.mark.parametrize("name", valid_names())
def test_every_truncation_is_refused(name: str) -> None:
    """Cut anywhere before its end, no vector parses: lengths, delimiters and XML all notice."""
    vector = VECTORS[name]
    body, content_type = vector.request.body, vector.content_type
    for cut in range(last_byte_that_matters(vector)):
        result = outcome(body[:cut], content_type)
        assert isinstance(result, SrmpError), f"{name} cut at {cut} parsed"
    assert isinstance(outcome(body, content_type), SrmpEnvelope)


@pytest.mark.parametrize("name", valid_names())
@FUZZ
@given(data=st.data())
def test_byte_flips_parse_or_are_refused(name: str, data: st.DataObject) -> None:
    body = bytearray(VECTORS[name].request.body)
    positions = st.integers(min_value=0, max_value=len(body) - 1)
    for _ in range(data.draw(st.integers(min_value=1, max_value=4), label="flips")):
        body[data.draw(positions, label="position")] ^= data.draw(st.integers(1, 255), label="xor")
    outcome(bytes(body), VECTORS[name].content_type)


@pytest.mark.parametrize("name", valid_names())
@FUZZ
@given(data=st.data())
def test_inserted_and_deleted_bytes_parse_or_are_refused(name: str, data: st.DataObject) -> None:
    body = VECTORS[name].request.body
    start = data.draw(st.integers(min_value=0, max_value=len(body)), label="start")
    deleted = data.draw(st.integers(min_value=0, max_value=16), label="deleted")
    inserted = data.draw(
        st.sampled_from([b"", b"\r\n", b"--", b"<", b"&", b"\x00", b"\xff", b"<a>"]), label="inserted"
    )
    outcome(body[:start] + inserted + body[start + deleted :], VECTORS[name].content_type)


@FUZZ
@given(header=st.text(max_size=200))
def test_any_content_type_header_parses_or_is_refused(header: str) -> None:
    try:
        parse_content_type(header)
    except SrmpError as error:
        assert error.status == 400
    outcome(VECTORS["01-express-basic"].request.body, header)


@FUZZ
@given(mutation=st.sampled_from(["boundary", "charset", "type"]), value=st.text(max_size=80))
def test_mutated_content_type_parameters_parse_or_are_refused(mutation: str, value: str) -> None:
    vector = VECTORS["12-tolerance-rfc2046-mime"]
    quoted = '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    outcome(vector.request.body, f"multipart/related; type=text/xml; {mutation}={quoted}")
