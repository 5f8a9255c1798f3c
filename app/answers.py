"""What each REST operation answers, as the OpenAPI document declares it.

A route lists its success answers and the MQ_ERROR problems it can answer; `answers` groups the
problems by the HTTP status that app/errors.py's one table gives their codes, one named example
each, so the document cannot declare a status the app would not send for that code.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from app.errors import PROBLEM_JSON, status_of
from app.http import HEADER_PREFIX, SEND_HEADERS, header_name
from app.message_schemas import MessageIn, MessageOut
from qm.errors import MqErrorCode

Responses = dict[int | str, dict[str, Any]]
"""A route's `responses=`, as FastAPI takes it."""
Success = dict[int, dict[str, Any]]
"""Success answers by status."""
PROBLEM_REF = {"$ref": "#/components/schemas/Problem"}


@dataclass(frozen=True)
class Problem:
    """One way an operation fails: its MQ_ERROR code and a detail as the app writes it."""

    code: MqErrorCode
    detail: str
    status: HTTPStatus | None = None
    """Only where the app answers other than the table (a body too large: 413)."""

    @property
    def http_status(self) -> HTTPStatus:
        return self.status or status_of(self.code)

    def body(self) -> dict[str, Any]:
        return {
            "type": f"urn:msmq-gateway:error:{self.code.name}",
            "title": self.code.name,
            "status": int(self.http_status),
            "detail": self.detail,
            "mq_error": self.code.name,
            "mq_error_code": self.code.hex,
        }


Problems = Problem | Iterable["Problems"]


def answers(success: Success, *problems: Problems, store: bool = True) -> Responses:
    """`responses=` of a route: its success answers, then its problems grouped by status.
    `store`: the operation reads or writes the message store, so it answers 503 when the store
    is unavailable."""
    listed = list(_flat(problems))
    if store:
        listed.append(STORE_UNAVAILABLE)
    by_status: dict[int, list[Problem]] = {}
    for problem in listed:
        same = by_status.setdefault(int(problem.http_status), [])
        if problem not in same:
            same.append(problem)
    responses: Responses = {status: response for status, response in success.items()}
    for status, same in sorted(by_status.items()):
        responses[status] = _problem_response(same)
    return responses


def _flat(problems: Iterable[Problems]) -> Iterable[Problem]:
    for item in problems:
        if isinstance(item, Problem):
            yield item
        else:
            yield from _flat(item)


def _problem_response(problems: list[Problem]) -> dict[str, Any]:
    names = list(dict.fromkeys(problem.code.name for problem in problems))
    examples: dict[str, Any] = {}
    for problem in problems:
        key = problem.code.name
        number = 2
        while key in examples:
            key, number = f"{problem.code.name} ({number})", number + 1
        examples[key] = {"summary": problem.detail, "value": problem.body()}
    return {
        "description": " or ".join(names),
        "content": {PROBLEM_JSON: {"schema": PROBLEM_REF, "examples": examples}},
    }


def ok(value: Any, description: str = "Success", status: int = 200) -> Success:
    """A JSON success answer with its example (its schema comes from the route's return type)."""
    return {status: {"description": description, "content": {"application/json": {"example": value}}}}


def done(description: str = "Done; no body") -> Success:
    return {204: {"description": description}}


# -- problems ---------------------------------------------------------------------------

