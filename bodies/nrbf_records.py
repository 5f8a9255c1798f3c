"""[MS-NRBF] section 2: the records of a stream, read into a table of objects by ID.

The reader is a loop over an explicit stack of containers waiting for member values, so a
hostile nesting costs no Python recursion; every count is checked against what is left of the
body and against `BodyLimits` before anything is allocated. No type is loaded, resolved or
instantiated: class and library names are kept as text.
"""

from __future__ import annotations

from typing import Any

from bodies.limits import BodyLimits
from bodies.nrbf_model import (
    ARGS_INLINE,
    ARRAY_KINDS,
    ARRAY_SINGLE_OBJECT,
    ARRAY_SINGLE_PRIMITIVE,
    ARRAY_SINGLE_STRING,
    BINARY_ARRAY,
    BINARY_LIBRARY,
    BINARY_OBJECT_STRING,
    CLASS,
    CLASS_WITH_ID,
    CLASS_WITH_MEMBERS,
    CLASS_WITH_MEMBERS_AND_TYPES,
    CONTEXT_INLINE,
    HEADER,
    IN_ARRAY,
    MEMBER_PRIMITIVE_TYPED,
    MEMBER_REFERENCE,
    MESSAGE_END,
    METHOD_CALL,
    METHOD_RETURN,
    OBJECT,
    OBJECT_NULL,
    OBJECT_NULL_MULTIPLE,
    OBJECT_NULL_MULTIPLE_256,
    PRIMITIVE,
    PRIMITIVE_ARRAY,
    RETURN_INLINE,
    STRING_TYPE,
    SYSTEM_CLASS,
    SYSTEM_CLASS_WITH_MEMBERS,
    SYSTEM_CLASS_WITH_MEMBERS_AND_TYPES,
    UNTYPED,
    WITH_BOUNDS,
    ArrayObject,
    ClassMetadata,
    ClassObject,
    MemberType,
    MethodObject,
    Ref,
    Stream,
    Typed,
)
from bodies.primitives import NULL, STRING, Cursor
from bodies.result import BodyError


class _Pending:
    """A container still reading values: which slot is next and of what type."""

    __slots__ = ("container", "total", "types", "values")

    def __init__(
        self, container: ClassObject | ArrayObject, types: list[MemberType] | MemberType, total: int
    ):
        self.container = container
        self.types = types
        self.total = total
        self.values: list[Any] | bytes = []

    def next_type(self) -> MemberType:
        return self.types if isinstance(self.types, MemberType) else self.types[len(self.values)]

    def done(self) -> bool:
        return len(self.values) >= self.total


def read_stream(data: bytes, limits: BodyLimits) -> Stream:
    """Every record up to MessageEnd; raises BodyError on anything the spec does not allow."""
    return _Reader(data, limits).run()


