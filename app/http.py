"""Request bodies with a size cap, and messages as JSON or as raw bodies with X-Msmq-* headers."""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from collections.abc import Callable, Mapping
from datetime import datetime
from http import HTTPStatus
from types import MappingProxyType
from typing import Any
from urllib.parse import quote, unquote

from fastapi import Request, Response
from pydantic import ValidationError
from pydantic_core import to_json, to_jsonable_python

from app.errors import HttpMqError
from app.message_schemas import MessageIn, header_fields, message_fields
from qm.errors import MqError, MqErrorCode
from qm.model import Message, MessageProperties

OCTET_STREAM = "application/octet-stream"
HEADER_PREFIX = "X-Msmq-"
_JSON_OVERHEAD = 64 * 1024


def body_limit(max_body_bytes: int, content_type: str) -> int:
    """JSON carries the body as text or base64, so it may be larger than the body itself."""
    return max_body_bytes * 2 + _JSON_OVERHEAD if is_json(content_type) else max_body_bytes


def is_json(content_type: str) -> bool:
    media_type = content_type.split(";", 1)[0].strip().lower()
    return media_type == "application/json" or media_type.endswith("+json")


async def read_capped(request: Request, limit: int) -> bytes:
    """Read the request body, refusing it from Content-Length before reading when too large."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise MqError(MqErrorCode.MQ_ERROR_INVALID_PARAMETER, "Content-Length is not a number")
        if int(declared) > limit:
            raise _too_large(int(declared), limit)
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(size, limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(size: int, limit: int) -> HttpMqError:
    return HttpMqError(
        MqErrorCode.MQ_ERROR_INSUFFICIENT_RESOURCES,
        f"the request body has {size} bytes or more; at most {limit} are accepted",
        HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
    )


async def message_from_request(request: Request, max_body_bytes: int) -> MessageProperties:
    """A JSON message (`MessageIn`), or a raw body with properties in X-Msmq-* headers."""
    content_type = request.headers.get("content-type", OCTET_STREAM)
    payload = await read_capped(request, body_limit(max_body_bytes, content_type))
    if not is_json(content_type):
        return _raw_message(payload, request)
    properties = _json_message(payload)
    if len(properties.body) > max_body_bytes:  # the same 413 as a raw body of that size
        raise HttpMqError(
            MqErrorCode.MQ_ERROR_INSUFFICIENT_RESOURCES,
            f"the message body has {len(properties.body)} bytes; at most {max_body_bytes} are accepted",
            HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
        )
    return properties


def _json_message(payload: bytes) -> MessageProperties:
    try:
        document = json.loads(payload)
    except ValueError as error:  # not UTF-8, not JSON, an integer of over 4,300 digits
        raise MqError(
            MqErrorCode.MQ_ERROR_INVALID_PARAMETER, f"the body is not valid JSON: {error}"
        ) from None
    except RecursionError:
        raise MqError(
            MqErrorCode.MQ_ERROR_INVALID_PARAMETER, "the body is not valid JSON: nested too deep"
        ) from None
    try:
        return MessageIn.model_validate(document).properties()
    except ValidationError as error:
        raise MqError(MqErrorCode.MQ_ERROR_INVALID_PARAMETER, _validation_text(error)) from None


def _validation_text(error: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(part) for part in item['loc']) or 'body'}: {item['msg']}" for item in error.errors()
    )


# Sendable properties in X-Msmq-* headers: MessageIn field -> how to read the header text.
SEND_HEADERS: dict[str, Callable[[str], Any]] = {
    "label": unquote,
    "priority": int,
    "body_type": int,
    "message_class": int,
    "correlation_id": str,
    "app_specific": int,
    "extension_base64": str,
    "response_queue": unquote,
    "admin_queue": unquote,
    "acknowledge": int,
    "journal": int,
    "delivery": str.lower,
    "time_to_be_received": int,
    "time_to_reach_queue": int,
}


@functools.cache  # a dozen names, built for every raw send and receive otherwise
def header_name(field: str) -> str:
    return HEADER_PREFIX + "-".join(part.capitalize() for part in field.removesuffix("_base64").split("_"))


_FIELD_OF_HEADER = {header_name(field).lower().encode("latin-1"): field for field in SEND_HEADERS}
"""ASGI header names are lower-case bytes (Starlette's Headers compares them so too)."""


def _sent_headers(request: Request) -> dict[str, str]:
    """The X-Msmq-* headers by field, the first of repeated ones (as `Headers.get`): one pass
    over the headers instead of a search for each of the fourteen names."""
    texts: dict[str, str] = {}
    for key, value in request.headers.raw:
        field = _FIELD_OF_HEADER.get(key)
        if field is not None and field not in texts:
            texts[field] = value.decode("latin-1")
    return texts


def _raw_message(payload: bytes, request: Request) -> MessageProperties:
    texts = _sent_headers(request)
    sent = _header_properties(tuple(sorted(texts.items())))
    # The body goes in as it came: through `body_base64` it was encoded and decoded twice.
    return MessageProperties(**{**sent, "body": payload})


@functools.lru_cache(maxsize=256)
def _header_properties(texts: tuple[tuple[str, str], ...]) -> Mapping[str, Any]:
    """The message properties the X-Msmq-* header texts give (a body aside), as keyword
    arguments of MessageProperties, keyed by the (field, text) pairs in sorted order.
    Remembered: a sender's messages mostly repeat their headers, or have none, and reading and
    validating them cost about 15 us a send. A refusal raises, and is not remembered; what is
    remembered is shared, so it is read-only."""
    by_field = dict(texts)
    fields: dict[str, Any] = {}
    for field, parse in SEND_HEADERS.items():
        text = by_field.get(field)
        if text is None:
            continue
        try:
            fields[field] = parse(text.strip())
        except ValueError:
            raise MqError(
                MqErrorCode.MQ_ERROR_INVALID_PARAMETER, f"header {header_name(field)}: {text!r} is not valid"
            ) from None
    try:
        properties = MessageIn.model_validate(fields).properties()
    except ValidationError as error:
        raise MqError(MqErrorCode.MQ_ERROR_INVALID_PARAMETER, _validation_text(error)) from None
    arguments = {field.name: getattr(properties, field.name) for field in dataclasses.fields(properties)}
    return MappingProxyType(arguments)


def wants_raw(request: Request) -> bool:
    accept = request.headers.get("accept", "")
    return OCTET_STREAM in accept and "application/json" not in accept


def json_response(content: object, status_code: int = 200) -> Response:
    """JSON of our own values, written by pydantic as it writes the documented response model."""
    return Response(to_json(content), status_code=status_code, media_type="application/json")


_TRUE = frozenset(("true", "1", "yes", "on", "t", "y"))


def decode_requested(request: Request) -> bool:
    """`decode=true` (validated by the route's declared parameter, which pydantic reads)."""
    return request.query_params.get("decode", "").lower() in _TRUE


def message_response(
    request: Request,
    message: Message,
    queue: str,
    lock_tag: str | None = None,
    lock_expires_at: datetime | None = None,
    decode: bool = False,
) -> Response:
    """200 with the message as JSON (`MessageOut`, with `decoded` when asked for), or raw with
    `Accept: application/octet-stream` (the body as it is: never decoded)."""
    if not wants_raw(request):
        return json_response(message_fields(message, queue, lock_tag, lock_expires_at, decode))
    response = Response(message.properties.body, media_type=OCTET_STREAM)
    # The X-Msmq-* headers go before the two Starlette adds (Content-Length, Content-Type), where
    # it puts headers given to it; given as ASGI bytes at once, not lower-cased and encoded again.
    response.raw_headers[:0] = [
        (_raw_header_name(name), _header_text(value).encode("latin-1"))
        for name, value in header_fields(message, queue, lock_tag, lock_expires_at).items()
        if value not in (None, "")
    ]
    return response


@functools.cache  # thirty names, encoded for every raw answer otherwise
def _raw_header_name(field: str) -> bytes:
    """The header's name as Starlette writes a name given to it: lower-case latin-1."""
    return header_name(field).lower().encode("latin-1")


_HEADER_SAFE = "{}\\$/:=;@+-_.,"
_NOTHING_TO_ESCAPE = re.compile(r"[A-Za-z0-9~" + re.escape(_HEADER_SAFE) + r"]*")
"""What `quote` leaves as it is (letters, digits, `_.-~` and the safe characters): most
values, and a match costs a fraction of `quote`."""


def _header_text(value: object) -> str:
    # Exact types first (plain ints and texts are most fields of a raw answer; isinstance walks
    # the class's bases), then what else a field holds: bools, the flag and class enums, datetimes.
    if type(value) is int:
        return str(value)  # nothing to escape
    if type(value) is not str:
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int):
            return str(int(value))  # int() for the flag and class enums
        value = str(to_jsonable_python(value))  # datetimes as in JSON
    return value if _NOTHING_TO_ESCAPE.fullmatch(value) else quote(value, safe=_HEADER_SAFE)
