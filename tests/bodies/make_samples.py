"""Writes the sample bodies of tests/bodies/samples/ (run: python -m tests.bodies.make_samples).

Each NRBF sample is laid out record by record as [MS-NRBF] section 2 defines them and as
.NET Framework's BinaryFormatter lays out these types; the expected JSON beside each sample
was written by hand from the spec, not by running the decoder.
"""

from __future__ import annotations

import struct
import uuid
from datetime import datetime
from pathlib import Path

from tests.bodies.nrbf_builder import (
    BOOLEAN,
    BYTE,
    CHAR,
    CLASS,
    DATETIME,
    DECIMAL,
    DOUBLE,
    END,
    INT16,
    INT32,
    INT64,
    NULL,
    OBJECT,
    PRIMITIVE,
    PRIMITIVE_ARRAY,
    SBYTE,
    SINGLE,
    STRING,
    STRING_ARRAY,
    SYSTEM_CLASS,
    TIMESPAN,
    UINT16,
    UINT32,
    UINT64,
    array_single_object,
    array_single_primitive,
    array_single_string,
    binary_array,
    class_with_id,
    class_with_members,
    class_with_members_and_types,
    header,
    i32,
    library,
    lps,
    nulls,
    reference,
    string,
    system_class_with_members_and_types,
    typed,
)  # fmt: skip

SAMPLES = Path(__file__).parent / "samples"
MSCORLIB = "mscorlib, Version=4.0.0.0, Culture=neutral, PublicKeyToken=b77a5c561934e089"
SHOP = "Shop, Version=1.0.0.0, Culture=neutral, PublicKeyToken=null"
TICKS_2024 = (datetime(2024, 1, 2, 3, 4, 5) - datetime(1, 1, 1)) // (
    datetime(1, 1, 1, 0, 0, 1) - datetime(1, 1, 1)
)
"""Seconds from 0001-01-01 to 2024-01-02T03:04:05 (times 10**7 below, plus half a second)."""


def q(value: int) -> bytes:
    return struct.pack("<q", value)


def nrbf_samples() -> dict[str, bytes]:
    ticks = TICKS_2024 * 10_000_000 + 5_000_000
    return {
        "nrbf-string": header() + string(1, "Grüße, MSMQ") + END,
        "nrbf-int32": header()
        + system_class_with_members_and_types(1, "System.Int32", [("m_value", PRIMITIVE, bytes((INT32,)))])
        + i32(42)
        + END,
        "nrbf-datetime": header()
        + system_class_with_members_and_types(
            1,
            "System.DateTime",
            [("ticks", PRIMITIVE, bytes((INT64,))), ("dateData", PRIMITIVE, bytes((UINT64,)))],
        )
        + q(ticks)
        + struct.pack("<Q", ticks | (1 << 62))
        + END,
        "nrbf-guid": header()
        + system_class_with_members_and_types(
            1,
            "System.Guid",
            [
                ("_a", PRIMITIVE, bytes((INT32,))),
                ("_b", PRIMITIVE, bytes((INT16,))),
                ("_c", PRIMITIVE, bytes((INT16,))),
            ]
            + [(f"_{name}", PRIMITIVE, bytes((BYTE,))) for name in "defghijk"],
        )
        + i32(0x00112233)
        + struct.pack("<hh", 0x4455, 0x6677)
        + bytes.fromhex("8899aabbccddeeff")
        + END,
        "nrbf-decimal": header()
        + system_class_with_members_and_types(
            1, "System.Decimal", [(name, PRIMITIVE, bytes((INT32,))) for name in ("flags", "hi", "lo", "mid")]
        )
        + i32(-0x7FFE0000)  # 0x80020000: negative, scale 2
        + i32(0)
        + i32(12345)
        + i32(0)
        + END,
        "nrbf-class-list": _class_with_list(),
        "nrbf-dictionary": _dictionary(),
        "nrbf-jagged": header()
        + binary_array(1, 1, [2], PRIMITIVE_ARRAY, bytes((INT32,)))
        + array_single_primitive(2, INT32, i32(1) + i32(2), 2)
        + reference(3)
        + array_single_primitive(3, INT32, i32(3), 1)
        + END,
        "nrbf-rectangular": header()
        + binary_array(1, 2, [2, 3], PRIMITIVE, bytes((INT32,)))
        + b"".join(i32(n) for n in range(1, 7))
        + END,
        "nrbf-offset-strings": header()
        + binary_array(1, 3, [3], STRING, bounds=[5])
        + string(2, "five")
        + NULL
        + reference(2)
        + END,
        "nrbf-cycle": _cycle(),
        "nrbf-untyped-members": header()
        + library(2, SHOP)
        + class_with_members(1, "Shop.Point", ["X", "Y"], 2)
        + typed(INT32, i32(1))
        + typed(INT32, i32(-2))
        + END,
        "nrbf-primitives": _primitives(),
        "nrbf-bytes-and-nulls": header()
        + array_single_object(1, 300)
        + array_single_primitive(2, BYTE, b"\x00\x01\xfe\xff", 4)
        + nulls(299)
        + END,
        "nrbf-truncated": (header() + string(1, "cut"))[:-2],
        "nrbf-undefined-reference": header() + array_single_object(1, 1) + reference(9) + END,
    }


