"""[MS-NRBF] 2.1.1 and 2.1.2.3: primitive values, read from a bounded cursor, kept typed.

Nothing here knows a .NET type beyond the names the format itself defines; values become
JSON-compatible on rendering (64-bit integers and decimals as strings, as the REST API writes
lookup IDs, since they exceed JavaScript's safe integers).
"""

from __future__ import annotations

import math
import re
import struct
from datetime import datetime, timedelta
from typing import Any

from bodies.result import BodyError

PRIMITIVE_NAMES = {
    1: "Boolean",
    2: "Byte",
    3: "Char",
    5: "Decimal",
    6: "Double",
    7: "Int16",
    8: "Int32",
    9: "Int64",
    10: "SByte",
    11: "Single",
    12: "TimeSpan",
    13: "DateTime",
    14: "UInt16",
    15: "UInt32",
    16: "UInt64",
    17: "Null",
    18: "String",
}
NULL, STRING, BYTE, CHAR, DECIMAL = 17, 18, 2, 3, 5
FIXED = {
    1: struct.Struct("<?"),
    2: struct.Struct("<B"),
    6: struct.Struct("<d"),
    7: struct.Struct("<h"),
    8: struct.Struct("<i"),
    9: struct.Struct("<q"),
    10: struct.Struct("<b"),
    11: struct.Struct("<f"),
    12: struct.Struct("<q"),
    13: struct.Struct("<Q"),
    14: struct.Struct("<H"),
    15: struct.Struct("<I"),
    16: struct.Struct("<Q"),
}
"""Fixed-size primitives by code; Boolean reads any non-zero byte as true."""
_FORMAT_LETTERS = {code: layout.format[1:] for code, layout in FIXED.items()}
_DECIMAL = re.compile(r"-?[0-9]+(\.[0-9]+)?")
_MAX_DECIMAL = 79_228_162_514_264_337_593_543_950_335
TICKS_PER_SECOND = 10_000_000
_MAX_TICKS = 3_155_378_975_999_999_999
_EPOCH = datetime(1, 1, 1)  # noqa: DTZ001 - .NET ticks count from 0001-01-01 in the DateTime's own kind
DATETIME_KINDS = ("Unspecified", "Utc", "Local", "Local")


class Cursor:
    """Bounded little-endian reads over one body: every length is checked against what is left."""

    __slots__ = ("data", "position")

    def __init__(self, data: bytes, position: int = 0) -> None:
        self.data = data
        self.position = position

    def remaining(self) -> int:
        return len(self.data) - self.position

    def take(self, size: int) -> bytes:
        if size < 0 or size > len(self.data) - self.position:
            raise BodyError(f"truncated at byte {self.position}: {size} more bytes needed")
        start = self.position
        self.position = start + size
        return self.data[start : self.position]

    def byte(self) -> int:
        if self.position >= len(self.data):
            raise BodyError(f"truncated at byte {self.position}")
        value = self.data[self.position]
        self.position += 1
        return value

    def unpack(self, layout: struct.Struct) -> Any:
        if layout.size > len(self.data) - self.position:
            raise BodyError(f"truncated at byte {self.position}")
        (value,) = layout.unpack_from(self.data, self.position)
        self.position += layout.size
        return value

    def int32(self) -> int:
        return int(self.unpack(FIXED[8]))

    def count(self, what: str) -> int:
        """An INT32 that counts something: 0 or positive."""
        value = self.int32()
        if value < 0:
            raise BodyError(f"{what} is negative ({value})")
        return value

    def length_prefixed_string(self) -> str:
        """[MS-NRBF] 2.1.1.6: a 7-bit variable length of at most 5 bytes, then UTF-8."""
        length = 0
        for index in range(5):
            part = self.byte()
            length |= (part & 0x7F) << (7 * index)
            if not part & 0x80:
                break
        else:
            raise BodyError("a string length is longer than 5 bytes")
        if length > 0x7FFFFFFF:
            raise BodyError("a string length exceeds 2147483647")
        try:
            return self.take(length).decode("utf-8")
        except UnicodeDecodeError:
            raise BodyError(f"a string before byte {self.position} is not UTF-8") from None

    def char(self) -> str:
        """[MS-NRBF] 2.1.1.1: one character, UTF-8 encoded (1 to 4 bytes)."""
        lead = self.byte()
        size = (
            1
            if lead < 0x80
            else 2
            if lead >> 5 == 6
            else 3
            if lead >> 4 == 14
            else 4
            if lead >> 3 == 30
            else 0
        )
        if size == 0:
            raise BodyError(f"a Char before byte {self.position} is not UTF-8")
        try:
            return (bytes((lead,)) + self.take(size - 1)).decode("utf-8")
        except UnicodeDecodeError:
            raise BodyError(f"a Char before byte {self.position} is not UTF-8") from None

    def primitive(self, code: int) -> Any:
        """The raw value of a primitive of type `code` (not Null or String, which callers handle)."""
        layout = FIXED.get(code)
        if layout is not None:
            return self.unpack(layout)
        if code == CHAR:
            return self.char()
        if code == DECIMAL:
            return decimal_text(self.length_prefixed_string())
        raise BodyError(f"primitive type {code} is not defined")

    def primitives(self, code: int, count: int) -> list[Any] | bytes:
        """`count` untyped primitives of one type (array items): fixed sizes in one unpack."""
        if code == BYTE:
            return self.take(count)
        letter = _FORMAT_LETTERS.get(code)
        if letter is None:
            return [self.primitive(code) for _ in range(count)]
        size = FIXED[code].size * count
        if size > len(self.data) - self.position:
            raise BodyError(f"truncated at byte {self.position}: an array of {count} items needs {size}")
        values = list(struct.unpack_from(f"<{count}{letter}", self.data, self.position))
        self.position += size
        return values


