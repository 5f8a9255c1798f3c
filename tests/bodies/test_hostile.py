"""Bodies built to cost memory, time or stack: each is refused with a reason, cheaply."""

from __future__ import annotations

import json

from bodies import BodyLimits, decode_body
from tests.bodies import nrbf_builder as nb


def decoded_reason(body: bytes, body_type: int = 768, limits: BodyLimits | None = None) -> str:
    decoded = decode_body(body_type, body, limits=limits or BodyLimits())
    assert decoded.format == "binary", decoded.as_json()
    assert decoded.value is None
    return decoded.reason or ""


def test_a_null_run_cannot_make_two_billion_items() -> None:
    body = nb.header() + nb.array_single_object(1, 0x7FFFFFFF) + nb.nulls(0x7FFFFFFF) + nb.END
    assert "items" in decoded_reason(body)


def test_a_primitive_array_longer_than_the_body_is_refused_before_reading() -> None:
    body = nb.header() + nb.array_single_primitive(1, nb.INT32, b"", 0x7FFFFFFF) + nb.END
    assert "items" in decoded_reason(body)
    body = nb.header() + nb.array_single_primitive(1, nb.INT32, b"\x00" * 8, 1000) + nb.END
    assert "truncated" in decoded_reason(body) or "fit" in decoded_reason(body)


def test_a_rectangular_array_whose_lengths_multiply_past_the_limit() -> None:
    body = nb.header() + nb.binary_array(1, 2, [65536, 65536], nb.OBJECT) + nb.END
    assert "items" in decoded_reason(body)


def test_records_nested_without_end_cost_no_python_recursion() -> None:
    nested = b"".join(nb.array_single_object(index, 1) for index in range(1, 20_000))
    assert "nested deeper" in decoded_reason(nb.header() + nested + nb.NULL + nb.END)


def test_a_long_chain_of_references_is_refused_at_the_depth_limit() -> None:
    node = [("Next", nb.OBJECT, b"")]
    chain = (
        nb.header()
        + nb.library(2, "L")
        + nb.class_with_members_and_types(1, "Node", node, 2)
        + nb.reference(3)
    )
    for index in range(3, 300):
        chain += nb.class_with_id(index, 1) + nb.reference(index + 1)
    chain += nb.class_with_id(300, 1) + nb.NULL + nb.END
    assert "nested deeper than 64" in decoded_reason(chain)


def test_one_string_referenced_many_times_is_charged_each_time() -> None:
    count = 90_000
    body = nb.header() + nb.array_single_object(1, count) + nb.string(2, "x" * 1000)
    body += nb.reference(2) * (count - 1) + nb.END
    assert "exceed" in decoded_reason(body)


def test_the_record_count_is_bounded() -> None:
    body = nb.header() + nb.array_single_object(1, 50) + nb.NULL * 50 + nb.END
    assert "records" in decoded_reason(body, limits=BodyLimits(max_records=20))


def test_a_string_length_past_the_body_is_refused() -> None:
    body = nb.header() + b"\x06" + nb.i32(1) + b"\xff\xff\xff\xff\x07" + b"abc"
    assert "truncated" in decoded_reason(body)


def test_no_type_is_loaded_or_called_whatever_the_class_names() -> None:
    name = "System.Windows.Data.ObjectDataProvider"
    body = nb.header() + nb.system_class_with_members_and_types(1, name, [("MethodName", nb.STRING, b"")])
    body += nb.string(2, "Start") + nb.END
    decoded = decode_body(768, body)
    assert decoded.value["$class"] == name and decoded.value["members"] == {"MethodName": "Start"}


def test_xml_entities_are_never_expanded() -> None:
    laughs = b'<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;">]><l>&b;</l>'
    decoded = decode_body(0, laughs)
    assert (
        decoded.format == "text" and "a" * 20 not in str(decoded.value) and "DOCTYPE" in decoded.warnings[0]
    )


def test_deep_xml_and_json_are_shown_as_text() -> None:
    for body in (b"<a>" * 5000 + b"</a>" * 5000, b"[" * 100_000 + b"]" * 100_000):
        decoded = decode_body(0, body)
        assert decoded.format == "text" and decoded.warnings
        json.dumps(decoded.as_json())


def test_a_body_over_the_limit_is_not_decoded() -> None:
    assert "more than 16 bytes" in decoded_reason(b"x" * 17, 8, BodyLimits(max_body_bytes=16))


def test_headers_that_cannot_be_read_never_cost_the_body() -> None:
    for extension in (
        b"<ArrayOfHeaderInfo><HeaderInfo><Key>",
        b"\xff\xfe<\x00A",
        b"<ArrayOfHeaderInfo>" * 9000,
    ):
        decoded = decode_body(8, "body".encode("utf-16-le"), extension)
        assert decoded.value == "body"