E = MqErrorCode
INVALID_PARAMETER = Problem(
    E.MQ_ERROR_INVALID_PARAMETER, "timeout_ms: Input should be a valid integer, unable to parse string"
)
STORE_UNAVAILABLE = Problem(E.MQ_ERROR_SERVICE_NOT_AVAILABLE, "the message store is unavailable")
ILLEGAL_PATH = Problem(
    E.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME, "'private$/bad,name': the queue name contains the character ','"
)
ILLEGAL_FORMAT_NAME = Problem(
    E.MQ_ERROR_ILLEGAL_FORMATNAME, "'PRIVATE=5b0c7e1a\\\\x': PRIVATE= needs qm-guid\\\\hex-id"
)
NOT_LOCAL = Problem(
    E.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION,
    "'DIRECT=OS:gw02\\\\private$\\\\orders' does not designate a queue of this gateway",
)
QUEUE_NOT_FOUND = Problem(E.MQ_ERROR_QUEUE_NOT_FOUND, "no queue private$/orders")
QUEUE_PATH = (ILLEGAL_PATH, ILLEGAL_FORMAT_NAME, NOT_LOCAL, QUEUE_NOT_FOUND)
"""What a queue named in the URL can fail with."""
ADMINISTERED = Problem(
    E.MQ_ERROR_ACCESS_DENIED,
    "system$;deadletter belongs to the queue manager; it can be read and purged only",
)
QUEUE_EXISTS = Problem(E.MQ_ERROR_QUEUE_EXISTS, "private$/orders already exists")
ILLEGAL_QUEUE_SETTING = Problem(E.MQ_ERROR_ILLEGAL_PROPERTY_VALUE, "a queue label has at most 124 characters")
TRANSACTION_SEQUENCE = Problem(
    E.MQ_ERROR_TRANSACTION_SEQUENCE,
    "no active transaction '3f2b8c1d9e0a4b5c6d7e8f9012345678' (unknown, finished, or timed out)",
)
TRANSACTION_USAGE = Problem(
    E.MQ_ERROR_TRANSACTION_USAGE,
    "private$/orders is not transactional; receive from it without a transaction",
)
IN_TRANSACTION = (TRANSACTION_SEQUENCE, TRANSACTION_USAGE)
"""What the `transaction` parameter can fail with."""
MESSAGE_NOT_FOUND = Problem(E.MQ_ERROR_MESSAGE_NOT_FOUND, "private$/orders: no next message to lookup ID 5")
LOCKED = Problem(
    E.MQ_ERROR_MESSAGE_LOCKED_UNDER_TRANSACTION,
    "message 72057594037927940 is locked by a transaction or a two-phase read",
)
PEEK_LOCKED = Problem(
    E.MQ_ERROR_TRANSACTION_USAGE, "message 72057594037927940 is locked by a transaction or a two-phase read"
)
ALREADY_RECEIVED = Problem(
    E.MQ_ERROR_MESSAGE_ALREADY_RECEIVED,
    "the message under cursor 9c1e2f3a4b5c6d7e8f901234 was removed; move on with peek next",
)
NO_CURSOR = Problem(
    E.MQ_ERROR_INVALID_HANDLE, "no open cursor '9c1e2f3a4b5c6d7e8f901234' (closed or idle too long)"
)
CURSOR_QUEUE_GONE = Problem(
    E.MQ_ERROR_QUEUE_NOT_FOUND, "the queue of cursor 9c1e2f3a4b5c6d7e8f901234 was deleted"
)
ILLEGAL_CURSOR_ACTION = Problem(
    E.MQ_ERROR_ILLEGAL_CURSOR_ACTION, "peek next needs a cursor positioned by peek current first"
)
LOCK_GONE = Problem(
    E.MQ_ERROR_MESSAGE_ALREADY_RECEIVED,
    "the message of lock '72057594037927940-9f3c…' is gone: it was received (or the tag never existed)",
)
LOCK_NOT_HELD = Problem(
    E.MQ_ERROR_TRANSACTION_SEQUENCE, "lock '72057594037927940-9f3c…' is not held: it was ended or it expired"
)
NOT_A_LOCK_TAG = Problem(E.MQ_ERROR_INVALID_HANDLE, "'x' is not a lock tag of this gateway")
ILLEGAL_PROPERTY = Problem(E.MQ_ERROR_ILLEGAL_PROPERTY_VALUE, "priority is 9; it must be between 0 and 7")
LABEL_TOO_LONG = Problem(E.MQ_ERROR_LABEL_TOO_LONG, "the label has 251 characters; at most 250")
PROPERTY_SIZE = Problem(E.MQ_ERROR_ILLEGAL_PROPERTY_SIZE, "a correlation ID has 20 bytes, not 3")
READ_ONLY = Problem(
    E.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION,
    "private$/orders;journal is read-only: only the queue manager writes journal and dead-letter queues",
)
BODY_TOO_LARGE = Problem(
    E.MQ_ERROR_INSUFFICIENT_RESOURCES,
    "the request body has 5000000 bytes or more; at most 4194304 are accepted",
    HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
)
QUOTA = Problem(E.MQ_ERROR_INSUFFICIENT_RESOURCES, "the queue manager is throttled or its quota is reached")
OUTGOING_NOT_FOUND = Problem(E.MQ_ERROR_QUEUE_NOT_FOUND, "no outgoing queue 7")
OUTGOING_NOT_EMPTY = Problem(
    E.MQ_ERROR_ILLEGAL_OPERATION,
    "outgoing queue 7 holds 3 messages; purge them with it (?purge=true) or let them go first",
)