def _class_with_list() -> bytes:
    """Shop.Order { Id: int, Customer: Shop.Customer, Lines: List<string> } with its Customer
    and List defined after it (forward MemberReferences, as BinaryFormatter writes them)."""
    list_type = f"System.Collections.Generic.List`1[[System.String, {MSCORLIB}]]"
    return (
        header()
        + library(2, SHOP)
        + class_with_members_and_types(
            1,
            "Shop.Order",
            [
                ("Id", PRIMITIVE, bytes((INT32,))),
                ("Customer", CLASS, lps("Shop.Customer") + i32(2)),
                ("Lines", SYSTEM_CLASS, lps(list_type)),
            ],
            2,
        )
        + i32(7)
        + reference(3)
        + reference(4)
        + class_with_members_and_types(3, "Shop.Customer", [("Name", STRING, b"")], 2)
        + string(5, "Ada")
        + system_class_with_members_and_types(
            4,
            list_type,
            [
                ("_items", STRING_ARRAY, b""),
                ("_size", PRIMITIVE, bytes((INT32,))),
                ("_version", PRIMITIVE, bytes((INT32,))),
            ],
        )
        + reference(6)
        + i32(2)
        + i32(2)
        + array_single_string(6, 4)
        + string(7, "widget")
        + string(8, "gadget")
        + nulls(2)
        + END
    )


def _dictionary() -> bytes:
    """Dictionary<string, object> { "count": 7, "name": "widget" } as BinaryFormatter writes it."""
    string_type = f"System.String, {MSCORLIB}"
    object_type = f"System.Object, {MSCORLIB}"
    pair = f"System.Collections.Generic.KeyValuePair`2[[{string_type}],[{object_type}]]"
    comparer = f"System.Collections.Generic.GenericEqualityComparer`1[[{string_type}]]"
    return (
        header()
        + system_class_with_members_and_types(
            1,
            f"System.Collections.Generic.Dictionary`2[[{string_type}],[{object_type}]]",
            [
                ("Version", PRIMITIVE, bytes((INT32,))),
                ("Comparer", SYSTEM_CLASS, lps(comparer)),
                ("HashSize", PRIMITIVE, bytes((INT32,))),
                ("KeyValuePairs", SYSTEM_CLASS, lps(pair + "[]")),
            ],
        )
        + i32(2)
        + reference(2)
        + i32(3)
        + reference(3)
        + system_class_with_members_and_types(2, comparer, [])
        + binary_array(3, 0, [2], SYSTEM_CLASS, lps(pair))
        + system_class_with_members_and_types(4, pair, [("key", STRING, b""), ("value", OBJECT, b"")])
        + string(5, "count")
        + typed(INT32, i32(7))
        + class_with_id(6, 4)
        + string(7, "name")
        + string(8, "widget")
        + END
    )


def _cycle() -> bytes:
    """Two Shop.Node objects: a.Next = b, b.Next = a (a cycle), a.Other = b (shared)."""
    node = [("Name", STRING, b""), ("Next", CLASS, lps("Shop.Node") + i32(2)), ("Other", OBJECT, b"")]
    return (
        header()
        + library(2, SHOP)
        + class_with_members_and_types(1, "Shop.Node", node, 2)
        + string(3, "a")
        + reference(4)
        + reference(4)
        + class_with_id(4, 1)
        + string(5, "b")
        + reference(1)
        + NULL
        + END
    )


def _primitives() -> bytes:
    """One member of every PrimitiveTypeEnumeration value a member can have (2.1.2.3)."""
    members: list[tuple[str, int, bytes]] = []
    values = b""
    for name, code, value in (
        ("Boolean", BOOLEAN, b"\x01"),
        ("Byte", BYTE, b"\xff"),
        ("Char", CHAR, "€".encode()),
        ("Decimal", DECIMAL, lps("-79228162514264337593543950335")),
        ("Double", DOUBLE, struct.pack("<d", 0.1)),
        ("Int16", INT16, struct.pack("<h", -32768)),
        ("Int32", INT32, i32(-1)),
        ("Int64", INT64, q(-9007199254740993)),
        ("SByte", SBYTE, b"\x80"),
        ("Single", SINGLE, struct.pack("<f", 1.5)),
        ("TimeSpan", TIMESPAN, q(-(93784 * 10_000_000 + 5_000_000))),
        ("DateTime", DATETIME, struct.pack("<Q", 0)),
        ("UInt16", UINT16, struct.pack("<H", 65535)),
        ("UInt32", UINT32, struct.pack("<I", 4294967295)),
        ("UInt64", UINT64, struct.pack("<Q", 18446744073709551615)),
    ):
        members.append((name, PRIMITIVE, bytes((code,))))
        values += value
    return (
        header()
        + library(2, SHOP)
        + class_with_members_and_types(1, "Shop.AllPrimitives", members, 2)
        + values
        + END
    )


