"""Hostile requests are refused early, with memory bounded by the request (reference §10).

Memory is checked with tracemalloc (Python allocations only); no test measures time.
"""

from __future__ import annotations

import tracemalloc

import pytest

from soap.errors import SrmpError
from soap.limits import Limits
from soap.parse import parse_request
from tests.unit.soap.srmp_samples import envelope, multipart

MIB = 1024 * 1024


def refuse(body: bytes, content_type: str, status: int = 400) -> str:
    with pytest.raises(SrmpError) as refused:
        parse_request(body, content_type)
    assert refused.value.status == status
    return refused.value.reason


def refuse_measured(body: bytes, content_type: str) -> tuple[str, int]:
    """The reason of the refusal and the peak of Python allocations while refusing."""
    tracemalloc.start()
    try:
        reason = refuse(body, content_type)
        return reason, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_deep_nesting_is_refused_at_the_depth_limit() -> None:
    xml = envelope().replace(
        "<se:Body></se:Body>", "<se:Body>" + "<a>" * 100_000 + "</a>" * 100_000 + "</se:Body>"
    )
    content_type, body = multipart(xml.encode())
    reason, peak = refuse_measured(body, content_type)
    assert "deeper than 32" in reason or "Excessive depth" in reason  # libxml2 may stop first, at 256
    assert peak < 4 * len(xml)
    shallow = envelope().replace("<se:Body></se:Body>", "<se:Body>" + "<a>" * 40 + "</a>" * 40 + "</se:Body>")
    assert "deeper than 32" in refuse(shallow.encode(), "text/xml")


def test_ten_thousand_attributes_are_refused() -> None:
    attributes = " ".join(f'a{index}="v"' for index in range(10_000))
    xml = envelope(f"<Noise xmlns='urn:x' {attributes}/>")
    assert "attributes" in refuse(xml.encode(), "text/xml")


def test_ten_thousand_namespace_declarations_are_refused() -> None:
    declarations = " ".join(f'xmlns:p{index}="urn:{index}"' for index in range(10_000))
    xml = envelope(f"<Noise xmlns='urn:x' {declarations}/>")
    assert "namespaces" in refuse(xml.encode(), "text/xml")


def test_a_flood_of_elements_is_refused() -> None:
    xml = envelope("<Noise xmlns='urn:x'>" + "<i/>" * 20_000 + "</Noise>")
    assert "elements" in refuse(xml.encode(), "text/xml")


def test_a_huge_part_header_is_refused() -> None:
    body = b"--B\r\nContent-Type: text/xml\r\nX-Junk: " + b"j" * (4 * MIB) + b"\r\n\r\n<e/>--B--\r\n"
    reason, peak = refuse_measured(body, 'multipart/related; boundary="B"')
    assert "headers are truncated or too long" in reason
    assert peak < MIB


def test_a_huge_content_type_header_is_refused() -> None:
    assert "too long" in refuse(b"", "multipart/related; boundary=B; x=" + "y" * MIB)


def test_a_huge_soap_header_is_refused() -> None:
    xml = envelope("<Noise xmlns='urn:x'>" + "n" * (2 * MIB) + "</Noise>")
    content_type, body = multipart(xml.encode())
    assert "larger than" in refuse(body, content_type)


def test_a_huge_request_is_refused_with_413() -> None:
    content_type, body = multipart(envelope().encode(), ("body@x", bytes(Limits().max_request_bytes)))
    refuse(body, content_type, status=413)


def test_an_envelope_referencing_a_missing_part_is_refused() -> None:
    signature = (
        '<Signature xmlns="http://www.w3.org/2000/02/xmldsig#"><SignedInfo>'
        '<Reference URI="cid:body@5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93"/></SignedInfo></Signature>'
    )
    content_type, body = multipart(envelope(signature).encode(), ("extension@x", b"e"))
    assert "not among the parts" in refuse(body, content_type)
    assert "not among the parts" in refuse(body, content_type + '; start="<envelope@nowhere>"')


def test_a_boundary_that_never_ends_is_refused() -> None:
    endless = b"--B\r\nContent-Type: text/xml\r\n\r\n" + b"<e>" + b"x" * (4 * MIB) + b"--C--"
    reason, peak = refuse_measured(endless, 'multipart/related; boundary="B"')
    assert "never reaches a delimiter" in reason
    assert peak < MIB
    unterminated = b"--B\r\nContent-Type: text/xml\r\nContent-Length: 4\r\n\r\n<e/>"
    assert "not followed" in refuse(unterminated, 'multipart/related; boundary="B"')
    assert "unterminated" in refuse(b"--B", 'multipart/related; boundary="B')


def test_an_entity_bomb_is_refused_before_any_expansion() -> None:
    entities = "".join(f'<!ENTITY e{i} "{f"&e{i - 1};" * 10}">' for i in range(1, 10))
    xml = f'<!DOCTYPE se:Envelope [<!ENTITY e0 "aaaaaaaaaa">{entities}]>' + envelope().replace(
        "label", "&e9;"
    )
    reason, peak = refuse_measured(xml.encode(), "text/xml")
    assert "DOCTYPE" in reason
    assert peak < 64 * 1024


@pytest.mark.parametrize("size", [MIB, 4 * MIB])
def test_lying_and_endless_parts_cost_no_copy_of_the_request(size: int) -> None:
    """Refusing allocates next to nothing, never the declared lengths nor a copy of the body."""
    lying = b"--B\r\nContent-Length: 99999999999\r\n\r\n" + b"x" * size
    assert refuse_measured(lying, 'multipart/related; boundary="B"')[1] < MIB
    short = b"--B\r\nContent-Length: 5\r\n\r\nab" + b"c" * size
    assert refuse_measured(short, 'multipart/related; boundary="B"')[1] < MIB
    endless = b"--B\r\n\r\n" + b"x" * size
    assert refuse_measured(endless, 'multipart/related; boundary="B"')[1] < MIB
