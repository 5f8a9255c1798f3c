"""[MS-NRBF] section 2: the spec's enumerations and the values a stream's records are read
into (bodies/nrbf_records.py reads them; bodies/nrbf.py turns them into JSON)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bodies.primitives import PRIMITIVE_NAMES

# RecordTypeEnumeration, [MS-NRBF] 2.1.2.1
HEADER, CLASS_WITH_ID, SYSTEM_CLASS_WITH_MEMBERS, CLASS_WITH_MEMBERS = 0, 1, 2, 3
SYSTEM_CLASS_WITH_MEMBERS_AND_TYPES, CLASS_WITH_MEMBERS_AND_TYPES = 4, 5
BINARY_OBJECT_STRING, BINARY_ARRAY, MEMBER_PRIMITIVE_TYPED, MEMBER_REFERENCE = 6, 7, 8, 9
OBJECT_NULL, MESSAGE_END, BINARY_LIBRARY, OBJECT_NULL_MULTIPLE_256, OBJECT_NULL_MULTIPLE = 10, 11, 12, 13, 14
ARRAY_SINGLE_PRIMITIVE, ARRAY_SINGLE_OBJECT, ARRAY_SINGLE_STRING = 15, 16, 17
METHOD_CALL, METHOD_RETURN = 21, 22

# BinaryTypeEnumeration, [MS-NRBF] 2.1.2.2
PRIMITIVE, STRING_TYPE, OBJECT, SYSTEM_CLASS, CLASS, OBJECT_ARRAY, STRING_ARRAY, PRIMITIVE_ARRAY = range(8)
BINARY_TYPE_NAMES = ("Primitive", "String", "Object", "SystemClass", "Class", "ObjectArray", "StringArray",
                     "PrimitiveArray")  # fmt: skip
# BinaryArrayTypeEnumeration, [MS-NRBF] 2.4.1.1
ARRAY_KINDS = ("Single", "Jagged", "Rectangular", "SingleOffset", "JaggedOffset", "RectangularOffset")
WITH_BOUNDS = {3, 4, 5}
# MessageFlags, [MS-NRBF] 2.2.1.1
MESSAGE_FLAGS = {
    0x1: "NoArgs", 0x2: "ArgsInline", 0x4: "ArgsIsArray", 0x8: "ArgsInArray", 0x10: "NoContext",
    0x20: "ContextInline", 0x40: "ContextInArray", 0x80: "MethodSignatureInArray",
    0x100: "PropertiesInArray", 0x200: "NoReturnValue", 0x400: "ReturnValueVoid",
    0x800: "ReturnValueInline", 0x1000: "ReturnValueInArray", 0x2000: "ExceptionInArray",
    0x8000: "GenericMethod",
}  # fmt: skip
IN_ARRAY = 0x4 | 0x8 | 0x40 | 0x80 | 0x100 | 0x1000 | 0x2000 | 0x8000
ARGS_INLINE, CONTEXT_INLINE, RETURN_INLINE = 0x2, 0x20, 0x800


@dataclass(frozen=True, slots=True)
class Ref:
    """A MemberReference (or a nested record, replaced by a reference to its ID)."""

    id: int


@dataclass(frozen=True, slots=True)
class Typed:
    """A primitive whose type code travels with it (MemberPrimitiveTyped, ValueWithCode)."""

    code: int
    value: Any


@dataclass(frozen=True, slots=True)
class MemberType:
    """A member's or array item's BinaryTypeEnumeration and its AdditionalInfo."""

    binary_type: int
    info: Any = None

    def label(self) -> str:
        if self.binary_type in (PRIMITIVE, PRIMITIVE_ARRAY):
            name = PRIMITIVE_NAMES.get(self.info, "?")
            return name if self.binary_type == PRIMITIVE else f"{name}[]"
        if self.binary_type == SYSTEM_CLASS:
            return str(self.info)
        if self.binary_type == CLASS:
            return str(self.info[0])
        return ("", "String", "Object", "", "", "Object[]", "String[]")[self.binary_type]


UNTYPED = MemberType(OBJECT)
"""Members of ClassWithMembers and SystemClassWithMembers: each value is a record."""


@dataclass(slots=True)
class ClassMetadata:
    name: str
    library: str | None
    member_names: list[str]
    member_types: list[MemberType] | None


@dataclass(slots=True)
class ClassObject:
    id: int
    metadata: ClassMetadata
    values: list[Any] = field(default_factory=list)


@dataclass(slots=True)
class ArrayObject:
    id: int
    kind: str
    item_type: MemberType
    lengths: list[int]
    lower_bounds: list[int] | None
    values: list[Any] | bytes = field(default_factory=list)


@dataclass(slots=True)
class MethodObject:
    kind: str
    flags: int
    fields: dict[str, Any]
    call_array: int | None = None


@dataclass(slots=True)
class Stream:
    """The records of one stream: objects by ID, the header's root ID, a method record if any."""

    root_id: int
    objects: dict[int, Any]
    method: MethodObject | None
    libraries: dict[int, str]
