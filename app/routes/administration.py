"""Single-message administration on /api/queues/{path}/messages: delete by lookup ID, move,
resend dead letters, export to JSON lines and import them (qm.administration)."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from http import HTTPStatus
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response, status
from fastapi.responses import StreamingResponse
from pydantic_core import to_json

from app import answers as a
from app.admin_queues import authorize_admin_queues
from app.admin_schemas import (
    EXPORT_LEFT_OUT,
    ImportOut,
    MovedOut,
    MoveIn,
    MoveOut,
    ResendIn,
    ResendOut,
    export_line,
    parse_import,
    parse_lookup_ids,
)
from app.answer_bytes import answer_budget
from app.auth import authorize, note_for_audit
from app.docs import MESSAGE_EXAMPLE
from app.gateway import Gateway, GatewayDep, canonical_queue
from app.http import read_capped
from app.parameters import parse_lookup_id
from qm.administration import Administration
from qm.errors import MqErrorCode
from qm.model import Message
from qm.rights import QueueRight

router = APIRouter(prefix="/api/queues/{path:path}/messages", tags=["administration"])
"""Matched before the lookup routes: `…/messages/export` is no lookup ID."""
NDJSON = "application/x-ndjson"
LOOKUP_A = "288230376151711745"
MOVED_ONE = {
    "lookup_id": LOOKUP_A,
    "new_lookup_id": "288230376151711750",
    "message_id": "{5b0c7e1a-3f2d-4c1b-9a8e-7d6c5b4a3921}\\1",
    "queue": "private$/retry",
}
MOVED_EXAMPLE = {"queue": "private$/retry", "moved": [MOVED_ONE]}
LOCKED = a.Problem(
    MqErrorCode.MQ_ERROR_MESSAGE_LOCKED_UNDER_TRANSACTION,
    "message 288230376151711745 is locked by a transaction or a two-phase read",
)
NOT_FOUND = a.Problem(
    MqErrorCode.MQ_ERROR_MESSAGE_NOT_FOUND, "the queue holds no message with lookup ID 288230376151711745"
)
PAIRING = a.Problem(
    MqErrorCode.MQ_ERROR_TRANSACTION_USAGE,
    "message 288230376151711745 was sent without a transaction; private$/billing is transactional",
)
QUOTA = a.Problem(
    MqErrorCode.MQ_ERROR_INSUFFICIENT_RESOURCES, "the quota of the target queue (1 KB) would be exceeded"
)
IMPORT_LINE = a.Problem(MqErrorCode.MQ_ERROR_INVALID_PARAMETER, "line 2: not JSON: Expecting value")
IMPORT_TOO_LARGE = a.Problem(
    MqErrorCode.MQ_ERROR_INSUFFICIENT_RESOURCES,
    "the request body has 70000000 bytes or more; at most 67108864 are accepted",
    HTTPStatus.REQUEST_ENTITY_TOO_LARGE,
)
IMPORT_UNREADABLE = a.Problem(
    MqErrorCode.MQ_ERROR_INVALID_PARAMETER,
    "a body of type 'text/plain' is not read here; send application/x-ndjson or application/jsonl "
    "or application/json",
    HTTPStatus.UNSUPPORTED_MEDIA_TYPE,
)
"""The edge reads an import's body only as JSON lines (app/edge.py, IMPORT_TYPES)."""
EXPORT_LINE_EXAMPLE = {
    name: value for name, value in MESSAGE_EXAMPLE.items() if name not in EXPORT_LEFT_OUT
} | {"body_base64": "b3JkZXIgMg=="}
EXPORTED: a.Success = {
    200: {
        "description": "One JSON object per line (MessageOut's fields but `body`, `lock_tag` and "
        "`lock_expires_at`: the body is in `body_base64`), in queue order, streamed",
        "content": {
            NDJSON: {"schema": {"type": "string"}, "example": json.dumps(EXPORT_LINE_EXAMPLE) + "\n"}
        },
    }
}
IMPORT_REQUEST: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": "JSON lines as an export writes them (any content type). Only `body_base64` is "
        "required; a line's `lookup_id`, `queue` and arrival time are ignored; blank lines are skipped",
        "content": {
            NDJSON: {
                "schema": {"type": "string"},
                "example": '{"body_base64": "b3JkZXIgMQ==", "label": "order 1"}\n',
            }
        },
    }
}


def _administration(gateway: Gateway) -> Administration:
    return Administration(gateway.manager, gateway.reader)


@router.post(
    "/move",
    summary="Move messages to another queue in one transaction",
    description="MQMoveMessage's rule: each message keeps its message ID and every property; it is "
    "not received, so it earns no journal copy or acknowledgment. It gets a new lookup ID in its new "
    "queue, behind the messages of its priority. All of them move or none: a message missing or "
    "locked, a transactional message for a queue that is not (or the other way round), a target "
    "over its quota, and nothing changes.",
    responses=a.answers(
        a.ok(MOVED_EXAMPLE),
        a.INVALID_PARAMETER,
        a.QUEUE_PATH,
        a.READ_ONLY,
        NOT_FOUND,
        LOCKED,
        PAIRING,
        QUOTA,
    ),
)
async def move_messages(path: str, body: MoveIn, request: Request, gateway: GatewayDep) -> MoveOut:
    note_for_audit(request, to=body.to)
    await authorize(request, QueueRight.WRITE_MESSAGE, body.to)  # the source's right: app/access_rules.py
    to = canonical_queue(gateway, body.to)
    moved = await _administration(gateway).move_messages(path, parse_lookup_ids(body.lookup_ids), body.to)
    return MoveOut(queue=to, moved=[MovedOut.of(item, to) for item in moved])


