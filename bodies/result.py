"""What the body decoder answers: one frozen value, JSON-compatible throughout."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

Format = Literal["text", "xml", "json", "nrbf", "variant", "binary"]
FORMATS: tuple[Format, ...] = ("text", "xml", "json", "nrbf", "variant", "binary")

JsonValue = Any
"""None, bool, int, float, str, lists and str-keyed dicts of these (mypy has no recursive alias
that pydantic and json both accept)."""


@dataclass(frozen=True, slots=True)
class DecodedBody:
    """A body as the decoder understood it.

    `format` says how `value` reads: `text` a string; `xml` a JSON view of the document (its
    text in `text`); `json` the parsed document; `nrbf` the object graph (docs/bodies.md);
    `variant` the VARIANT's value; `binary` nothing recognised (`reason` says why, `value` None).
    `type` names what was recognised (`VT_BSTR`, the NRBF root's class, the XML root element).
    """

    format: Format
    value: JsonValue = None
    type: str | None = None
    encoding: str | None = None
    text: str | None = None
    headers: Mapping[str, str | None] | None = None
    envelope: str | None = None
    reason: str | None = None
    warnings: tuple[str, ...] = field(default=())

    def as_json(self) -> dict[str, JsonValue]:
        """The fields as a JSON object, in this order, None ones included."""
        return {
            "format": self.format,
            "type": self.type,
            "encoding": self.encoding,
            "value": self.value,
            "text": self.text,
            "headers": None if self.headers is None else dict(self.headers),
            "envelope": self.envelope,
            "reason": self.reason,
            "warnings": list(self.warnings),
        }


class BodyError(Exception):
    """A body that does not read as the format tried: the decoder falls back with the reason."""
