"""Every malformed vector refused with the status its JSON expects, and nothing else raised."""

from __future__ import annotations

import pytest

from soap.errors import SrmpError
from soap.parse import check_request_head, parse_request
from tests.compat.vectors import load, malformed_names

REFUSED_FROM_THE_HEAD = {"m07-absurd-http-length", "m15-wrong-method"}


def acceptable(spec: dict[str, object]) -> set[object]:
    rejection = spec["expected_rejection"]
    assert isinstance(rejection, dict)
    assert rejection["message_must_not_be_enqueued"] is True
    return {rejection["http_status"], *rejection.get("alternative_acceptable", [])}


@pytest.mark.parametrize("name", malformed_names())
def test_malformed_vector_is_refused(name: str) -> None:
    vector = load(name)
    request = vector.request
    preferred = vector.spec["expected_rejection"]["http_status"]
    if name in REFUSED_FROM_THE_HEAD:
        with pytest.raises(SrmpError) as refused:
            check_request_head(request.method, request.headers.get("content-length"))
    else:
        check_request_head(request.method, request.headers.get("content-length"))
        assert len(request.body) == int(request.headers["content-length"])
        with pytest.raises(SrmpError) as refused:
            parse_request(request.body, vector.content_type)
    assert refused.value.status in acceptable(vector.spec)
    assert refused.value.status == preferred
    assert refused.value.reason


def test_absurd_length_is_refused_from_the_declared_length_alone() -> None:
    """m07: 9,999,999,999 declared; no body is read, so nothing is buffered or awaited."""
    request = load("m07-absurd-http-length").request
    with pytest.raises(SrmpError) as refused:
        check_request_head("POST", request.headers["content-length"])
    assert refused.value.status == 413


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("m01-bad-xml", "well-formed"),
        ("m02-missing-path", "<path>"),
        ("m03-missing-properties", "<properties>"),
        ("m04-unknown-mustunderstand", "mustUnderstand"),
        ("m05-wrong-content-type", "application/json"),
        ("m06-truncated-mime", "Content-Length"),
        ("m08-absurd-part-length", "Content-Length"),
        ("m09-entity-expansion-bomb", "DOCTYPE"),
        ("m10-external-entity", "DOCTYPE"),
        ("m11-missing-expiresat", "expiresAt"),
        ("m12-priority-out-of-range", "Priority"),
        ("m13-correlation-wrong-length", "Correlation"),
    ],
)
def test_malformed_vector_is_refused_for_its_own_reason(name: str, fragment: str) -> None:
    vector = load(name)
    with pytest.raises(SrmpError) as refused:
        parse_request(vector.request.body, vector.content_type)
    assert fragment in refused.value.reason


def test_m04_without_must_understand_is_accepted() -> None:
    """The vector's note: the same entry with mustUnderstand="0", or without it, is ignored."""
    vector = load("m04-unknown-mustunderstand")
    for replacement in (b' se:mustUnderstand="0"', b""):
        body = vector.request.body.replace(
            b'urn:example:billing" se:mustUnderstand="1"', b'urn:example:billing"' + replacement
        )
        body = fix_envelope_length(body, len(vector.request.body) - len(body))
        envelope = parse_request(body, vector.content_type)
        assert envelope.ignored_headers == ("{urn:example:billing}Billing",)


def fix_envelope_length(body: bytes, shrunk_by: int) -> bytes:
    marker = b"Content-Length: 873\r\n"
    assert marker in body
    return body.replace(marker, f"Content-Length: {873 - shrunk_by}\r\n".encode(), 1)
