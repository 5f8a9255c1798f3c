"""Bodies whose BodyType is a VARIANT type ([MS-OAUT] 2.2.7 VARENUM): what COM senders and
System.Messaging's ActiveXMessageFormatter write. The body holds the value's bytes only.

VT_LPSTR is ANSI text in the sender's code page, which the message does not carry: it is read
as Windows-1252 (Western European Windows), its five unassigned bytes as the C1 controls of
the same value, as Windows' own conversion does.
"""

from __future__ import annotations

import base64
import math
import struct
import uuid
from datetime import datetime, timedelta
from typing import Any

from bodies.result import BodyError, JsonValue

VT_EMPTY, VT_NULL, VT_I2, VT_I4, VT_R4, VT_R8, VT_CY, VT_DATE, VT_BSTR = 0, 1, 2, 3, 4, 5, 6, 7, 8
VT_ERROR, VT_BOOL, VT_DECIMAL, VT_I1, VT_UI1, VT_UI2, VT_UI4, VT_I8, VT_UI8 = (
    10,
    11,
    14,
    16,
    17,
    18,
    19,
    20,
    21,
)
VT_INT, VT_UINT, VT_LPSTR, VT_LPWSTR, VT_FILETIME, VT_STREAMED_OBJECT, VT_STORED_OBJECT = (
    22,
    23,
    30,
    31,
    64,
    68,
    69,
)
VT_CLSID, VT_VECTOR, VT_ARRAY = 72, 0x1000, 0x2000
VT_BINARY_OBJECT = 0x300
"""System.Messaging's BinaryMessageFormatter: a .NET binary serialization stream."""

VT_NAMES = {
    VT_EMPTY: "VT_EMPTY", VT_NULL: "VT_NULL", VT_I2: "VT_I2", VT_I4: "VT_I4", VT_R4: "VT_R4", VT_R8: "VT_R8",
    VT_CY: "VT_CY", VT_DATE: "VT_DATE", VT_BSTR: "VT_BSTR", 9: "VT_DISPATCH", VT_ERROR: "VT_ERROR",
    VT_BOOL: "VT_BOOL", 12: "VT_VARIANT", 13: "VT_UNKNOWN", VT_DECIMAL: "VT_DECIMAL", VT_I1: "VT_I1",
    VT_UI1: "VT_UI1", VT_UI2: "VT_UI2", VT_UI4: "VT_UI4", VT_I8: "VT_I8", VT_UI8: "VT_UI8", VT_INT: "VT_INT",
    VT_UINT: "VT_UINT", 24: "VT_VOID", 25: "VT_HRESULT", 26: "VT_PTR", 27: "VT_SAFEARRAY", 28: "VT_CARRAY",
    29: "VT_USERDEFINED", VT_LPSTR: "VT_LPSTR", VT_LPWSTR: "VT_LPWSTR", 36: "VT_RECORD", 37: "VT_INT_PTR",
    38: "VT_UINT_PTR", VT_FILETIME: "VT_FILETIME", 65: "VT_BLOB", 66: "VT_STREAM", 67: "VT_STORAGE",
    VT_STREAMED_OBJECT: "VT_STREAMED_OBJECT", VT_STORED_OBJECT: "VT_STORED_OBJECT", 70: "VT_BLOB_OBJECT",
    71: "VT_CF", VT_CLSID: "VT_CLSID", 73: "VT_VERSIONED_STREAM", VT_BINARY_OBJECT: "VT_BINARY_OBJECT",
}  # fmt: skip
BYTE_VECTORS = (VT_VECTOR | VT_UI1, VT_ARRAY | VT_UI1)
"""Byte arrays: VT_UI1|VT_VECTOR as MSMQ documents it, VT_UI1|VT_ARRAY as COM senders' SAFEARRAYs."""

_INTEGERS = {
    VT_I1: "<b", VT_UI1: "<B", VT_I2: "<h", VT_UI2: "<H", VT_I4: "<i", VT_UI4: "<I", VT_INT: "<i",
    VT_UINT: "<I", VT_I8: "<q", VT_UI8: "<Q",
}  # fmt: skip
_FLOATS = {VT_R4: "<f", VT_R8: "<d"}
_OLE_EPOCH = datetime(1899, 12, 30)  # noqa: DTZ001 - an OLE date has no zone: the sender's local time
_FILETIME_EPOCH = datetime(1601, 1, 1)  # noqa: DTZ001 - made aware (UTC) where used
_OLE_DATE_RANGE = (-657434.0, 2958466.0)
_COMPOUND_FILE = bytes.fromhex("D0CF11E0A1B11AE1")