@router.post(
    "/resend",
    summary="Resend dead letters to the queues they were sent to",
    description="From `system$;deadletter` or `system$;deadxact`: each message goes back to its "
    "`destination_queue` (a local queue, or the outgoing queue of a remote one) as a new arrival: "
    "class MQMSG_CLASS_NORMAL, its timers started afresh, message ID and other properties kept. "
    "All of them or none.",
    responses=a.answers(
        a.ok({"resent": [MOVED_ONE | {"queue": "private$/orders"}]}),
        a.INVALID_PARAMETER,
        a.QUEUE_PATH,
        NOT_FOUND,
        LOCKED,
        PAIRING,
        QUOTA,
    ),
)
async def resend_dead_letters(path: str, body: ResendIn, request: Request, gateway: GatewayDep) -> ResendOut:
    chosen = None if body.lookup_ids is None else parse_lookup_ids(body.lookup_ids)

    async def may_write(destination: str) -> None:
        await authorize(request, QueueRight.WRITE_MESSAGE, destination)

    resent = await _administration(gateway).resend_dead_letters(path, chosen, may_write)
    return ResendOut(resent=[MovedOut.of(item.moved, item.queue.url_path) for item in resent])


@router.get(
    "/export",
    summary="Export messages as JSON lines",
    description="The chosen messages (`lookup_id`, repeated), or every available message in queue "
    "order, read a page at a time (not a snapshot: messages that leave meanwhile may be missing). "
    "Bodies in base64. `POST …/messages/import` takes the file as it is.",
    response_class=StreamingResponse,
    responses=a.answers(EXPORTED, a.INVALID_PARAMETER, a.QUEUE_PATH, NOT_FOUND),
)
async def export_messages(
    path: str,
    gateway: GatewayDep,
    lookup_id: Annotated[
        list[str] | None, Query(description="Export only these messages (1 to 1000, repeated)")
    ] = None,
) -> StreamingResponse:
    queue = canonical_queue(gateway, path)
    administration = _administration(gateway)
    if lookup_id:
        lines = await administration.selected(path, parse_lookup_ids(lookup_id))
    else:
        budget = answer_budget(gateway.settings.max_answer_bytes, queue)
        lines = await administration.every_message(path, budget)
    filename = re.sub(r"[^A-Za-z0-9._-]", "_", queue) + ".jsonl"
    return StreamingResponse(
        _encoded(lines, queue),
        media_type=NDJSON,
        headers={"Content-Disposition": f'attachment; filename="{filename}"'},
    )


async def _encoded(messages: AsyncIterator[Message], queue: str) -> AsyncIterator[bytes]:
    async for message in messages:
        yield to_json(export_line(message, queue))
        yield b"\n"
        await asyncio.sleep(0)  # a page's messages are at hand: let the loop serve others between two


@router.post(
    "/import",
    status_code=status.HTTP_201_CREATED,
    summary="Import messages from JSON lines",
    description="Every line is checked before anything is stored, then all of them are stored in "
    "one transaction, or none (a bad line, a queue over its quota). Message IDs, sent times and "
    "source machines are kept; lookup IDs and arrival times are new, timers start afresh. At most "
    "`MSMQGW_MAX_IMPORT_BYTES` (64 MiB) a file: 413 beyond.",
    openapi_extra=IMPORT_REQUEST,
    responses=a.answers(
        a.ok({"queue": "private$/orders", "imported": 2}, "Stored, all of them", 201),
        IMPORT_LINE,
        a.ILLEGAL_PROPERTY,
        a.QUEUE_PATH,
        a.READ_ONLY,
        IMPORT_TOO_LARGE,
        IMPORT_UNREADABLE,
        QUOTA,
    ),
)
async def import_messages(path: str, request: Request, gateway: GatewayDep) -> ImportOut:
    queue = canonical_queue(gateway, path)
    payload = await read_capped(request, gateway.settings.max_import_bytes)
    batch = parse_import(payload)
    await authorize_admin_queues(request, [item.properties for item in batch])
    stored = await _administration(gateway).import_messages(path, batch)
    return ImportOut(queue=queue, imported=len(stored))


@router.delete(
    "/{lookup_id}",
    status_code=204,
    summary="Delete one message by lookup ID",
    description="MQReceiveMessageByLookupId (MQ_LOOKUP_RECEIVE_CURRENT) without the answer, MSMQ's "
    "one way to remove a single message: it earns what a receive earns (the queue's journal copy, "
    "a positive receive acknowledgment where asked for).",
    responses=a.answers(a.done("Removed"), a.INVALID_PARAMETER, a.QUEUE_PATH, a.MESSAGE_NOT_FOUND, a.LOCKED),
)
async def delete_message(path: str, lookup_id: str, gateway: GatewayDep) -> Response:
    await _administration(gateway).delete_message(path, parse_lookup_id(lookup_id))
    return Response(status_code=status.HTTP_204_NO_CONTENT)
