"""What a request may carry, checked at the edge in one place: numbers against the range of
the column they end up in, text against what both stores can hold.

- Lookup IDs are unsigned 64-bit in MSMQ; the store keeps them in a signed 64-bit column, and
  the IDs it hands out stay below 2^59 (the high byte is 7 - priority). An ID from 2^63 to
  2^64-1 is well formed and names no message: it is looked up as 2^63-1, which names none
  either (404 for a message by ID, nothing after it). Anything that is not 1 to 20 ASCII
  digits, or is above 2^64-1, is MQ_ERROR_INVALID_PARAMETER (400).
- IDs kept in 32-bit columns (outgoing queues, trigger invocations, rule positions) are
  declared with their range, so one above 2^31-1 is a 400 like any other out-of-range value.
- A JSON value of another type than the declared one is refused, not converted (`Strict`).
- Text with a NUL character or a lone surrogate is refused (400): PostgreSQL cannot store a
  NUL in text and neither store can encode a lone surrogate, and SQLite and PostgreSQL must
  answer alike. URLs of /api/ are checked by `TextInUrl`, JSON bodies by `Strict` models.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, ClassVar

from fastapi import Path, Query
from pydantic import AfterValidator, BaseModel, ConfigDict, model_validator
from starlette.types import ASGIApp, Receive, Scope, Send

from app.errors import problem
from qm.errors import MqError, MqErrorCode

INT32_MAX = 2**31 - 1
UINT64_MAX = 2**64 - 1
STORED_LOOKUP_ID_MAX = 2**63 - 1
"""The highest value of the store's signed 64-bit lookup-ID column."""

LOOKUP_ID_PATTERN = "^[0-9]{1,20}$"
"""How the OpenAPI document describes a lookup ID in a URL; `parse_lookup_id` decides."""
_LOOKUP_ID = re.compile("[0-9]{1,20}")  # ASCII digits only: str.isdigit() takes '²' and '٣'


def parse_lookup_id(text: str) -> int:
    """A lookup ID from a URL, as the store looks it up."""
    if _LOOKUP_ID.fullmatch(text) is None or int(text) > UINT64_MAX:
        raise MqError(
            MqErrorCode.MQ_ERROR_INVALID_PARAMETER,
            f"{text[:40]!r} is not a lookup ID (an unsigned 64-bit decimal number)",
        )
    return stored_lookup_id(int(text))


def stored_lookup_id(lookup_id: int) -> int:
    """An unsigned 64-bit lookup ID as the store's signed column can hold it (see above)."""
    return min(lookup_id, STORED_LOOKUP_ID_MAX)


OutgoingQueueId = Annotated[
    int, Path(ge=0, le=INT32_MAX, description="The outgoing queue's `id` (a 32-bit number)")
]
InvocationAfter = Annotated[
    int, Query(ge=0, le=INT32_MAX, description="Entries after this id (keyset; a 32-bit number)")
]
RulePosition = Annotated[
    int | None, Query(ge=0, le=INT32_MAX, description="Index in the evaluation order (0: first)")
]


def absent_if_empty(value: str | None) -> str | None:
    """`?transaction=` with nothing after it means no transaction, as leaving it out does."""
    return value or None


AbsentIfEmpty = AfterValidator(absent_if_empty)


def text_refused(text: str, binary: bool = False) -> str | None:
    """Why `text` cannot be stored, or None. `binary`: it is stored as its UTF-8 bytes (a
    message body), where a NUL is just a byte."""
    if not binary and "\x00" in text:
        return "contains a NUL character (U+0000)"
    if text.isascii():  # the usual case, without encoding it
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "is not valid Unicode (a lone surrogate)"
    return None


def _refusal_within(value: Any, binary: bool = False) -> str | None:
    if isinstance(value, str):
        return text_refused(value, binary)
    if isinstance(value, dict):
        value = [*value.keys(), *value.values()]
    if isinstance(value, list | tuple):
        for item in value:
            refused = _refusal_within(item)
            if refused is not None:
                return refused
    return None


_NOT_TEXT = frozenset({int, bool, float})


class StorableText(BaseModel):
    """Input with no text the stores cannot hold (an import line: lenient otherwise)."""

    binary_text: ClassVar[frozenset[str]] = frozenset()
    """Fields stored as their UTF-8 bytes, not as text: a NUL is allowed there."""

    @model_validator(mode="after")
    def _storable_text(self) -> StorableText:
        # One pass after validation (nested Strict models check their own fields).
        for name, value in self.__dict__.items():
            if value is None or value.__class__ in _NOT_TEXT:
                continue  # most fields: a send checks some twenty per message
            refused = _refusal_within(value, name in self.binary_text)
            if refused is not None:
                raise ValueError(f"{name} {refused}")
        return self


class Strict(StorableText):
    """A request body: no unknown fields, no value of another JSON type taken for the declared
    one (`false` is not a quota of 0 KB, `0.0` not `false`), and no text the stores cannot hold."""

    model_config = ConfigDict(extra="forbid", strict=True)


def _url_refusal(scope: Scope) -> str | None:
    query: bytes = scope["query_string"]
    if "\x00" in scope["path"] or b"%00" in query or b"\x00" in query:
        return "the URL contains a NUL character (%00)"
    return None


class TextInUrl:
    """ASGI middleware: a NUL in the path or query of an /api/ request is a 400 problem before
    any route sees it (IDs, queue paths and transaction IDs alike)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/api/"):
            refused = _url_refusal(scope)
            if refused is not None:
                response = problem(MqError(MqErrorCode.MQ_ERROR_INVALID_PARAMETER, refused))
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