def vt_name(vt: int) -> str:
    base = VT_NAMES.get(vt & 0x0FFF, f"VT_{vt & 0x0FFF}")
    for flag, name in ((VT_VECTOR, "VT_VECTOR"), (VT_ARRAY, "VT_ARRAY"), (0x4000, "VT_BYREF")):
        if vt & flag:
            base += f"|{name}"
    return base


def decode_variant(vt: int, body: bytes) -> tuple[JsonValue, str | None, str | None]:
    """(value, encoding, text) of a VARIANT body; raises BodyError for what it cannot read."""
    if vt in (VT_BSTR, VT_LPWSTR):
        return (text := _utf16(body, vt == VT_LPWSTR)), "utf-16-le", text
    if vt == VT_LPSTR:
        return (text := ansi_text(body.removesuffix(b"\x00"))), "windows-1252", text
    if vt in BYTE_VECTORS:
        return base64.b64encode(body).decode("ascii"), None, _utf8_or_none(body)
    if vt == VT_NULL:
        _size(vt, body, 0)
        return None, None, None
    if vt in (VT_STREAMED_OBJECT, VT_STORED_OBJECT):
        return _persisted(vt, body), None, None
    reader = _FIXED.get(vt)
    if reader is None:
        raise BodyError(f"BodyType {vt} ({vt_name(vt)}) is not a VARIANT type the gateway decodes")
    return reader(vt, body), None, None


def _size(vt: int, body: bytes, size: int) -> None:
    if len(body) != size:
        raise BodyError(f"a {vt_name(vt)} body has {size} bytes, not {len(body)}")


def _utf16(body: bytes, terminated: bool) -> str:
    if len(body) % 2:
        raise BodyError(f"UTF-16 text of an odd number of bytes ({len(body)})")
    try:
        text = body.decode("utf-16-le")
    except UnicodeDecodeError:
        raise BodyError("the body is not valid UTF-16 (an unpaired surrogate)") from None
    return text.removesuffix("\x00") if terminated else text


def ansi_text(body: bytes) -> str:
    """Windows-1252, its unassigned bytes (0x81, 0x8D, 0x8F, 0x90, 0x9D) as U+0081 and so on."""
    return body.decode("latin-1").translate(_CP1252)


def _cp1252_table() -> dict[int, str]:
    """Latin-1 differs from Windows-1252 in 0x80-0x9F only: map those that 1252 assigns."""
    table = {}
    for byte in range(0x80, 0xA0):
        try:
            table[byte] = bytes((byte,)).decode("cp1252")
        except UnicodeDecodeError:
            continue
    return table


_CP1252 = _cp1252_table()


def _utf8_or_none(body: bytes) -> str | None:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError:
        return None


def _integer(vt: int, body: bytes) -> JsonValue:
    layout = struct.Struct(_INTEGERS[vt])
    _size(vt, body, layout.size)
    (value,) = layout.unpack(body)
    return str(value) if layout.size == 8 else value


def _float(vt: int, body: bytes) -> JsonValue:
    layout = struct.Struct(_FLOATS[vt])
    _size(vt, body, layout.size)
    (value,) = layout.unpack(body)
    if math.isfinite(value):
        return float(value)
    return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"


def _bool(vt: int, body: bytes) -> JsonValue:
    """VARIANT_BOOL: 0 is false, VARIANT_TRUE (0xFFFF) true; any other non-zero reads as true."""
    _size(vt, body, 2)
    return body != b"\x00\x00"


def _currency(vt: int, body: bytes) -> JsonValue:
    """CY: a 64-bit integer of ten-thousandths, as decimal text."""
    _size(vt, body, 8)
    (value,) = struct.unpack("<q", body)
    return scaled_text(abs(value), 4, value < 0)


