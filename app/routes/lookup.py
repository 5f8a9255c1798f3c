"""Receive and peek by lookup ID (MQReceiveMessageByLookupId), message ID and correlation ID.

These never wait: nothing there is MQ_ERROR_MESSAGE_NOT_FOUND (404).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from app import answers as a
from app.docs import MESSAGE_EXAMPLE
from app.gateway import DECODE, GatewayDep, TransactionParam, canonical_queue
from app.http import decode_requested, message_response
from app.message_schemas import decode_base64
from app.parameters import parse_lookup_id
from qm.errors import MqError, MqErrorCode
from qm.store import Seek

router = APIRouter(prefix="/api/queues/{path:path}/messages", tags=["lookup"], dependencies=[DECODE])

FOUND = {200: a.message_answer(MESSAGE_EXAMPLE)}
PEEKED = a.answers(FOUND, a.INVALID_PARAMETER, a.QUEUE_PATH, a.MESSAGE_NOT_FOUND)
"""Peeks by position or ID: a lookup ID, message ID or correlation ID the queue does not hold,
or holds under a lock, is MQ_ERROR_MESSAGE_NOT_FOUND."""
PEEKED_CURRENT = a.answers(FOUND, a.INVALID_PARAMETER, a.QUEUE_PATH, a.MESSAGE_NOT_FOUND, a.PEEK_LOCKED)
"""MQ_LOOKUP_PEEK_CURRENT of a locked message is MQ_ERROR_TRANSACTION_USAGE, as in MSMQ."""
RECEIVED = a.answers(FOUND, a.INVALID_PARAMETER, a.QUEUE_PATH, a.MESSAGE_NOT_FOUND, a.IN_TRANSACTION)
RECEIVED_CURRENT = a.answers(
    FOUND, a.INVALID_PARAMETER, a.QUEUE_PATH, a.MESSAGE_NOT_FOUND, a.IN_TRANSACTION, a.LOCKED
)

MessageIdParam = Annotated[str, Query(description="`{GUID}\\sequence`, as returned by send")]
CorrelationParam = Annotated[str, Query(description="20 bytes, base64")]


async def _lookup(
    request: Request,
    gateway: GatewayDep,
    path: str,
    seek: Seek,
    lookup_id: int,
    receive: bool,
    transaction: str | None = None,
) -> Response:
    queue = canonical_queue(gateway, path)
    message = await gateway.reader.by_lookup_id(path, seek, lookup_id, receive, transaction)
    return message_response(request, message, queue, decode=decode_requested(request))


@router.get("/first", summary="Peek at the first message", responses=PEEKED)
async def peek_first(path: str, request: Request, gateway: GatewayDep) -> Response:
    return await _lookup(request, gateway, path, Seek.FIRST, 0, receive=False)


@router.post("/first/receive", summary="Receive the first message", responses=RECEIVED)
async def receive_first(
    path: str, request: Request, gateway: GatewayDep, transaction: TransactionParam = None
) -> Response:
    return await _lookup(request, gateway, path, Seek.FIRST, 0, True, transaction)


@router.get("/last", summary="Peek at the last message", responses=PEEKED)
async def peek_last(path: str, request: Request, gateway: GatewayDep) -> Response:
    return await _lookup(request, gateway, path, Seek.LAST, 0, receive=False)


@router.post("/last/receive", summary="Receive the last message", responses=RECEIVED)
async def receive_last(
    path: str, request: Request, gateway: GatewayDep, transaction: TransactionParam = None
) -> Response:
    return await _lookup(request, gateway, path, Seek.LAST, 0, True, transaction)


@router.get("/by-id", summary="Peek at the message with this message ID", responses=PEEKED)
async def peek_by_id(
    path: str, message_id: MessageIdParam, request: Request, gateway: GatewayDep
) -> Response:
    queue = canonical_queue(gateway, path)
    message = await gateway.reader.by_message_id(path, message_id=message_id)
    return message_response(request, message, queue, decode=decode_requested(request))


@router.post("/by-id/receive", summary="Receive the message with this message ID", responses=RECEIVED)
async def receive_by_id(
    path: str,
    message_id: MessageIdParam,
    request: Request,
    gateway: GatewayDep,
    transaction: TransactionParam = None,
) -> Response:
    queue = canonical_queue(gateway, path)
    message = await gateway.reader.by_message_id(
        path, message_id=message_id, receive=True, transaction=transaction
    )
    return message_response(request, message, queue, decode=decode_requested(request))


@router.get(
    "/by-correlation-id",
    summary="Peek at the first message with this correlation ID",
    responses=PEEKED,
)
async def peek_by_correlation(
    path: str, correlation_id: CorrelationParam, request: Request, gateway: GatewayDep
) -> Response:
    queue = canonical_queue(gateway, path)
    message = await gateway.reader.by_message_id(path, correlation_id=_correlation(correlation_id))
    return message_response(request, message, queue, decode=decode_requested(request))


@router.post(
    "/by-correlation-id/receive",
    summary="Receive the first message with this correlation ID",
    responses=RECEIVED,
)
async def receive_by_correlation(
    path: str,
    correlation_id: CorrelationParam,
    request: Request,
    gateway: GatewayDep,
    transaction: TransactionParam = None,
) -> Response:
    queue = canonical_queue(gateway, path)
    message = await gateway.reader.by_message_id(
        path, correlation_id=_correlation(correlation_id), receive=True, transaction=transaction
    )
    return message_response(request, message, queue, decode=decode_requested(request))


def _correlation(text: str) -> bytes:
    try:
        return decode_base64(text)
    except ValueError as error:
        raise MqError(MqErrorCode.MQ_ERROR_INVALID_PARAMETER, f"correlation_id: {error}") from None


@router.get("/{lookup_id}/next", summary="Peek at the message after this lookup ID", responses=PEEKED)
async def peek_next(path: str, lookup_id: str, request: Request, gateway: GatewayDep) -> Response:
    return await _lookup(request, gateway, path, Seek.NEXT, parse_lookup_id(lookup_id), receive=False)


@router.post(
    "/{lookup_id}/next/receive",
    summary="Receive the message after this lookup ID",
    responses=RECEIVED,
)
async def receive_next(
    path: str, lookup_id: str, request: Request, gateway: GatewayDep, transaction: TransactionParam = None
) -> Response:
    return await _lookup(request, gateway, path, Seek.NEXT, parse_lookup_id(lookup_id), True, transaction)


@router.get("/{lookup_id}/previous", summary="Peek at the message before this lookup ID", responses=PEEKED)
async def peek_previous(path: str, lookup_id: str, request: Request, gateway: GatewayDep) -> Response:
    return await _lookup(request, gateway, path, Seek.PREVIOUS, parse_lookup_id(lookup_id), receive=False)


@router.post(
    "/{lookup_id}/previous/receive",
    summary="Receive the message before this lookup ID",
    responses=RECEIVED,
)
async def receive_previous(
    path: str, lookup_id: str, request: Request, gateway: GatewayDep, transaction: TransactionParam = None
) -> Response:
    return await _lookup(request, gateway, path, Seek.PREVIOUS, parse_lookup_id(lookup_id), True, transaction)


@router.get("/{lookup_id}", summary="Peek at the message with this lookup ID", responses=PEEKED_CURRENT)
async def peek_current(path: str, lookup_id: str, request: Request, gateway: GatewayDep) -> Response:
    return await _lookup(request, gateway, path, Seek.CURRENT, parse_lookup_id(lookup_id), receive=False)


@router.post(
    "/{lookup_id}/receive", summary="Receive the message with this lookup ID", responses=RECEIVED_CURRENT
)
async def receive_current(
    path: str, lookup_id: str, request: Request, gateway: GatewayDep, transaction: TransactionParam = None
) -> Response:
    return await _lookup(request, gateway, path, Seek.CURRENT, parse_lookup_id(lookup_id), True, transaction)
