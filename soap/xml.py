"""The one hardened XML entry point of the gateway (reference §1.7 step 4, §10).

No DTD of any kind (a DOCTYPE is refused before the parser sees it), no entity expansion, no
network, no huge-tree mode; the envelope size, element depth, element count, attributes per
element and namespace declarations are bounded while parsing, so a hostile document is refused
after reading at most one chunk past the limit.
"""

from __future__ import annotations

import codecs
import functools
from collections.abc import Collection
from typing import Any

from lxml import etree

from soap.errors import bad_request
from soap.limits import DEFAULT_LIMITS, Limits
from soap.namespaces import WHITESPACE

Element = Any
"""An lxml element (lxml ships no type information)."""

_CHUNK = 16 * 1024
_CHARSETS = {
    "utf-8": "utf-8",
    "utf8": "utf-8",
    "us-ascii": "utf-8",
    "utf-16": "utf-16",
    "utf-16le": "utf-16-le",
    "utf-16be": "utf-16-be",
}
_BOMS = ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


def parse_xml(
    data: bytes, charset: str | None = None, limits: Limits = DEFAULT_LIMITS, kind: str = "SRMP envelopes"
) -> Element:
    """Parse an envelope into an lxml element, or raise SrmpError(400). `kind`: what the
    refusals call the documents of this caller ("SOAP API requests")."""
    if len(data) > limits.max_envelope_bytes:
        raise bad_request(f"the SOAP envelope is larger than {limits.max_envelope_bytes} bytes")
    text = _trim(_decode(data, charset))
    _refuse_doctype(text, kind)
    root = _parse_bounded(text.encode("utf-8"), limits)
    docinfo = root.getroottree().docinfo
    if docinfo.doctype or docinfo.internalDTD is not None or docinfo.externalDTD is not None:
        raise bad_request(f"DTDs are not allowed in {kind}")
    return root


def _decode(data: bytes, charset: str | None) -> str:
    """UTF-8 unless a BOM or the charset parameter says UTF-16; invalid bytes are refused."""
    encoding = next((name for bom, name in _BOMS if data.startswith(bom)), None)
    if encoding is None:
        encoding = _CHARSETS.get((charset or "utf-8").strip(WHITESPACE).lower())
        if encoding is None:
            raise bad_request(f"unsupported envelope charset {(charset or '')[:40]!r}")
    try:
        return data.decode(encoding)
    except UnicodeDecodeError:
        raise bad_request(f"the SOAP envelope is not valid {encoding}") from None


def _trim(text: str) -> str:
    """Drop one trailing NUL and trailing whitespace after the root (reference §1.7 step 4)."""
    if text.endswith("\x00"):
        text = text[:-1]
    return text.rstrip(WHITESPACE)


def _refuse_doctype(text: str, kind: str) -> None:
    """Walk the prolog: an XML declaration, processing instructions, comments, whitespace only."""
    position = 0
    while True:
        while position < len(text) and text[position] in WHITESPACE:
            position += 1
        if text.startswith("<?", position):
            position = _after(text, position, "?>")
        elif text.startswith("<!--", position):
            position = _after(text, position, "-->")
        elif text.startswith("<!", position):
            raise bad_request(f"DOCTYPE and other DTD declarations are not allowed in {kind}")
        else:
            return


def _after(text: str, position: int, terminator: str) -> int:
    end = text.find(terminator, position)
    if end < 0:
        raise bad_request("the SOAP envelope's prolog is not terminated")
    return end + len(terminator)


_PARSER_OPTIONS: dict[str, Any] = {
    "encoding": "utf-8",
    "resolve_entities": False,
    "no_network": True,
    "load_dtd": False,
    "dtd_validation": False,
    "attribute_defaults": False,
    "huge_tree": False,
    "collect_ids": False,
}


def _parse_bounded(data: bytes, limits: Limits) -> Element:
    root = _parse_small(data, limits)
    return root if root is not None else _parse_streaming(data, limits)


def _parse_small(data: bytes, limits: Limits) -> Element | None:
    """One-chunk envelopes (all of Windows'): the same parse without a Python call per event.

    The streaming path feeds such a document in one piece too, so the whole tree exists before
    its first check either way. Byte counts bound the counts from above: every element needs a
    `<` not followed by `/`, every attribute and namespace declaration a `=`; the depth, bounded
    by the element count, is checked on the tree only when that bound exceeds it. Any refusal
    is left to the streaming path, so that a bad document is refused with the same reason.
    """
    if len(data) > _CHUNK:
        return None
    elements = data.count(b"<") - data.count(b"</")
    equals = data.count(b"=")
    if (
        elements > limits.max_elements
        or equals > limits.max_attributes
        or equals > limits.max_namespace_declarations
    ):
        return None
    parser = etree.XMLParser(**_PARSER_OPTIONS)
    try:
        parser.feed(data)
        root = parser.close()
    except etree.LxmlError:
        return None
    if elements > limits.max_depth and _too_deep(limits.max_depth)(root):
        return None
    return root