# -- messages ---------------------------------------------------------------------------


def _header_schema(field: str) -> dict[str, Any]:
    annotation = MessageOut.model_fields[field].annotation
    if annotation is int:
        return {"type": "string", "pattern": "^[0-9]+$"}
    if annotation is bool:
        return {"type": "string", "enum": ["true", "false"]}
    return {"type": "string"}


NOT_IN_HEADERS = ("body", "body_base64", "decoded")
"""MessageOut's fields a raw answer does not carry in headers: it carries the body as it is."""
MESSAGE_HEADERS: dict[str, dict[str, Any]] = {
    header_name(field): {
        "description": f"Raw answers only: `{field}`"
        + (" (percent-encoded UTF-8)" if _header_schema(field) == {"type": "string"} else "")
        + f": {info.description}",
        "required": False,
        "schema": _header_schema(field),
    }
    for field, info in MessageOut.model_fields.items()
    if field not in NOT_IN_HEADERS
}
"""The message's properties in `X-Msmq-*` headers of a raw answer (`app.http.message_response`);
empty and null ones are left out, so none is required."""

SEND_HEADER_PARAMETERS: list[dict[str, Any]] = [
    {
        "in": "header",
        "name": header_name(field),
        "required": False,
        "description": f"Raw sends only (any content type but JSON): `{field}`. "
        f"{MessageIn.model_fields[field].description}",
        "schema": {"type": "string"},
    }
    for field in SEND_HEADERS
]
"""Properties of a raw send in `X-Msmq-*` headers (`app.http.SEND_HEADERS`)."""
assert all(parameter["name"].startswith(HEADER_PREFIX) for parameter in SEND_HEADER_PARAMETERS)


def message_answer(example: Mapping[str, Any], raw_example: str = "order 2") -> dict[str, Any]:
    return {
        "description": "The message: JSON, or with `Accept: application/octet-stream` the raw body "
        "with its properties in `X-Msmq-*` headers",
        "headers": MESSAGE_HEADERS,
        "content": {
            "application/json": {"schema": {"$ref": "#/components/schemas/MessageOut"}, "example": example},
            "application/octet-stream": {
                "schema": {"type": "string", "format": "binary"},
                "example": raw_example,
            },
        },
    }


NO_MESSAGE: Success = {204: {"description": "No message arrived within timeout_ms (MQ_ERROR_IO_TIMEOUT)"}}

SEND_REQUEST: dict[str, Any] = {
    "parameters": SEND_HEADER_PARAMETERS,
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {"$ref": "#/components/schemas/MessageIn"},
                "example": {"body": "order 1", "label": "new order", "priority": 5},
            },
            "application/octet-stream": {
                "schema": {"type": "string", "format": "binary"},
                "example": "order 1",
            },
        },
    },
}
"""`openapi_extra` of the send: its body is read by `app.http.message_from_request`, not FastAPI."""