def scaled_text(magnitude: int, scale: int, negative: bool) -> str:
    """An integer scaled by 10**-scale as decimal text, trailing zeros of the fraction dropped."""
    digits = str(magnitude).rjust(scale + 1, "0")
    whole, fraction = (digits[:-scale], digits[-scale:].rstrip("0")) if scale else (digits, "")
    return ("-" if negative and magnitude else "") + whole + (f".{fraction}" if fraction else "")


def _decimal(vt: int, body: bytes) -> JsonValue:
    """DECIMAL: wReserved, scale, sign (0x80 negative), Hi32, Lo64."""
    _size(vt, body, 16)
    _reserved, scale, sign, high, low = struct.unpack("<HBBIQ", body)
    if scale > 28:
        raise BodyError(f"a VT_DECIMAL of scale {scale} (at most 28)")
    return scaled_text((high << 64) | low, scale, bool(sign & 0x80))


def _date(vt: int, body: bytes) -> JsonValue:
    """DATE: days since 1899-12-30 (local time); the fraction is the time of day, positive even
    before the epoch. Read to the millisecond."""
    _size(vt, body, 8)
    (days,) = struct.unpack("<d", body)
    if not _OLE_DATE_RANGE[0] < days < _OLE_DATE_RANGE[1]:
        raise BodyError(f"VT_DATE {days!r} is outside 0100-01-01 to 9999-12-31")
    whole = math.trunc(days)
    milliseconds = round(abs(days - whole) * 86_400_000)
    moment = _OLE_EPOCH + timedelta(days=whole, milliseconds=milliseconds)
    return moment.isoformat(timespec="milliseconds")


def _filetime(vt: int, body: bytes) -> JsonValue:
    _size(vt, body, 8)
    (ticks,) = struct.unpack("<Q", body)
    try:
        moment = _FILETIME_EPOCH + timedelta(microseconds=ticks // 10)
    except OverflowError:
        raise BodyError("a VT_FILETIME past 9999-12-31") from None
    return moment.isoformat(timespec="microseconds") + "Z"


def _clsid(vt: int, body: bytes) -> JsonValue:
    _size(vt, body, 16)
    return str(uuid.UUID(bytes_le=body))


def _error(vt: int, body: bytes) -> JsonValue:
    _size(vt, body, 4)
    return f"0x{struct.unpack('<I', body)[0]:08X}"


def _persisted(vt: int, body: bytes) -> JsonValue:
    """A persisted COM object: VT_STREAMED_OBJECT begins with the class's CLSID
    (OleSaveToStream); VT_STORED_OBJECT is a compound file whose root entry names it."""
    clsid = _streamed_clsid(body) if vt == VT_STREAMED_OBJECT else _stored_clsid(body)
    return {"clsid": clsid, "size": len(body), "base64": base64.b64encode(body).decode("ascii")}


def _streamed_clsid(body: bytes) -> str:
    if len(body) < 16:
        raise BodyError(f"a VT_STREAMED_OBJECT of {len(body)} bytes has no CLSID")
    return str(uuid.UUID(bytes_le=body[:16]))


def _stored_clsid(body: bytes) -> str:
    """[MS-CFB]: the header's sector shift (offset 30) and first directory sector (offset 48);
    the root directory entry's CLSID is at offset 80 of the entry."""
    if len(body) < 512 or not body.startswith(_COMPOUND_FILE):
        raise BodyError("a VT_STORED_OBJECT that is not a compound file")
    shift, directory = struct.unpack_from("<H", body, 30)[0], struct.unpack_from("<I", body, 48)[0]
    if shift not in (9, 12):
        raise BodyError(f"a compound file with sector shift {shift}")
    entry = (directory + 1) << shift
    if entry + 128 > len(body):
        raise BodyError("a compound file whose directory is past its end")
    return str(uuid.UUID(bytes_le=body[entry + 80 : entry + 96]))


_FIXED: dict[int, Any] = {
    **dict.fromkeys(_INTEGERS, _integer),
    **dict.fromkeys(_FLOATS, _float),
    VT_BOOL: _bool,
    VT_CY: _currency,
    VT_DECIMAL: _decimal,
    VT_DATE: _date,
    VT_FILETIME: _filetime,
    VT_CLSID: _clsid,
    VT_ERROR: _error,
}