class _Reader:
    def __init__(self, data: bytes, limits: BodyLimits) -> None:
        self.cursor = Cursor(data)
        self.limits = limits
        self.objects: dict[int, Any] = {}
        self.metadata: dict[int, ClassMetadata] = {}
        self.libraries: dict[int, str] = {}
        self.stack: list[_Pending] = []
        self.records = 0
        self.items = 0
        self.method: MethodObject | None = None
        self.awaiting_call_array = False

    def run(self) -> Stream:
        cursor = self.cursor
        if cursor.byte() != HEADER:
            raise BodyError("the stream does not start with a SerializationHeaderRecord")
        root_id, _header_id, major, minor = (cursor.int32() for _ in range(4))
        if (major, minor) != (1, 0):
            raise BodyError(f"format version {major}.{minor} is not 1.0")
        while True:
            if self.stack:
                self._fill(self.stack[-1])
            elif self._top_level():
                break
        return Stream(root_id, self.objects, self.method, self.libraries)

    def _count_record(self) -> int:
        self.records += 1
        if self.records > self.limits.max_records:
            raise BodyError(f"more than {self.limits.max_records} records")
        return self.cursor.byte()

    def _top_level(self) -> bool:
        """One record outside any container; True at MessageEnd."""
        record = self._count_record()
        if record == MESSAGE_END:
            return True
        if record in (METHOD_CALL, METHOD_RETURN):
            self._method(record)
            return False
        value = self._record_value(record, top_level=True)
        if not isinstance(value, Ref) and not isinstance(value, str):
            raise BodyError(f"record type {record} cannot stand at the top level")
        return False

    def _fill(self, pending: _Pending) -> None:
        if pending.done():
            self.stack.pop()
            pending.container.values = pending.values
            return
        item_type = pending.next_type()
        if item_type.binary_type == PRIMITIVE:
            self._primitive_items(pending, item_type.info)
            return
        record = self._count_record()
        if record in (OBJECT_NULL_MULTIPLE, OBJECT_NULL_MULTIPLE_256):
            if not isinstance(pending.container, ArrayObject):
                raise BodyError("ObjectNullMultiple outside an array")
            nulls = (
                self.cursor.byte() if record == OBJECT_NULL_MULTIPLE_256 else self.cursor.count("NullCount")
            )
            if nulls > pending.total - len(pending.values):
                raise BodyError("an ObjectNullMultiple runs past the end of its array")
            pending.values.extend([None] * nulls)  # type: ignore[union-attr]
            return
        pending.values.append(self._record_value(record, top_level=False))  # type: ignore[union-attr]

    def _primitive_items(self, pending: _Pending, code: int) -> None:
        """Untyped primitives (MemberPrimitiveUnTyped): one class member, or a whole array."""
        if isinstance(pending.container, ArrayObject):  # all its items at once, as bytes for Byte[]
            pending.values = self.cursor.primitives(code, pending.total)
        else:
            pending.values.append(Typed(code, self.cursor.primitive(code)))  # type: ignore[union-attr]

    def _record_value(self, record: int, top_level: bool) -> Any:
        """A record where a value is expected: the value, None, or a Ref to what it defined."""
        cursor = self.cursor
        while record == BINARY_LIBRARY:
            self._library()
            record = self._count_record()
        if record == OBJECT_NULL and not top_level:
            return None
        if record == MEMBER_REFERENCE and not top_level:
            return Ref(cursor.int32())
        if record == MEMBER_PRIMITIVE_TYPED and not top_level:
            code = cursor.byte()
            if code in (NULL, STRING):
                raise BodyError("MemberPrimitiveTyped of Null or String")
            return Typed(code, cursor.primitive(code))
        if record == BINARY_OBJECT_STRING:
            object_id = cursor.int32()
            text = cursor.length_prefixed_string()
            self._define(object_id, text)
            return text
        if record in _CLASS_READERS:
            return self._container(*_CLASS_READERS[record](self))
        if record in _ARRAY_READERS:
            return self._container(*_ARRAY_READERS[record](self))
        if record == MESSAGE_END:
            raise BodyError("MessageEnd inside an object")
        raise BodyError(f"record type {record} is not allowed here")

    def _define(self, object_id: int, value: Any) -> None:
        if object_id in self.objects:
            raise BodyError(f"object ID {object_id} is defined twice")
        self.objects[object_id] = value

    def _container(self, container: ClassObject | ArrayObject, types: Any, total: int) -> Ref:
        self.items += total
        if self.items > self.limits.max_items:
            raise BodyError(f"more than {self.limits.max_items} members and array items")
        self._define(container.id, container)
        if self.awaiting_call_array and isinstance(container, ArrayObject) and self.method is not None:
            self.method.call_array = container.id
            self.awaiting_call_array = False
        if total:
            if len(self.stack) >= self.limits.max_depth * 4:
                raise BodyError(f"records nested deeper than {self.limits.max_depth * 4}")
            self.stack.append(_Pending(container, types, total))
        return Ref(container.id)

    def _library(self) -> None:
        library_id = self.cursor.int32()
        name = self.cursor.length_prefixed_string()
        if library_id in self.libraries:
            raise BodyError(f"library ID {library_id} is defined twice")
        self.libraries[library_id] = name

    def _library_name(self, library_id: int) -> str:
        name = self.libraries.get(library_id)
        if name is None:
            raise BodyError(f"library ID {library_id} is not defined before its use")
        return name

    def class_info(self) -> tuple[int, str, list[str]]:
        cursor = self.cursor
        object_id = cursor.int32()
        name = cursor.length_prefixed_string()
        count = cursor.count("MemberCount")
        if count > cursor.remaining():
            raise BodyError(f"{count} members cannot fit in what is left of the body")
        return object_id, name, [cursor.length_prefixed_string() for _ in range(count)]

    def member_types(self, count: int) -> list[MemberType]:
        binary_types = list(self.cursor.take(count))
        return [MemberType(binary_type, self.additional_info(binary_type)) for binary_type in binary_types]

    def additional_info(self, binary_type: int) -> Any:
        cursor = self.cursor
        if binary_type in (PRIMITIVE, PRIMITIVE_ARRAY):
            code = cursor.byte()
            if code in (NULL, STRING) or code not in _PRIMITIVE_CODES:
                raise BodyError(f"primitive type {code} is not allowed for a member or array item")
            return code
        if binary_type == SYSTEM_CLASS:
            return cursor.length_prefixed_string()
        if binary_type == CLASS:
            name = cursor.length_prefixed_string()
            return (name, self._library_name(cursor.int32()))
        if binary_type > PRIMITIVE_ARRAY:
            raise BodyError(f"binary type {binary_type} is not defined")
        return None

    def class_record(self, record: int) -> tuple[ClassObject, Any, int]:
        object_id, name, names = self.class_info()
        typed = record in (CLASS_WITH_MEMBERS_AND_TYPES, SYSTEM_CLASS_WITH_MEMBERS_AND_TYPES)
        types = self.member_types(len(names)) if typed else None
        system = record in (SYSTEM_CLASS_WITH_MEMBERS, SYSTEM_CLASS_WITH_MEMBERS_AND_TYPES)
        library = None if system else self._library_name(self.cursor.int32())
        metadata = ClassMetadata(name, library, names, types)
        if object_id in self.metadata:
            raise BodyError(f"class metadata ID {object_id} is defined twice")
        self.metadata[object_id] = metadata
        return ClassObject(object_id, metadata), types or UNTYPED, len(names)

    def class_with_id(self) -> tuple[ClassObject, Any, int]:
        object_id = self.cursor.int32()
        metadata = self.metadata.get(self.cursor.int32())
        if metadata is None:
            raise BodyError("ClassWithId refers to class metadata not defined before it")
        return ClassObject(object_id, metadata), metadata.member_types or UNTYPED, len(metadata.member_names)

    def single_array(self, record: int) -> tuple[ArrayObject, Any, int]:
        object_id = self.cursor.int32()
        length = self.cursor.count("an array's Length")
        if record == ARRAY_SINGLE_PRIMITIVE:
            item_type = MemberType(PRIMITIVE, self.additional_info(PRIMITIVE))
        else:
            item_type = MemberType(OBJECT if record == ARRAY_SINGLE_OBJECT else STRING_TYPE)
        self._fits(length, item_type)
        return ArrayObject(object_id, "Single", item_type, [length], None), item_type, length

    def binary_array(self) -> tuple[ArrayObject, Any, int]:
        cursor = self.cursor
        object_id = cursor.int32()
        kind = cursor.byte()
        if kind >= len(ARRAY_KINDS):
            raise BodyError(f"BinaryArrayTypeEnumeration {kind} is not defined")
        rank = cursor.count("Rank")
        if rank > self.limits.max_rank:
            raise BodyError(f"an array of rank {rank} (at most {self.limits.max_rank})")
        lengths = [cursor.count("an array's length") for _ in range(rank)]
        bounds = [cursor.int32() for _ in range(rank)] if kind in WITH_BOUNDS else None
        binary_type = cursor.byte()
        item_type = MemberType(binary_type, self.additional_info(binary_type))
        total = 1
        for length in lengths:
            total *= length
            if total > self.limits.max_items:
                raise BodyError(f"an array of more than {self.limits.max_items} items")
        self._fits(total, item_type)
        return ArrayObject(object_id, ARRAY_KINDS[kind], item_type, lengths, bounds), item_type, total

    def _fits(self, count: int, item_type: MemberType) -> None:
        """Each item takes a byte at least, except nulls of an ObjectNullMultiple (counted
        against max_items instead): refuse counts the body cannot hold before allocating."""
        if count > self.limits.max_items:
            raise BodyError(f"an array of {count} items (at most {self.limits.max_items})")
        if item_type.binary_type == PRIMITIVE and count > self.cursor.remaining():
            raise BodyError(f"an array of {count} primitives cannot fit in what is left of the body")

    def _method(self, record: int) -> None:
        if self.method is not None:
            raise BodyError("a second method record")
        cursor = self.cursor
        flags = cursor.int32()
        fields: dict[str, Any] = {}
        if record == METHOD_CALL:
            fields["method_name"] = self._value_with_code(string=True)
            fields["type_name"] = self._value_with_code(string=True)
        elif flags & RETURN_INLINE:
            fields["return_value"] = self._value_with_code()
        if flags & CONTEXT_INLINE:
            fields["call_context"] = self._value_with_code(string=True)
        if flags & ARGS_INLINE:
            count = cursor.count("ArrayOfValueWithCode's Length")
            if count > cursor.remaining():
                raise BodyError(f"{count} arguments cannot fit in what is left of the body")
            self.items += count
            if self.items > self.limits.max_items:
                raise BodyError(f"more than {self.limits.max_items} members and array items")
            fields["args"] = [self._value_with_code() for _ in range(count)]
        self.method = MethodObject("call" if record == METHOD_CALL else "return", flags, fields)
        self.awaiting_call_array = bool(flags & IN_ARRAY)

    def _value_with_code(self, string: bool = False) -> Any:
        """[MS-NRBF] 2.2.2.1-2: a type code, then the value (none for Null)."""
        code = self.cursor.byte()
        if string and code != STRING:
            raise BodyError(f"a StringValueWithCode has type {code}, not String")
        if code == NULL:
            return None
        if code == STRING:
            return self.cursor.length_prefixed_string()
        if code not in _PRIMITIVE_CODES:
            raise BodyError(f"primitive type {code} is not defined")
        return Typed(code, self.cursor.primitive(code))


