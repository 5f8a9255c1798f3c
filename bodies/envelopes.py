"""Headers that travel beside a body: NServiceBus's `ArrayOfHeaderInfo` in the Extension (and
its label's `<CorrId>`/`<WinIdName>`), and a SOAP envelope's header blocks in an XML body.

A malformed header document costs the headers, never the body: it becomes a warning.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from bodies.limits import BodyLimits
from bodies.result import BodyError, JsonValue
from bodies.xml_view import _element, decoded_text, looks_like_xml, parse_document, text_encoding
from soap.xml import Element, split_tag

NSERVICEBUS = "nservicebus"
SOAP = "soap"
_SOAP_NAMESPACES = ("http://schemas.xmlsoap.org/soap/envelope/", "http://www.w3.org/2003/05/soap-envelope")
_LABEL_FIELD = re.compile(r"<(CorrId|WinIdName)>([^<]{0,1000})</\1>")


@dataclass(frozen=True, slots=True)
class Headers:
    values: dict[str, str | None] | None
    envelope: str | None
    warnings: tuple[str, ...]


NO_HEADERS = Headers(None, None, ())


def extension_headers(extension: bytes, label: str, limits: BodyLimits) -> Headers:
    """NServiceBus headers from the Extension, when it holds an ArrayOfHeaderInfo document."""
    data = extension.rstrip(b"\x00")
    if not data:
        return _label_headers(label)
    encoding, bom = text_encoding(data)
    try:
        text = decoded_text(data, encoding, bom)
    except BodyError:
        return NO_HEADERS
    if "ArrayOfHeaderInfo" not in text[:512] or not looks_like_xml(text):
        return NO_HEADERS
    if len(data) > limits.max_header_bytes:
        return _broken(f"the Extension's NServiceBus headers exceed {limits.max_header_bytes} bytes")
    try:
        root = parse_document(data, encoding, limits)
    except BodyError as error:
        return _broken(f"the Extension's NServiceBus headers are not well-formed XML: {error}")
    return _header_infos(root, label)


def _broken(warning: str) -> Headers:
    return Headers(None, NSERVICEBUS, (warning,))


def _header_infos(root: Element, label: str) -> Headers:
    if split_tag(root)[1] != "ArrayOfHeaderInfo":
        return _broken("the Extension's root element is not ArrayOfHeaderInfo")
    values: dict[str, str | None] = dict(_label_headers(label).values or {})
    warnings: list[str] = []
    for index, info in enumerate(child for child in root if isinstance(child.tag, str)):
        key, value = _child_text(info, "Key"), _child_text(info, "Value")
        if split_tag(info)[1] != "HeaderInfo" or key is None:
            warnings.append(f"HeaderInfo {index + 1} has no Key: skipped")
            continue
        values[key] = value
    return Headers(values, NSERVICEBUS, tuple(warnings[:20]))


def _child_text(parent: Element, name: str) -> str | None:
    for child in parent:
        if isinstance(child.tag, str) and split_tag(child)[1] == name:
            value = _element(child)
            return value if isinstance(value, str) else None
    return None


def _label_headers(label: str) -> Headers:
    """NServiceBus's MSMQ transport writes `<CorrId>…</CorrId><WinIdName>…</WinIdName>` as label."""
    found = dict(_LABEL_FIELD.findall(label[:4096]))
    if not found:
        return NO_HEADERS
    return Headers({name: text for name, text in found.items()}, NSERVICEBUS, ())


def soap_envelope(root: Element) -> tuple[Headers, JsonValue] | None:
    """(header blocks by local name, the Body's content as a JSON view) of a SOAP envelope."""
    namespace, name = split_tag(root)
    if name != "Envelope" or namespace not in _SOAP_NAMESPACES:
        return None
    headers: dict[str, str | None] = {}
    body: JsonValue = None
    for child in root:
        if not isinstance(child.tag, str):
            continue
        part = split_tag(child)[1]
        if part == "Header":
            for block in child:
                if isinstance(block.tag, str):
                    value = _element(block)
                    headers[split_tag(block)[1]] = value if isinstance(value, str) else _flat(value)
        elif part == "Body":
            body = _element(child)
    return Headers(headers, SOAP, ()), body


def _flat(value: JsonValue) -> str:
    return json.dumps(value, ensure_ascii=False)
