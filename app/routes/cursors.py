"""/api/cursors: forward-only positions in a queue (MQCreateCursor and its actions)."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response, status

from app.docs import CURSOR_EXAMPLE, INVALID_HANDLE, MESSAGE_RESPONSES, NO_CONTENT, example
from app.gateway import DECODE, GatewayDep, TimeoutMs, TransactionParam, check_wait
from app.http import decode_requested, message_response
from app.schemas import CursorCreate, CursorOut
from qm.model import Message

router = APIRouter(prefix="/api/cursors", tags=["cursors"])


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    summary="Open an unpositioned cursor on a queue",
    responses={201: example(CURSOR_EXAMPLE | {"state": "unpositioned", "lookup_id": None}, "Opened")},
)
async def open_cursor(body: CursorCreate, gateway: GatewayDep) -> CursorOut:
    opened = await gateway.cursors.open(body.queue)
    record, queue = await gateway.cursors.describe(opened.id)
    return CursorOut.of(record, queue.path.url_path)


@router.get(
    "/{cursor_id}",
    summary="Show where a cursor rests",
    responses={200: example(CURSOR_EXAMPLE), 404: INVALID_HANDLE},
)
async def get_cursor(cursor_id: str, gateway: GatewayDep) -> CursorOut:
    record, queue = await gateway.cursors.describe(cursor_id)
    return CursorOut.of(record, queue.path.url_path)


@router.delete(
    "/{cursor_id}",
    status_code=204,
    summary="Close a cursor",
    responses={204: NO_CONTENT, 404: INVALID_HANDLE},
)
async def close_cursor(cursor_id: str, gateway: GatewayDep) -> None:
    await gateway.cursors.close(cursor_id)


@router.get(
    "/{cursor_id}/current",
    summary="Peek current (positions an unpositioned cursor)",
    responses=MESSAGE_RESPONSES,
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
    responses=MESSAGE_RESPONSES,
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
    responses=MESSAGE_RESPONSES,
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
