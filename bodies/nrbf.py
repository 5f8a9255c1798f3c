"""A .NET binary serialization stream ([MS-NRBF]) as JSON, without loading a type.

Objects appear where the graph first reaches them, depth first from the root, with `"$id"`;
every later reach of the same object (a shared reference, or a cycle) is `{"$ref": id}`.
Strings are written where they are used. docs/bodies.md shows the shapes.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable
from typing import Any

from bodies.limits import BodyLimits
from bodies.nrbf_model import (
    MESSAGE_FLAGS,
    PRIMITIVE,
    ArrayObject,
    ClassObject,
    MethodObject,
    Ref,
    Stream,
    Typed,
)
from bodies.nrbf_records import read_stream
from bodies.primitives import BYTE, datetime_json, json_primitive, timespan_text, typed
from bodies.result import BodyError, JsonValue

_BOXED = {
    "System.Boolean": 1, "System.Byte": 2, "System.Char": 3, "System.Double": 6, "System.Int16": 7,
    "System.Int32": 8, "System.Int64": 9, "System.SByte": 10, "System.Single": 11, "System.UInt16": 14,
    "System.UInt32": 15, "System.UInt64": 16,
}  # fmt: skip
_GUID_MEMBERS = ("_a", "_b", "_c", "_d", "_e", "_f", "_g", "_h", "_i", "_j", "_k")
_GUID_CODES = (8, 7, 7, *(2,) * 8)


def decode_nrbf(data: bytes, limits: BodyLimits) -> tuple[JsonValue, str]:
    """(the root as JSON, the root's type name); raises BodyError."""
    stream = read_stream(data, limits)
    renderer = _Renderer(stream, limits)
    if stream.method is not None:
        return renderer.method(stream.method), f"Method{stream.method.kind.capitalize()}"
    root = stream.objects.get(stream.root_id)
    if root is None:
        raise BodyError(f"the root object {stream.root_id} is not in the stream")
    return renderer.value(Ref(stream.root_id), 0), _type_name(root)


def _type_name(root: Any) -> str:
    if isinstance(root, str):
        return "System.String"
    if isinstance(root, ClassObject):
        return root.metadata.name
    return f"{root.item_type.label()}[{',' * (len(root.lengths) - 1)}]"


class _Renderer:
    def __init__(self, stream: Stream, limits: BodyLimits) -> None:
        self.objects = stream.objects
        self.limits = limits
        self.emitted: set[int] = set()
        self.chars = 0

    def text(self, value: str) -> str:
        self.chars += len(value)
        if self.chars > self.limits.max_output_chars:
            raise BodyError(f"the decoded strings exceed {self.limits.max_output_chars} characters")
        return value

    def value(self, value: Any, depth: int) -> JsonValue:
        if value is None:
            return None
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, Typed):
            return typed(value.code, value.value)
        if not isinstance(value, Ref):
            raise BodyError("an unexpected value")  # not reached: the reader stores only these
        target = self.objects.get(value.id)
        if target is None:
            raise BodyError(f"a MemberReference to object {value.id}, which the stream does not define")
        if isinstance(target, str):
            return self.text(target)
        if value.id in self.emitted:
            return {"$ref": value.id}
        if depth >= self.limits.max_depth:
            raise BodyError(f"the object graph is nested deeper than {self.limits.max_depth}")
        self.emitted.add(value.id)
        if isinstance(target, ClassObject):
            return self.class_object(target, depth + 1)
        return self.array(target, depth + 1)

    def class_object(self, instance: ClassObject, depth: int) -> dict[str, JsonValue]:
        metadata = instance.metadata
        members = {
            self.text(name): self.value(item, depth)
            for name, item in zip(metadata.member_names, instance.values, strict=False)
        }
        rendered: dict[str, JsonValue] = {
            "$id": instance.id,
            "$class": self.text(metadata.name),
            "$library": None if metadata.library is None else self.text(metadata.library),
            "members": members,
        }
        if metadata.library is None:
            pairs = zip(metadata.member_names, instance.values, strict=False)
            view = _system_value(metadata.name, dict(pairs))
            if view is not None:
                rendered["value"] = view
        return rendered

    def array(self, array: ArrayObject, depth: int) -> dict[str, JsonValue]:
        rendered: dict[str, JsonValue] = {
            "$id": array.id,
            "$array": array.kind,
            "$item_type": self.text(array.item_type.label()),
            "lengths": array.lengths,
        }
        if array.lower_bounds is not None:
            rendered["lower_bounds"] = array.lower_bounds
        primitive = array.item_type.binary_type == PRIMITIVE
        if primitive and array.item_type.info == BYTE:
            rendered["base64"] = self.text(base64.b64encode(bytes(array.values)).decode("ascii"))
            return rendered
        if primitive:
            code = array.item_type.info
            items = [json_primitive(code, item) for item in array.values]
            if code == 3:
                self.text("".join(items))
        else:
            items = [self.value(item, depth) for item in array.values]
        rendered["items"] = _shaped(items, array.lengths) if len(array.lengths) > 1 else items
        return rendered

    def method(self, method: MethodObject) -> dict[str, JsonValue]:
        flags = [name for bit, name in MESSAGE_FLAGS.items() if method.flags & bit]
        rendered: dict[str, JsonValue] = {"$method": method.kind, "flags": flags}
        for name, item in method.fields.items():
            rendered[name] = [self.value(one, 1) for one in item] if name == "args" else self.value(item, 1)
        if method.call_array is not None:
            rendered["call_array"] = self.value(Ref(method.call_array), 1)
        return rendered