def decimal_text(text: str) -> str:
    """[MS-NRBF] 2.1.1.7: `-?digits(.digits)?` within the decimal range, kept as text."""
    if len(text) > 64 or not _DECIMAL.fullmatch(text):
        raise BodyError(f"{text[:40]!r} is not a Decimal")
    if abs(int(text.split(".")[0])) > _MAX_DECIMAL:
        raise BodyError("a Decimal is out of range")
    return text


def json_primitive(code: int, value: Any) -> Any:
    """A raw primitive as JSON: 64-bit integers as strings, non-finite floats as their names."""
    if code in (9, 16):
        return str(value)
    if code in (6, 11):
        return float_json(value)
    if code == 12:
        return timespan_text(value)
    if code == 13:
        return datetime_json(value)
    return value


def typed(code: int, value: Any) -> dict[str, Any]:
    """A primitive with its type, as class members and method arguments show them."""
    if code == 13:
        return {"$type": "DateTime", **datetime_json(value)}
    return {"$type": PRIMITIVE_NAMES.get(code, str(code)), "value": json_primitive(code, value)}


def float_json(value: float) -> float | str:
    if math.isfinite(value):
        return value
    return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"


def datetime_json(data: int) -> dict[str, Any]:
    """[MS-NRBF] 2.1.1.5: 62 bits of ticks since 0001-01-01, 2 bits of kind."""
    ticks = data & 0x3FFFFFFFFFFFFFFF
    kind = DATETIME_KINDS[data >> 62]
    return {"value": ticks_text(ticks, kind == "Utc"), "kind": kind, "ticks": str(ticks)}


def ticks_text(ticks: int, utc: bool) -> str | None:
    """ISO 8601 with .NET's seven fractional digits; None past 9999-12-31 (not a DateTime)."""
    if ticks > _MAX_TICKS:
        return None
    seconds, fraction = divmod(ticks, TICKS_PER_SECOND)
    moment = _EPOCH + timedelta(seconds=seconds)
    return f"{moment.isoformat()}.{fraction:07d}" + ("Z" if utc else "")


def timespan_text(ticks: int) -> str:
    """[MS-NRBF] 2.1.1.4 as .NET prints a TimeSpan: `[-][d.]hh:mm:ss[.fffffff]`."""
    sign = "-" if ticks < 0 else ""
    seconds, fraction = divmod(abs(ticks), TICKS_PER_SECOND)
    minutes, second = divmod(seconds, 60)
    hours, minute = divmod(minutes, 60)
    days, hour = divmod(hours, 24)
    text = f"{sign}{f'{days}.' if days else ''}{hour:02d}:{minute:02d}:{second:02d}"
    return text + (f".{fraction:07d}" if fraction else "")
