"""A test-only writer of [MS-NRBF] records, one function per record of section 2, so that
samples are built byte by byte from the spec (their expected JSON is written by hand)."""

from __future__ import annotations

import struct


def i32(value: int) -> bytes:
    return struct.pack("<i", value)


def lps(text: str) -> bytes:
    """2.1.1.6 LengthPrefixedString: 7 bits a byte, high bit = more, then UTF-8."""
    data = text.encode("utf-8")
    length, prefix = len(data), bytearray()
    while True:
        byte = length & 0x7F
        length >>= 7
        prefix.append(byte | (0x80 if length else 0))
        if not length:
            return bytes(prefix) + data


def header(root_id: int = 1, header_id: int = -1) -> bytes:
    """2.6.1 SerializationHeaderRecord, version 1.0."""
    return b"\x00" + i32(root_id) + i32(header_id) + i32(1) + i32(0)


END = b"\x0b"
NULL = b"\x0a"


def library(library_id: int, name: str) -> bytes:
    return b"\x0c" + i32(library_id) + lps(name)


def string(object_id: int, text: str) -> bytes:
    """2.5.7 BinaryObjectString."""
    return b"\x06" + i32(object_id) + lps(text)


def reference(object_id: int) -> bytes:
    return b"\x09" + i32(object_id)


def typed(code: int, value: bytes) -> bytes:
    """2.5.1 MemberPrimitiveTyped."""
    return b"\x08" + bytes((code,)) + value


def nulls(count: int) -> bytes:
    """ObjectNullMultiple256 up to 255, ObjectNullMultiple beyond."""
    return b"\x0d" + bytes((count,)) if count < 256 else b"\x0e" + i32(count)


def class_info(object_id: int, name: str, members: list[str]) -> bytes:
    return i32(object_id) + lps(name) + i32(len(members)) + b"".join(lps(member) for member in members)


def member_types(types: list[tuple[int, bytes]]) -> bytes:
    """2.3.1.2: the BinaryTypeEnums, then the AdditionalInfos of those that have one."""
    return bytes(binary_type for binary_type, _ in types) + b"".join(info for _, info in types)


def class_with_members_and_types(
    object_id: int, name: str, members: list[tuple[str, int, bytes]], library_id: int
) -> bytes:
    names = [member[0] for member in members]
    types = [(member[1], member[2]) for member in members]
    return b"\x05" + class_info(object_id, name, names) + member_types(types) + i32(library_id)


def system_class_with_members_and_types(
    object_id: int, name: str, members: list[tuple[str, int, bytes]]
) -> bytes:
    names = [member[0] for member in members]
    types = [(member[1], member[2]) for member in members]
    return b"\x04" + class_info(object_id, name, names) + member_types(types)


def class_with_members(object_id: int, name: str, members: list[str], library_id: int) -> bytes:
    return b"\x03" + class_info(object_id, name, members) + i32(library_id)


def system_class_with_members(object_id: int, name: str, members: list[str]) -> bytes:
    return b"\x02" + class_info(object_id, name, members)


def class_with_id(object_id: int, metadata_id: int) -> bytes:
    return b"\x01" + i32(object_id) + i32(metadata_id)


def array_single_primitive(object_id: int, code: int, values: bytes, length: int) -> bytes:
    return b"\x0f" + i32(object_id) + i32(length) + bytes((code,)) + values


def array_single_object(object_id: int, length: int) -> bytes:
    return b"\x10" + i32(object_id) + i32(length)


def array_single_string(object_id: int, length: int) -> bytes:
    return b"\x11" + i32(object_id) + i32(length)


def binary_array(
    object_id: int,
    kind: int,
    lengths: list[int],
    item_type: int,
    info: bytes = b"",
    bounds: list[int] | None = None,
) -> bytes:
    """2.4.3.1 BinaryArray; `bounds` for the *Offset kinds (3, 4, 5)."""
    data = b"\x07" + i32(object_id) + bytes((kind,)) + i32(len(lengths)) + b"".join(i32(n) for n in lengths)
    if bounds is not None:
        data += b"".join(i32(n) for n in bounds)
    return data + bytes((item_type,)) + info


# BinaryTypeEnumeration and PrimitiveTypeEnumeration codes, for readability of the samples.
PRIMITIVE, STRING, OBJECT, SYSTEM_CLASS, CLASS, OBJECT_ARRAY, STRING_ARRAY, PRIMITIVE_ARRAY = range(8)
BOOLEAN, BYTE, CHAR, DECIMAL, DOUBLE, INT16, INT32, INT64 = 1, 2, 3, 5, 6, 7, 8, 9
SBYTE, SINGLE, TIMESPAN, DATETIME, UINT16, UINT32, UINT64 = 10, 11, 12, 13, 14, 15, 16