def xml_samples() -> dict[str, bytes]:
    order = (
        '<?xml version="1.0"?>\r\n'
        '<Order xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
        'xmlns:xsd="http://www.w3.org/2001/XMLSchema" Status="open">\r\n'
        "  <Id>42</Id>\r\n"
        "  <Customer>\r\n    <Name>Ada &amp; Co</Name>\r\n  </Customer>\r\n"
        "  <Lines>\r\n    <string>widget</string>\r\n    <string>gadget</string>\r\n  </Lines>\r\n"
        '  <Note xsi:nil="true" />\r\n'
        "</Order>"
    )
    return {
        "xml-string": b'<?xml version="1.0"?>\r\n<string>Hello World</string>',
        "xml-order-utf8": order.encode(),
        "xml-order-utf8-bom": b"\xef\xbb\xbf" + order.encode(),
        "xml-order-utf16": order.replace('"1.0"?>', '"1.0" encoding="utf-16"?>').encode("utf-16"),
        "xml-doctype": b'<?xml version="1.0"?><!DOCTYPE x [<!ENTITY e "boom">]><x>&e;</x>',
        "xml-soap": b'<s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/"><s:Header>'
        b"<Action>urn:order</Action></s:Header><s:Body><Order><Id>1</Id></Order></s:Body></s:Envelope>",
        "json-nservicebus": b'{"OrderId":"o-1","Total":12.5}',
        "json-nservicebus-bad-headers": b'{"OrderId":"o-2"}',
        "text-plain": "just text, ünïcödé".encode(),
        "binary-zero": b"\xff\x00\x01",
    }


NSERVICEBUS_HEADERS = (
    '<?xml version="1.0"?>\r\n'
    '<ArrayOfHeaderInfo xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
    'xmlns:xsd="http://www.w3.org/2001/XMLSchema">\r\n'
    "  <HeaderInfo>\r\n    <Key>NServiceBus.MessageId</Key>\r\n"
    "    <Value>9b3c2a4e-0f5d-4a7b-9c1e-2d3f4a5b6c7d</Value>\r\n  </HeaderInfo>\r\n"
    "  <HeaderInfo>\r\n    <Key>NServiceBus.EnclosedMessageTypes</Key>\r\n"
    "    <Value>Shop.Messages.PlaceOrder, Shop.Messages</Value>\r\n  </HeaderInfo>\r\n"
    "  <HeaderInfo>\r\n    <Key>NServiceBus.ContentType</Key>\r\n    <Value>application/json</Value>\r\n"
    "  </HeaderInfo>\r\n"
    "  <HeaderInfo>\r\n    <Key>NServiceBus.RelatedTo</Key>\r\n  </HeaderInfo>\r\n"
    "</ArrayOfHeaderInfo>"
)


def extensions() -> dict[str, bytes]:
    return {
        "json-nservicebus": NSERVICEBUS_HEADERS.encode(),
        "json-nservicebus-bad-headers": NSERVICEBUS_HEADERS.encode()[:200],
    }


def variant_samples() -> dict[str, bytes]:
    persisted = uuid.UUID("0002df01-0000-0000-c000-000000000046").bytes_le + b"\x01\x02\x03"
    return {
        "vt-bstr": "Hello from VB6 ✓".encode("utf-16-le"),
        "vt-lpwstr": "terminated\x00".encode("utf-16-le"),
        "vt-lpstr": b"caf\xe9 \x80 \x81\x00",
        "vt-i4": i32(-123456),
        "vt-ui8": struct.pack("<Q", 2**64 - 1),
        "vt-r8": struct.pack("<d", 2.5),
        "vt-bool": b"\xff\xff",
        "vt-cy": q(-1234567),
        "vt-date": struct.pack("<d", -1.75),
        "vt-clsid": uuid.UUID("00112233-4455-6677-8899-aabbccddeeff").bytes_le,
        "vt-ui1-vector": b"\x00\x01\x02",
        "vt-streamed-object": persisted,
        "vt-i4-wrong-size": b"\x01\x02",
    }


def main() -> None:
    for name, data in {**nrbf_samples(), **xml_samples(), **variant_samples()}.items():
        (SAMPLES / f"{name}.bin").write_bytes(data)
    for name, data in extensions().items():
        (SAMPLES / f"{name}.ext").write_bytes(data)
    for spec in SAMPLES.glob("*.hex"):  # [MS-NRBF] section 3's request and response, as printed
        spec.with_suffix(".bin").write_bytes(bytes.fromhex(spec.read_text()))


if __name__ == "__main__":
    main()