@functools.lru_cache(maxsize=8)
def _too_deep(max_depth: int) -> Any:
    """An XPath that is true when some element is nested deeper than `max_depth` (root: 1)."""
    return etree.XPath("boolean(/*" + "/*" * max_depth + ")")


def _parse_streaming(data: bytes, limits: Limits) -> Element:
    parser = etree.XMLPullParser(events=("start", "end", "start-ns"), **_PARSER_OPTIONS)
    counter = _Counter(limits)
    try:
        for start in range(0, len(data), _CHUNK):
            parser.feed(data[start : start + _CHUNK])
            counter.check(parser.read_events())
        root = parser.close()
        counter.check(parser.read_events())
    except etree.LxmlError as error:
        raise bad_request(f"the SOAP envelope is not well-formed XML: {str(error)[:200]}") from None
    return root


class _Counter:
    """Depth, element, attribute and namespace bounds, checked on the parser's events."""

    def __init__(self, limits: Limits) -> None:
        self._limits = limits
        self._depth = 0
        self._elements = 0
        self._namespaces = 0

    def check(self, events: Any) -> None:
        limits = self._limits
        for event, item in events:
            if event == "start":
                self._depth += 1
                self._elements += 1
                if self._depth > limits.max_depth:
                    raise bad_request(f"the SOAP envelope is nested deeper than {limits.max_depth}")
                if self._elements > limits.max_elements:
                    raise bad_request(f"the SOAP envelope has more than {limits.max_elements} elements")
                if len(item.attrib) > limits.max_attributes:
                    raise bad_request(f"an element has more than {limits.max_attributes} attributes")
            elif event == "end":
                self._depth -= 1
            else:
                self._namespaces += 1
                if self._namespaces > limits.max_namespace_declarations:
                    raise bad_request("the SOAP envelope declares too many namespaces")


class Children:
    """The child elements of one block in one namespace, by lower-case local name.

    Local names compare case-insensitively (reference §1.4); a known child occurring twice is
    refused, children in other namespaces and unknown ones are ignored.
    """

    __slots__ = ("_found", "_parent")

    def __init__(self, parent: Element, namespace: str, known: Collection[str]) -> None:
        self._parent = parent
        self._found: dict[str, Element] = {}
        for child in parent:
            tag = child.tag
            if not isinstance(tag, str):
                continue
            child_namespace, key = matching_name(tag)
            if child_namespace != namespace or key not in known:
                continue
            if key in self._found:
                raise bad_request(f"<{split_tag(child)[1]}> occurs twice in <{split_tag(parent)[1]}>")
            self._found[key] = child

    def get(self, name: str) -> Element | None:
        return self._found.get(name)

    def flag(self, name: str) -> bool:
        """An empty marker element such as `<durable/>`: present or not."""
        return name in self._found

    def text(self, name: str, strip: bool = True) -> str | None:
        element = self._found.get(name)
        if element is None:
            return None
        text = leaf_text(element)
        return text.strip(WHITESPACE) if strip else text

    def required_text(self, name: str, strip: bool = True) -> str:
        text = self.text(name, strip)
        if text is None:
            raise bad_request(f"mandatory <{name}> is missing from <{split_tag(self._parent)[1]}>")
        return text


def split_tag(element: Element) -> tuple[str, str]:
    """(namespace URI, local name) of an element; "" for no namespace."""
    return _split_clark(element.tag)


def _split_clark(tag: str) -> tuple[str, str]:
    """Split at the last `}`: a namespace URI may contain one (libxml2 does not check), a local
    name cannot, and lxml's QName refuses such tags."""
    if not tag.startswith("{"):
        return "", tag
    namespace, _, local = tag[1:].rpartition("}")
    return namespace, local


def matching_name(tag: str) -> tuple[str, str]:
    """(namespace URI, local name in ASCII lower case) of a Clark tag: what elements match on.

    The few spellings senders use repeat in every envelope, so they are remembered; a bounded
    cache of short tags keeps hostile names from costing memory.
    """
    if len(tag) > _MAX_REMEMBERED_TAG:
        return _matching_name(tag)
    return _remembered_name(tag)


def _matching_name(tag: str) -> tuple[str, str]:
    namespace, local = _split_clark(tag)
    return namespace, ascii_lower(local)


_MAX_REMEMBERED_TAG = 200
_remembered_name = functools.lru_cache(maxsize=1024)(_matching_name)


def ascii_lower(name: str) -> str:
    """Local names compare case-insensitively in ASCII only (no Kelvin sign for `k`)."""
    return name.lower() if name.isascii() else name


def leaf_text(element: Element) -> str:
    """The text of an element that must not contain elements (comments are skipped)."""
    if len(element) == 0:  # the common case: no children at all, not even comments
        return element.text or ""
    if any(isinstance(child.tag, str) for child in element):
        raise bad_request(f"<{split_tag(element)[1]}> must hold text, not elements")
    return (element.text or "") + "".join(child.tail or "" for child in element)