_PRIMITIVE_CODES = frozenset((1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16))
_CLASS_READERS: dict[int, Any] = {
    CLASS_WITH_ID: _Reader.class_with_id,
    SYSTEM_CLASS_WITH_MEMBERS: lambda reader: reader.class_record(SYSTEM_CLASS_WITH_MEMBERS),
    CLASS_WITH_MEMBERS: lambda reader: reader.class_record(CLASS_WITH_MEMBERS),
    SYSTEM_CLASS_WITH_MEMBERS_AND_TYPES: lambda reader: reader.class_record(
        SYSTEM_CLASS_WITH_MEMBERS_AND_TYPES
    ),
    CLASS_WITH_MEMBERS_AND_TYPES: lambda reader: reader.class_record(CLASS_WITH_MEMBERS_AND_TYPES),
}
_ARRAY_READERS: dict[int, Any] = {
    BINARY_ARRAY: _Reader.binary_array,
    ARRAY_SINGLE_PRIMITIVE: lambda reader: reader.single_array(ARRAY_SINGLE_PRIMITIVE),
    ARRAY_SINGLE_OBJECT: lambda reader: reader.single_array(ARRAY_SINGLE_OBJECT),
    ARRAY_SINGLE_STRING: lambda reader: reader.single_array(ARRAY_SINGLE_STRING),
}
