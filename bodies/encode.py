"""Bodies a .NET or COM receiver reads with its default formatter: what a send may ask for.

`dotnet-xml-string` is what XmlMessageFormatter writes for a `string` (BodyType 0);
`activex` is a VARIANT value as ActiveXMessageFormatter and COM's MSMQ objects write it, the
VARIANT type being the BodyType. Each raises EncodeError for a value the type cannot carry.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import struct
import uuid
from datetime import datetime, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any

from bodies.variant import BYTE_VECTORS, VT_ARRAY, VT_BSTR, VT_LPSTR, VT_LPWSTR, VT_NAMES, VT_VECTOR

_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_OLE_EPOCH = datetime(1899, 12, 30)  # noqa: DTZ001 - OLE dates are the sender's local time
_INTEGERS = {16: ("<b", "VT_I1"), 17: ("<B", "VT_UI1"), 2: ("<h", "VT_I2"), 18: ("<H", "VT_UI2"),
             3: ("<i", "VT_I4"), 19: ("<I", "VT_UI4"), 22: ("<i", "VT_INT"), 23: ("<I", "VT_UINT"),
             20: ("<q", "VT_I8"), 21: ("<Q", "VT_UI8")}  # fmt: skip
_VT_BY_NAME = {name: vt for vt, name in VT_NAMES.items()} | {
    "VT_UI1|VT_VECTOR": VT_VECTOR | 17,
    "VT_VECTOR|VT_UI1": VT_VECTOR | 17,
    "VT_UI1|VT_ARRAY": VT_ARRAY | 17,
    "VT_ARRAY|VT_UI1": VT_ARRAY | 17,
}


class EncodeError(ValueError):
    """A value the asked format cannot carry."""


def dotnet_xml_string(text: str) -> bytes:
    """`<?xml version="1.0"?>` and `<string>…</string>` in UTF-8, as XmlSerializer writes a
    string; carriage returns as `&#xD;` so that they survive XML's line-end normalisation."""
    if _NOT_XML.search(text):
        raise EncodeError("the text has characters XML 1.0 cannot carry")
    escaped = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("\r", "&#xD;")
    return f'<?xml version="1.0"?>\r\n<string>{escaped}</string>'.encode()


def vt_number(vt: str | int) -> int:
    """A VARIANT type by name (`VT_BSTR`, `VT_UI1|VT_VECTOR`) or number."""
    if isinstance(vt, int) and not isinstance(vt, bool):
        number = vt
    else:
        name = str(vt).strip().upper().replace(" ", "")
        number = _VT_BY_NAME.get(name, -1)
        if number < 0:
            raise EncodeError(f"{str(vt)[:40]!r} is not a VARIANT type name")
    if number not in _ENCODERS and number not in BYTE_VECTORS:
        raise EncodeError(f"VARIANT type {number} is not one a send can ask for")
    return number


def activex(vt: int, value: Any) -> bytes:
    """The body bytes of `value` as VARIANT type `vt` (the message's BodyType)."""
    if vt in BYTE_VECTORS:
        return _base64(value)
    encoder = _ENCODERS.get(vt)
    if encoder is None:
        raise EncodeError(f"VARIANT type {vt} is not one a send can ask for")
    body: bytes = encoder(vt, value)
    return body


def _base64(value: Any) -> bytes:
    if not isinstance(value, str):
        raise EncodeError("a byte array is given as base64 text")
    try:
        return base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise EncodeError("not valid base64") from None


def _text(vt: int, value: Any) -> bytes:
    if not isinstance(value, str):
        raise EncodeError(f"{VT_NAMES[vt]} carries text")
    if vt == VT_LPSTR:
        try:
            return value.encode("cp1252")
        except UnicodeEncodeError:
            raise EncodeError("VT_LPSTR text must be Windows-1252") from None
    try:
        return value.encode("utf-16-le")
    except UnicodeEncodeError:
        raise EncodeError("the text has an unpaired surrogate") from None


def _integer(vt: int, value: Any) -> bytes:
    layout, name = _INTEGERS[vt]
    number = _whole(value)
    try:
        return struct.pack(layout, number)
    except struct.error:
        raise EncodeError(f"{number} does not fit in {name}") from None


def _whole(value: Any) -> int:
    if isinstance(value, bool):
        raise EncodeError("a number is expected, not a boolean")
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"-?[0-9]{1,20}", value.strip()):
        return int(value)
    raise EncodeError("an integer is expected (64-bit ones may be given as decimal text)")


def _float(vt: int, value: Any) -> bytes:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise EncodeError("a number is expected")
    number = float(value)
    if vt == 4 and math.isfinite(number) and abs(number) > 3.4028234663852886e38:
        raise EncodeError(f"{number} does not fit in VT_R4")
    return struct.pack("<f" if vt == 4 else "<d", number)


def _bool(vt: int, value: Any) -> bytes:
    if not isinstance(value, bool):
        raise EncodeError("VT_BOOL carries true or false")
    return b"\xff\xff" if value else b"\x00\x00"


def _currency(vt: int, value: Any) -> bytes:
    """CY: ten-thousandths in a 64-bit integer; more than four decimals is refused, not rounded."""
    try:
        amount = Decimal(str(value)) if not isinstance(value, bool) else None
    except InvalidOperation:
        amount = None
    if amount is None or not amount.is_finite():
        raise EncodeError("VT_CY carries a decimal number")
    scaled = amount * 10000
    if scaled != scaled.to_integral_value():
        raise EncodeError("VT_CY has four decimal places at most")
    try:
        return struct.pack("<q", int(scaled))
    except struct.error:
        raise EncodeError("the amount does not fit in VT_CY") from None


def _date(vt: int, value: Any) -> bytes:
    """DATE from an ISO 8601 date-time without a zone (OLE dates are local time)."""
    try:
        moment = datetime.fromisoformat(str(value))
    except ValueError:
        raise EncodeError("VT_DATE carries an ISO 8601 date-time") from None
    if moment.tzinfo is not None:
        raise EncodeError("VT_DATE has no time zone: give the receiver's local time without one")
    delta = (moment - _OLE_EPOCH) / timedelta(days=1)
    whole = math.floor(delta)
    fraction = delta - whole
    days = delta if whole >= 0 else whole - fraction  # before the epoch the time of day stays positive
    return struct.pack("<d", days)


def _clsid(vt: int, value: Any) -> bytes:
    try:
        return uuid.UUID(str(value)).bytes_le
    except ValueError:
        raise EncodeError("VT_CLSID carries a GUID") from None


_ENCODERS: dict[int, Any] = {
    VT_BSTR: _text,
    VT_LPWSTR: _text,
    VT_LPSTR: _text,
    **dict.fromkeys(_INTEGERS, _integer),
    4: _float,
    5: _float,
    11: _bool,
    6: _currency,
    7: _date,
    72: _clsid,
}
