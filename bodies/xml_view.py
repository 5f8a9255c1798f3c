"""XML bodies (XmlMessageFormatter's XmlSerializer output) through the gateway's one hardened
XML entry point (soap.xml: no DTD, no entities, no network, bounded), and their JSON view.

The view: the root as `{name: content}`; an element with neither attributes nor child
elements is its text (null with `xsi:nil="true"`); otherwise an object of `@attribute`s and
children by local name (a name repeated becomes a list), with `#text` for text beside
children. Namespaces are dropped from names (the document text keeps them).
"""

from __future__ import annotations

import codecs
from typing import Any

from bodies.limits import BodyLimits
from bodies.result import BodyError, JsonValue
from soap.errors import SrmpError
from soap.limits import Limits
from soap.xml import Element, parse_xml, split_tag

XSI = "http://www.w3.org/2001/XMLSchema-instance"
_NIL = f"{{{XSI}}}nil"
_BOMS = (
    (codecs.BOM_UTF8, "utf-8", 3),
    (codecs.BOM_UTF16_LE, "utf-16-le", 2),
    (codecs.BOM_UTF16_BE, "utf-16-be", 2),
)


def text_encoding(data: bytes) -> tuple[str, int]:
    """(encoding, BOM length) of a text body: a BOM, else UTF-16 by its first `<`, else UTF-8."""
    for bom, name, size in _BOMS:
        if data.startswith(bom):
            return name, size
    if data[:2] == b"<\x00":
        return "utf-16-le", 0
    if data[:2] == b"\x00<":
        return "utf-16-be", 0
    return "utf-8", 0


def looks_like_xml(text: str) -> bool:
    return text.lstrip(" \t\r\n").startswith("<")


def parse_document(data: bytes, encoding: str, limits: BodyLimits) -> Element:
    """The root element, or BodyError with the hardened parser's reason."""
    bounds = Limits(
        max_envelope_bytes=limits.max_body_bytes,
        max_depth=limits.max_depth,
        max_elements=limits.max_xml_elements,
    )
    try:
        # soap.xml reads UTF-8 or, with a BOM or this charset, UTF-16; a BOM-less big-endian
        # body is given to it with a BOM.
        if encoding == "utf-16-be" and not data.startswith(codecs.BOM_UTF16_BE):
            data = codecs.BOM_UTF16_BE + data
        return parse_xml(data, "utf-16le" if encoding == "utf-16-le" else "utf-8", bounds)
    except SrmpError as error:
        raise BodyError(_reworded(error.reason)) from None


def xml_view(root: Element) -> tuple[dict[str, JsonValue], str]:
    """(the JSON view, the root's local name)."""
    name = split_tag(root)[1]
    return {name: _element(root)}, name


def _element(element: Element) -> JsonValue:
    children = [child for child in element if isinstance(child.tag, str)]
    attributes = {f"@{_local(key)}": value for key, value in element.attrib.items() if key != _NIL}
    if not children and not attributes:
        return None if element.get(_NIL) == "true" else _text(element)
    view: dict[str, JsonValue] = attributes
    for child in children:
        name = _local(child.tag)
        value = _element(child)
        present = view.get(name)
        if name not in view:
            view[name] = value
        elif isinstance(present, _Repeated):
            present.append(value)
        else:
            view[name] = _Repeated((present, value))
    text = _text(element).strip()
    if text and children:
        view["#text"] = text
    elif text:
        view["#text"] = _text(element)
    return {key: list(value) if isinstance(value, _Repeated) else value for key, value in view.items()}


class _Repeated(list[Any]):
    """A list made of repeated elements (a list value from elsewhere is never extended)."""


def _text(element: Element) -> str:
    return (element.text or "") + "".join(child.tail or "" for child in element)


def _local(tag: str) -> str:
    return tag.rpartition("}")[2] if tag.startswith("{") else tag


def decoded_text(data: bytes, encoding: str, bom: int) -> str:
    try:
        return data[bom:].decode(encoding)
    except UnicodeDecodeError:
        raise BodyError(f"the body is not valid {encoding}") from None


def _reworded(reason: str) -> str:
    """soap.xml's reasons speak of envelopes; a body is a document."""
    return reason.replace("the SOAP envelope", "the document").replace(" in SRMP envelopes", "")
