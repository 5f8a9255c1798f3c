"""The body decoder: BodyType, body, Extension and label in, a DecodedBody out, never an exception."""

from __future__ import annotations

import json
from typing import Any

from bodies.envelopes import Headers, extension_headers, soap_envelope
from bodies.limits import DEFAULT_BODY_LIMITS, BodyLimits
from bodies.nrbf import decode_nrbf
from bodies.result import BodyError, DecodedBody, JsonValue
from bodies.variant import VT_BINARY_OBJECT, VT_EMPTY, decode_variant, vt_name
from bodies.xml_view import decoded_text, looks_like_xml, parse_document, text_encoding, xml_view


def decode_body(
    body_type: int,
    body: bytes,
    extension: bytes = b"",
    label: str = "",
    limits: BodyLimits = DEFAULT_BODY_LIMITS,
) -> DecodedBody:
    """Decode one message body. Whatever the bytes, the answer is a DecodedBody: what cannot be
    read is `binary` with the reason, and headers that cannot be read are a warning."""
    try:
        headers = extension_headers(extension, label, limits)
    except Exception as error:  # a decoder bug must not cost the body
        headers = Headers(None, None, (f"the Extension could not be read ({type(error).__name__})",))
    try:
        decoded = _decode(body_type, body, limits)
    except BodyError as error:
        decoded = DecodedBody("binary", reason=str(error)[:500])
    except Exception as error:  # never raise to the caller: a hostile body is answered as binary
        decoded = DecodedBody("binary", reason=f"the body could not be decoded ({type(error).__name__})")
    return _with_headers(decoded, headers)


def _with_headers(decoded: DecodedBody, headers: Headers) -> DecodedBody:
    if decoded.envelope is not None or (headers.values is None and not headers.warnings):
        return decoded
    return DecodedBody(
        decoded.format,
        decoded.value,
        decoded.type,
        decoded.encoding,
        decoded.text,
        headers.values,
        headers.envelope,
        decoded.reason,
        decoded.warnings + headers.warnings,
    )


def _decode(body_type: int, body: bytes, limits: BodyLimits) -> DecodedBody:
    if len(body) > limits.max_body_bytes:
        raise BodyError(f"the body has more than {limits.max_body_bytes} bytes")
    if body_type == VT_EMPTY:
        return _sniffed(body, limits)
    if body_type == VT_BINARY_OBJECT:
        value, type_name = decode_nrbf(body, limits)
        return DecodedBody("nrbf", value, type_name, "utf-8")
    value, encoding, text = decode_variant(body_type, body)
    return DecodedBody("variant", value, vt_name(body_type), encoding, text)


def _sniffed(body: bytes, limits: BodyLimits) -> DecodedBody:
    """BodyType 0: XmlMessageFormatter's XML, custom formatters' JSON, or text."""
    encoding, bom = text_encoding(body)
    try:
        text = decoded_text(body, encoding, bom)
    except BodyError:
        raise BodyError("BodyType 0 and neither UTF-8 nor UTF-16 text") from None
    label = encoding if not bom else f"{encoding} (BOM)"
    if looks_like_xml(text):
        try:
            return _xml(body, encoding, text, label, limits)
        except BodyError as error:  # shown as the text it is, never parsed further
            return DecodedBody("text", text, None, label, warnings=(f"not XML: {error}",))
    stripped = text.strip(" \t\r\n")
    if stripped[:1] in ("{", "["):
        try:
            return DecodedBody("json", _json(stripped, limits), None, label)
        except BodyError as error:
            return DecodedBody("text", text, None, label, warnings=(f"not JSON: {error}",))
    return DecodedBody("text", text, None, label)


def _xml(body: bytes, encoding: str, text: str, label: str, limits: BodyLimits) -> DecodedBody:
    root = parse_document(body, encoding, limits)
    soap = soap_envelope(root)
    if soap is not None:
        headers, content = soap
        return DecodedBody("xml", content, "Envelope", label, text, headers.values, headers.envelope)
    view, name = xml_view(root)
    return DecodedBody("xml", view, name, label, text)


def _json(text: str, limits: BodyLimits) -> JsonValue:
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError) as error:
        raise BodyError(str(error)[:200]) from None
    _check_depth(value, limits.max_depth)
    return value


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _check_depth(value: JsonValue, max_depth: int) -> None:
    """Walked without recursion: the decoded value is written out by recursive serializers."""
    pending = [(value, 1)]
    while pending:
        item, depth = pending.pop()
        if depth > max_depth:
            raise BodyError(f"nested deeper than {max_depth}")
        if isinstance(item, dict):
            pending.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            pending.extend((child, depth + 1) for child in item)
