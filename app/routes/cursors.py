"""/api/cursors: forward-only positions in a queue (MQCreateCursor and its actions)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response, status

from app import answers as a
from app.auth import authorize
from app.docs import CURSOR_EXAMPLE, MESSAGE_EXAMPLE
from app.gateway import DECODE, GatewayDep, TimeoutMs, TransactionParam, check_wait
from app.http import decode_requested, message_response
from app.schemas import CursorCreate, CursorOut
from qm.model import Message
from qm.rights import QueueRight

router = APIRouter(prefix="/api/cursors", tags=["cursors"])
OPEN_CURSOR = (a.NO_CURSOR, a.CURSOR_QUEUE_GONE)
"""What naming a cursor can fail with: it is closed or expired, or its queue was deleted."""
MESSAGE = {200: a.message_answer(MESSAGE_EXAMPLE), **a.NO_MESSAGE}


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    summary="Open an unpositioned cursor on a queue",
    responses=a.answers(
        a.ok(CURSOR_EXAMPLE | {"state": "unpositioned", "lookup_id": None}, "Opened", 201),
        a.INVALID_PARAMETER,
        a.QUEUE_PATH,
    ),
)
async def open_cursor(body: CursorCreate, gateway: GatewayDep, request: Request) -> CursorOut:
    await authorize(request, QueueRight.PEEK_MESSAGE, body.queue)  # opening a cursor is peeking its queue
    opened = await gateway.cursors.open(body.queue)
    record, queue = await gateway.cursors.describe(opened.id)
    return CursorOut.of(record, queue.path.url_path)


@router.get(
    "/{cursor_id}",
    summary="Show where a cursor rests",
    responses=a.answers(a.ok(CURSOR_EXAMPLE), OPEN_CURSOR),
)
async def get_cursor(cursor_id: str, gateway: GatewayDep) -> CursorOut:
    record, queue = await gateway.cursors.describe(cursor_id)
    return CursorOut.of(record, queue.path.url_path)


@router.delete(
    "/{cursor_id}",
    status_code=204,
    summary="Close a cursor",
    responses=a.answers(a.done("Closed"), a.NO_CURSOR),
)
async def close_cursor(cursor_id: str, gateway: GatewayDep) -> None:
    await gateway.cursors.close(cursor_id)


@router.get(
    "/{cursor_id}/current",
    summary="Peek current (positions an unpositioned cursor)",
    responses=a.answers(MESSAGE, a.INVALID_PARAMETER, OPEN_CURSOR, a.LOCKED, a.ALREADY_RECEIVED),
    dependencies=[DECODE],
)
async def peek_current(
    cursor_id: str, request: Request, gateway: GatewayDep, timeout_ms: TimeoutMs = 0
) -> Response:
    message = await gateway.cursors.peek_current(cursor_id, check_wait(gateway, timeout_ms))
    return await _respond(request, gateway, cursor_id, message)


@router.get(
    "/{cursor_id}/next",
    summary="Peek next: move forward and peek",
    responses=a.answers(MESSAGE, a.INVALID_PARAMETER, OPEN_CURSOR, a.ILLEGAL_CURSOR_ACTION),
    dependencies=[DECODE],
)
async def peek_next(
    cursor_id: str, request: Request, gateway: GatewayDep, timeout_ms: TimeoutMs = 0
) -> Response:
    message = await gateway.cursors.peek_next(cursor_id, check_wait(gateway, timeout_ms))
    return await _respond(request, gateway, cursor_id, message)


@router.post(
    "/{cursor_id}/receive",
    summary="Receive current, then move to the next message",
    responses=a.answers(
        MESSAGE, a.INVALID_PARAMETER, OPEN_CURSOR, a.IN_TRANSACTION, a.LOCKED, a.ALREADY_RECEIVED
    ),
    dependencies=[DECODE],
)
async def receive_current(
    cursor_id: str,
    request: Request,
    gateway: GatewayDep,
    timeout_ms: TimeoutMs = 0,
    transaction: TransactionParam = None,
) -> Response:
    message = await gateway.cursors.receive_current(cursor_id, check_wait(gateway, timeout_ms), transaction)
    return await _respond(request, gateway, cursor_id, message)


async def _respond(
    request: Request, gateway: GatewayDep, cursor_id: str, message: Message | None
) -> Response:
    if message is None:
        return Response(status_code=status.HTTP_204_NO_CONTENT)
    _record, queue = await gateway.cursors.describe(cursor_id)
    return message_response(request, message, queue.path.url_path, decode=decode_requested(request))