def _shaped(items: list[JsonValue], lengths: list[int]) -> list[JsonValue]:
    """A rectangular array's items (row-major) as nested lists, one level per dimension."""
    for length in reversed(lengths[1:]):
        items = [items[start : start + length] for start in range(0, len(items), length)] if length else []
    return items


def _system_value(name: str, members: dict[str, Any]) -> JsonValue:
    """A readable value for a few System types whose members the format shows as they are
    stored (a Guid's eleven fields, a Decimal's four words); None when the members are not
    the expected ones (a class may be named anything)."""
    code = _BOXED.get(name)
    if code is not None:
        return _member(members, "m_value", code, lambda value: json_primitive(code, value))
    if name == "System.Guid":
        return _guid(members)
    if name == "System.DateTime":
        return _member(members, "dateData", 16, datetime_json)
    if name == "System.TimeSpan":
        return _member(members, "_ticks", 9, timespan_text)
    if name == "System.Decimal":
        return _decimal(members)
    return None


def _member(members: dict[str, Any], name: str, code: int, view: Callable[[Any], JsonValue]) -> JsonValue:
    member = members.get(name)
    return view(member.value) if isinstance(member, Typed) and member.code == code else None


def _is(member: Any, code: int) -> bool:
    return isinstance(member, Typed) and member.code == code


def _guid(members: dict[str, Any]) -> str | None:
    fields = [members.get(name) for name in _GUID_MEMBERS]
    if not all(_is(field, code) for field, code in zip(fields, _GUID_CODES, strict=False)):
        return None
    a, b, c, *rest = (field.value for field in fields)  # type: ignore[union-attr]
    raw = (a & 0xFFFFFFFF).to_bytes(4, "little") + (b & 0xFFFF).to_bytes(2, "little")
    raw += (c & 0xFFFF).to_bytes(2, "little") + bytes(rest)
    return str(uuid.UUID(bytes_le=raw))


def _decimal(members: dict[str, Any]) -> str | None:
    """System.Decimal's flags (sign bit 31, scale in bits 16-23), hi, mid and lo words."""
    words = [members.get(name) for name in ("flags", "hi", "mid", "lo")]
    if not all(_is(word, 8) for word in words):
        return None
    flags, hi, mid, lo = (word.value & 0xFFFFFFFF for word in words)  # type: ignore[union-attr]
    scale = (flags >> 16) & 0xFF
    if scale > 28:
        return None
    digits = str((hi << 64) | (mid << 32) | lo).rjust(scale + 1, "0")
    text = f"{digits[:-scale]}.{digits[-scale:]}" if scale else digits
    return ("-" if flags & 0x80000000 else "") + text
