"""Send, browse, receive and peek on /api/queues/{path}, and the two-phase read's locks."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response, status
from pydantic import AwareDatetime

from app import answers as a
from app.admin_queues import authorize_admin_queues
from app.answer_bytes import answer_budget
from app.docs import MESSAGE_EXAMPLE, SENT_EXAMPLE
from app.gateway import (
    DecodeParam,
    Gateway,
    GatewayDep,
    TimeoutMs,
    TransactionParam,
    canonical_queue,
    check_wait,
    gateway_of,
)
from app.http import json_response, message_from_request, message_response
from app.message_pages import page_response
from app.message_schemas import MessagePage, SentOut, decode_base64, message_fields, sent_fields
from app.parameters import LOOKUP_ID_PATTERN, parse_lookup_id
from qm.errors import MqError, MqErrorCode
from qm.model import CORRELATION_ID_SIZE, Message
from qm.store import MessageFilter

send_router = APIRouter(tags=["messages"])
"""Send and browse (`…/messages`): no lookup route can shadow them, so they are matched first."""
router = APIRouter(tags=["messages"])
locks_router = APIRouter(tags=["locks"])
MAX_BATCH = 1000
LOCKED_EXAMPLE = MESSAGE_EXAMPLE | {
    "lock_tag": "72057594037927940-9f3c2b1a0d4e5f6a7b8c9d0e",
    "lock_expires_at": "2026-11-22T10:00:30Z",
}
RECEIVED: a.Success = {
    200: a.message_answer(MESSAGE_EXAMPLE)
    | {
        "description": "The message: JSON, or with `Accept: application/octet-stream` the raw body "
        "with its properties in `X-Msmq-*` headers. With `max_messages` always JSON: "
        '`{"messages": [...]}`.',
        "content": {
            "application/json": {
                "schema": {
                    "oneOf": [
                        {"$ref": "#/components/schemas/MessageOut"},
                        {"$ref": "#/components/schemas/MessageBatch"},
                    ]
                },
                "examples": {
                    "message": {"summary": "One message", "value": MESSAGE_EXAMPLE},
                    "two_phase": {"summary": "two_phase=true: the message locked", "value": LOCKED_EXAMPLE},
                    "batch": {
                        "summary": "max_messages=2",
                        "value": {
                            "messages": [
                                MESSAGE_EXAMPLE,
                                MESSAGE_EXAMPLE | {"lookup_id": "72057594037927941"},
                            ]
                        },
                    },
                },
            },
            "application/octet-stream": {
                "schema": {"type": "string", "format": "binary"},
                "example": "order 2",
            },
        },
    },
    **a.NO_MESSAGE,
}


@send_router.post(
    "/api/queues/{path:path}/messages",
    status_code=status.HTTP_201_CREATED,
    response_model=SentOut,
    summary="Send a message",
    description="JSON (`MessageIn`) or any other content type as the raw body with properties in "
    "`X-Msmq-*` headers. A 201 means the message is on stable storage.",
    openapi_extra=a.SEND_REQUEST,
    responses=a.answers(
        a.ok(SENT_EXAMPLE, "Stored durably", 201),
        a.INVALID_PARAMETER,
        a.ILLEGAL_PROPERTY,
        a.LABEL_TOO_LONG,
        a.PROPERTY_SIZE,
        a.QUEUE_PATH,
        a.READ_ONLY,
        a.IN_TRANSACTION,
        a.BODY_TOO_LARGE,
        a.QUOTA,
    ),
)
async def send(path: str, request: Request, transaction: TransactionParam = None) -> Response:
    gateway = gateway_of(request)
    queue = gateway.manager.destination(path).url_path
    properties = await message_from_request(request, gateway.settings.max_body_bytes)
    await authorize_admin_queues(request, [properties])
    message = await gateway.manager.send(path, properties, transaction)
    return json_response(sent_fields(message, queue, transaction), status.HTTP_201_CREATED)


@send_router.get(
    "/api/queues/{path:path}/messages",
    summary="List available messages in queue order",
    description="A page at a time (keyset pagination on the lookup ID): at most `limit` messages, "
    "stopping before the answer would pass MSMQGW_MAX_ANSWER_BYTES (at least one message); "
    "`next_after` continues it, null at the end. Filters, all of which must hold: part of the "
    "label, class, priority, arrival time, correlation ID.",
    response_model=MessagePage,
    responses=a.answers(
        a.ok({"messages": [MESSAGE_EXAMPLE], "next_after": None}), a.INVALID_PARAMETER, a.QUEUE_PATH
    ),
)
async def browse(
    path: str,
    gateway: GatewayDep,
    after: Annotated[
        str,
        Query(
            description="Lookup ID to continue after: the previous page's `next_after` (keyset pagination)",
            json_schema_extra={"pattern": LOOKUP_ID_PATTERN},
        ),
    ] = "0",
    limit: Annotated[int, Query(ge=1, le=1000, description="At most this many messages")] = 100,
    decode: DecodeParam = False,
    label: Annotated[
        str | None, Query(max_length=250, description="Only labels containing this, any case")
    ] = None,
    message_class: Annotated[int | None, Query(ge=0, le=65535, description="Only this class")] = None,
    priority: Annotated[int | None, Query(ge=0, le=7, description="Only this priority")] = None,
    arrived_after: Annotated[
        AwareDatetime | None, Query(description="Only messages that arrived at or after this time")
    ] = None,
    arrived_before: Annotated[
        AwareDatetime | None, Query(description="Only messages that arrived before this time")
    ] = None,
    correlation_id: Annotated[
        str | None, Query(description="Only this correlation ID (20 bytes, base64)")
    ] = None,
) -> Response:
    where = MessageFilter(
        label=label,
        message_class=message_class,
        priority=priority,
        arrived_after=arrived_after,
        arrived_before=arrived_before,
        correlation_id=None if correlation_id is None else _correlation(correlation_id),
    )
    queue = canonical_queue(gateway, path)
    most = gateway.settings.max_answer_bytes
    budget = answer_budget(most, queue)
    found, more = await gateway.reader.browse_within(path, parse_lookup_id(after), limit, budget, where)
    return page_response(found, queue, more, most, decode)


def _correlation(text: str) -> bytes:
    try:
        value = decode_base64(text)
    except ValueError as error:
        raise MqError(MqErrorCode.MQ_ERROR_INVALID_PARAMETER, f"correlation_id: {error}") from None
    if len(value) != CORRELATION_ID_SIZE:
        raise MqError(
            MqErrorCode.MQ_ERROR_INVALID_PARAMETER,
            f"correlation_id: a correlation ID has {CORRELATION_ID_SIZE} bytes, not {len(value)}",
        )
    return value


@router.post(
    "/api/queues/{path:path}/receive",
    summary="Receive the first message (waits up to timeout_ms)",
    description="Removes the first available message. With `two_phase=true` the message is locked "
    "instead and returned with a `lock_tag`: commit or abort it under /api/locks. With "
    '`max_messages=N` up to N messages are removed at once, answered as `{"messages": [...]}`, '
    "and no more than fit in an answer of MSMQGW_MAX_ANSWER_BYTES (at least one).",
    responses=a.answers(RECEIVED, a.INVALID_PARAMETER, a.QUEUE_PATH, a.IN_TRANSACTION),
)
async def receive(
    path: str,
    request: Request,
    timeout_ms: TimeoutMs = 0,
    transaction: TransactionParam = None,
    two_phase: Annotated[bool, Query(description="Lock instead of removing (Dequeue Begin)")] = False,
    lock_timeout_ms: Annotated[int | None, Query(ge=1, description="Two-phase lock lifetime")] = None,
    max_messages: Annotated[
        int | None,
        Query(
            ge=1,
            le=MAX_BATCH,
            description="Receive up to this many messages at once (claimed in one statement); the "
            'answer is then always JSON `{"messages": [...]}`. Not with a transaction or two_phase.',
        ),
    ] = None,
    decode: DecodeParam = False,
) -> Response:
    gateway = gateway_of(request)
    wait = check_wait(gateway, timeout_ms)
    queue = canonical_queue(gateway, path)
    if max_messages is not None:
        if two_phase or transaction is not None:
            raise MqError(
                MqErrorCode.MQ_ERROR_INVALID_PARAMETER,
                "max_messages is for plain receives: not with a transaction or two_phase",
            )
        return await _receive_batch(request, gateway, path, wait, max_messages, queue, decode)
    if two_phase:
        return await _receive_locked(path, request, gateway, wait, transaction, lock_timeout_ms, decode)
    message = await _receive_while_connected(request, gateway, path, wait, transaction)
    if message is None:
        return Response(status_code=status.HTTP_204_NO_CONTENT)
    return message_response(request, message, queue, decode=decode)


async def _receive_while_connected(
    request: Request, gateway: Gateway, path: str, wait: int, transaction: str | None
) -> Message | None:
    """A plain receive is destructive: when the client hangs up during the wait, stop waiting
    rather than take a message nobody will read (MQ_ERROR_OPERATION_CANCELLED in MSMQ)."""
    if wait == 0:
        return await gateway.reader.receive(path, wait, transaction)
    return await gateway.reader.receive(path, wait, transaction, HangUp(request))


async def _receive_batch(
    request: Request, gateway: Gateway, path: str, wait: int, max_messages: int, queue: str, decode: bool
) -> Response:
    budget = answer_budget(gateway.settings.max_answer_bytes, queue)
    taken = await gateway.reader.receive_many(path, wait, max_messages, HangUp(request), budget)
    if not taken:
        return Response(status_code=status.HTTP_204_NO_CONTENT)
    return json_response({"messages": [message_fields(message, queue, decode=decode) for message in taken]})


class HangUp:
    """A waiting receive's `abandoned` (qm.manager.Abandonment): set once its client hung up.

    The connection is read only while the receive waits for its queue to change: the queue
    manager awaits `wait` then, beside the wake-up, and cancels it when the wait ends. A hang-up
    matters to nothing else (an attempt is never cut off), and most long-polling receives find
    a message without waiting, so a listening task for every receive from its start (about
    20 us each) bought nothing."""

    def __init__(self, request: Request) -> None:
        self._request = request
        self._hung_up = False

    def is_set(self) -> bool:
        return self._hung_up

    async def wait(self) -> bool:
        while not self._hung_up:  # the request's body, if any, is read and dropped
            self._hung_up = (await self._request.receive())["type"] == "http.disconnect"
        return True


async def _receive_locked(
    path: str,
    request: Request,
    gateway: Gateway,
    wait: int,
    transaction: str | None,
    lock_ms: int | None,
    decode: bool,
) -> Response:
    if transaction is not None:
        raise MqError(MqErrorCode.MQ_ERROR_INVALID_PARAMETER, "a two-phase read does not take a transaction")
    lock_seconds = None if lock_ms is None else lock_ms / 1000
    locked = await gateway.reader.receive_locked(path, wait, lock_seconds)
    if locked is None:
        return Response(status_code=status.HTTP_204_NO_CONTENT)
    message, tag = locked
    seconds = lock_seconds or gateway.settings.default_lock_timeout_s
    expires = gateway.manager.clock.now() + timedelta(seconds=seconds)
    return message_response(request, message, canonical_queue(gateway, path), tag, expires, decode)


@router.get(
    "/api/queues/{path:path}/peek",
    summary="Peek at the first message (waits up to timeout_ms)",
    responses=a.answers(
        {200: a.message_answer(MESSAGE_EXAMPLE), **a.NO_MESSAGE}, a.INVALID_PARAMETER, a.QUEUE_PATH
    ),
)
async def peek(
    path: str, request: Request, gateway: GatewayDep, timeout_ms: TimeoutMs = 0, decode: DecodeParam = False
) -> Response:
    queue = canonical_queue(gateway, path)
    message = await gateway.reader.peek(path, check_wait(gateway, timeout_ms))
    if message is None:
        return Response(status_code=status.HTTP_204_NO_CONTENT)
    return message_response(request, message, queue, decode=decode)


LOCK_ENDS = (a.NOT_A_LOCK_TAG, a.LOCK_NOT_HELD, a.LOCK_GONE)


@locks_router.post(
    "/api/locks/{tag}/commit",
    status_code=204,
    summary="End a two-phase read: remove",
    responses=a.answers(a.done("Removed"), LOCK_ENDS),
)
async def commit_lock(tag: str, gateway: GatewayDep) -> None:
    await gateway.reader.end_lock(tag, commit=True)


@locks_router.post(
    "/api/locks/{tag}/abort",
    status_code=204,
    summary="End a two-phase read: put back",
    responses=a.answers(a.done("Put back where it was"), LOCK_ENDS),
)
async def abort_lock(tag: str, gateway: GatewayDep) -> None:
    await gateway.reader.end_lock(tag, commit=False)
