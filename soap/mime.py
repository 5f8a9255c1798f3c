"""Content types and the length-driven multipart parser (reference §1.3, Appendix A).

Windows frames parts by `Content-Length`: the delimiter follows the payload's last byte
directly, with no CRLF before it, so an RFC 2046 parser would split it wrongly. Parts without
`Content-Length` and a CRLF before the delimiter (vector 12) are tolerated. Every length is
checked against the bytes that remain; truncation, lies and garbage are refused with 400.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from soap.errors import bad_request
from soap.limits import DEFAULT_LIMITS, Limits
from soap.namespaces import WHITESPACE

CRLF = b"\r\n"
_TOKEN_CHARACTERS = r"[!#$%&'*+.^_`|~0-9A-Za-z-]+"
_TOKEN = re.compile(_TOKEN_CHARACTERS)
_SIMPLE_PARAMETER = re.compile(rf'[ \t;]*({_TOKEN_CHARACTERS})=("[^"\\]*"|[^"; \t][^; \t]*)[ \t]*(?=;|\Z)')
"""`; name=value` or `; name="value"`: what `_parameters` reads the same way, without escapes."""
_LENGTH = re.compile(rb"\d{1,19}")
_BOUNDARY = re.compile("[ -~]{1,70}")
_WHITESPACE = " \t"


@dataclass(frozen=True, slots=True)
class ContentType:
    """A parsed media type: lower-case type/subtype and parameters (names lower-cased)."""

    media_type: str
    parameters: Mapping[str, str] = field(default_factory=dict)

    @property
    def charset(self) -> str | None:
        return self.parameters.get("charset")


@dataclass(frozen=True, slots=True)
class MimePart:
    headers: Mapping[str, str]
    """Header names lower-cased."""
    payload: bytes

    @property
    def content_type(self) -> ContentType | None:
        value = self.headers.get("content-type")
        return None if value is None else parse_content_type(value)

    @property
    def content_id(self) -> str | None:
        """The Content-Id without the angle brackets other senders put around it."""
        value = self.headers.get("content-id")
        return None if value is None else strip_angle_brackets(value)


def strip_angle_brackets(value: str) -> str:
    stripped = value.strip(WHITESPACE)
    if len(stripped) >= 2 and stripped[0] == "<" and stripped[-1] == ">":
        return stripped[1:-1].strip(WHITESPACE)
    return stripped


def parse_content_type(value: str, limits: Limits = DEFAULT_LIMITS) -> ContentType:
    """`type/subtype *(; name=value)` with quoted-string values (the boundary has a space and a comma).

    Unquoted values run to the next `;` or whitespace, so `boundary=----=_Part_0_1` is accepted.
    """
    if len(value) > limits.max_content_type_length:
        raise bad_request("the Content-Type header is too long")
    media, _, rest = value.partition(";")
    kind, slash, subtype = media.strip(WHITESPACE).partition("/")
    if not slash or _TOKEN.fullmatch(kind) is None or _TOKEN.fullmatch(subtype) is None:
        raise bad_request(f"{value[:80]!r} is not a media type")
    return ContentType(f"{kind}/{subtype}".lower(), _parameters(rest, value))


def _parameters(text: str, original: str) -> dict[str, str]:
    simple = _simple_parameters(text)
    return simple if simple is not None else _any_parameters(text, original)


def _simple_parameters(text: str) -> dict[str, str] | None:
    """Parameters as senders write them (no escapes, no blanks before `=`, no repeats), one
    regex match each; None for anything else, which the full parser then reads or refuses."""
    parameters: dict[str, str] = {}
    position = 0
    while (match := _SIMPLE_PARAMETER.match(text, position)) is not None:
        name, value = match.group(1).lower(), match.group(2)
        if name in parameters:
            return None
        parameters[name] = value[1:-1] if value.startswith('"') else value
        position = match.end()
    return parameters if _skip(text, position, _WHITESPACE + ";") == len(text) else None


def _any_parameters(text: str, original: str) -> dict[str, str]:
    parameters: dict[str, str] = {}
    position = 0
    while position < len(text):
        position = _skip(text, position, _WHITESPACE + ";")
        if position >= len(text):
            break
        equals = text.find("=", position)
        name = text[position:equals].strip(WHITESPACE) if equals >= 0 else ""
        if _TOKEN.fullmatch(name) is None:
            raise bad_request(f"bad parameter in Content-Type {original[:80]!r}")
        name = name.lower()
        value, position = _parameter_value(text, _skip(text, equals + 1, _WHITESPACE), original)
        if name in parameters:
            raise bad_request(f"parameter {name!r} appears twice in Content-Type")
        parameters[name] = value
        position = _skip(text, position, _WHITESPACE)
        if position < len(text) and text[position] != ";":
            raise bad_request(f"garbage after parameter {name!r} in Content-Type")
    return parameters


def _parameter_value(text: str, position: int, original: str) -> tuple[str, int]:
    if position < len(text) and text[position] == '"':
        return _quoted_string(text, position + 1, original)
    end = position
    while end < len(text) and text[end] not in ";" + _WHITESPACE:
        end += 1
    if end == position:
        raise bad_request(f"empty parameter value in Content-Type {original[:80]!r}")
    return text[position:end], end


def _quoted_string(text: str, position: int, original: str) -> tuple[str, int]:
    characters: list[str] = []
    while position < len(text):
        character = text[position]
        if character == '"':
            return "".join(characters), position + 1
        if character == "\\" and position + 1 < len(text):
            position += 1
            character = text[position]
        characters.append(character)
        position += 1
    raise bad_request(f"unterminated quoted string in Content-Type {original[:80]!r}")


def _skip(text: str, position: int, characters: str) -> int:
    while position < len(text) and text[position] in characters:
        position += 1
    return position


def boundary_of(content_type: ContentType) -> bytes:
    """The multipart boundary: 1-70 printable ASCII characters (RFC 2046)."""
    boundary = content_type.parameters.get("boundary")
    if boundary is None:
        raise bad_request("multipart/related without a boundary parameter")
    if not valid_boundary(boundary):
        raise bad_request("the multipart boundary must be 1-70 printable ASCII characters")
    return boundary.encode("ascii")


def valid_boundary(boundary: str) -> bool:
    """1-70 printable ASCII characters (RFC 2046)."""
    return _BOUNDARY.fullmatch(boundary) is not None


def split_multipart(body: bytes, boundary: bytes, limits: Limits = DEFAULT_LIMITS) -> list[MimePart]:
    """Split a multipart body into its parts, Windows framing first, RFC 2046 as fallback."""
    delimiter = b"--" + boundary
    position = _opening_delimiter(body, delimiter)
    parts: list[MimePart] = []
    while True:
        if not body.startswith(CRLF, position):
            position = _skip_padding(body, position)
        if body.startswith(b"--", position):
            return parts
        if not body.startswith(CRLF, position):
            raise bad_request("garbage after a multipart delimiter")
        if len(parts) == limits.max_parts:
            raise bad_request(f"more than {limits.max_parts} MIME parts")
        headers, position = _part_headers(body, position + 2, limits)
        payload, position = _part_payload(body, position, headers, delimiter)
        parts.append(MimePart(headers, payload))


def _opening_delimiter(body: bytes, delimiter: bytes) -> int:
    """Windows starts with the delimiter; an RFC 2046 sender may put a preamble first."""
    if body.startswith(delimiter):
        return len(delimiter)
    found = body.find(CRLF + delimiter)
    if found < 0:
        raise bad_request("no opening multipart delimiter")
    return found + 2 + len(delimiter)


def _skip_padding(body: bytes, position: int) -> int:
    """RFC 2046 allows linear whitespace between a delimiter and its CRLF."""
    end = min(len(body), position + 64)
    while position < end and body[position] in b" \t":
        position += 1
    return position


def _part_headers(body: bytes, position: int, limits: Limits) -> tuple[dict[str, str], int]:
    if body.startswith(CRLF, position):
        return {}, position + 2
    end = body.find(CRLF + CRLF, position, position + limits.max_part_header_bytes + 4)
    if end < 0:
        raise bad_request("MIME part headers are truncated or too long")
    lines = body[position:end].decode("latin-1").split("\r\n")
    if len(lines) > limits.max_part_headers:
        raise bad_request(f"more than {limits.max_part_headers} headers in a MIME part")
    headers: dict[str, str] = {}
    for line in lines:
        name, colon, value = line.partition(":")
        key = name.strip(_WHITESPACE)
        if not colon or _TOKEN.fullmatch(key) is None:
            raise bad_request("a MIME part header line is not `name: value`")
        key = key.lower()
        if key in headers:
            raise bad_request(f"MIME part header {key!r} appears twice")
        headers[key] = value.strip(_WHITESPACE)
    return headers, end + 4


def _part_payload(
    body: bytes, position: int, headers: Mapping[str, str], delimiter: bytes
) -> tuple[bytes, int]:
    declared = headers.get("content-length")
    if declared is None:
        return _payload_until_delimiter(body, position, delimiter)
    raw = declared.encode("latin-1")
    length = int(raw) if _LENGTH.fullmatch(raw) is not None else -1
    if not 0 <= length <= len(body) - position:
        raise bad_request(f"MIME part Content-Length {declared[:24]!r} is not within the request")
    end = position + length
    if body.startswith(delimiter, end):
        return body[position:end], end + len(delimiter)
    if body.startswith(CRLF + delimiter, end):
        return body[position:end], end + 2 + len(delimiter)
    raise bad_request("a MIME part is not followed by the multipart delimiter")


def _payload_until_delimiter(body: bytes, position: int, delimiter: bytes) -> tuple[bytes, int]:
    """Fallback for parts without Content-Length: up to the next delimiter, minus one CRLF."""
    found = body.find(delimiter, position)
    if found < 0:
        raise bad_request("a MIME part without Content-Length never reaches a delimiter")
    end = found - 2 if found - 2 >= position and body[found - 2 : found] == CRLF else found
    return body[position:end], found + len(delimiter)
