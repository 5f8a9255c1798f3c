"""/api/outgoing-queues: messages waiting for remote SRMP queues, and their delivery state."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from app import answers as a
from app.docs import OUTGOING_QUEUE_EXAMPLE
from app.gateway import GatewayDep
from app.parameters import INT32_MAX, OutgoingQueueId
from app.schemas import OutgoingQueueOut, OutgoingQueuePage

router = APIRouter(tags=["outgoing queues"])
ONE = (a.INVALID_PARAMETER, a.OUTGOING_NOT_FOUND)
"""What naming an outgoing queue can fail with."""


@router.get(
    "/api/outgoing-queues",
    summary="The outgoing queues (one per remote destination) with their delivery state, a page at a time",
    responses=a.answers(
        a.ok({"outgoing_queues": [OUTGOING_QUEUE_EXAMPLE], "next_after": None}), a.INVALID_PARAMETER
    ),
)
async def list_outgoing(
    gateway: GatewayDep,
    after: Annotated[
        int,
        Query(ge=0, le=INT32_MAX, description="Queue ID to continue after: the previous page's `next_after`"),
    ] = 0,
    limit: Annotated[int, Query(ge=1, le=1000, description="At most this many queues")] = 100,
) -> OutgoingQueuePage:
    page = await gateway.outgoing.page(after, limit)
    return OutgoingQueuePage(
        outgoing_queues=[OutgoingQueueOut.of(outgoing) for outgoing in page],
        next_after=page[-1].queue.id if len(page) == limit else None,
    )


@router.delete(
    "/api/outgoing-queues/{queue_id}",
    summary="Delete an outgoing queue (made again by the next send to its destination)",
    description="Refused with 409 MQ_ERROR_ILLEGAL_OPERATION while it holds messages, unless "
    "`purge=true`: they are purged first (dead letters and NACKs, class 0x8001, where asked for).",
    responses=a.answers(a.ok({"deleted": 7, "purged": 0}), ONE, a.OUTGOING_NOT_EMPTY),
)
async def delete_outgoing(
    queue_id: OutgoingQueueId,
    gateway: GatewayDep,
    purge: Annotated[bool, Query(description="Purge its messages first instead of refusing")] = False,
) -> dict[str, int]:
    return {"deleted": queue_id, "purged": await gateway.outgoing.delete(queue_id, purge)}


@router.get(
    "/api/outgoing-queues/{queue_id}",
    summary="One outgoing queue",
    responses=a.answers(a.ok(OUTGOING_QUEUE_EXAMPLE), ONE),
)
async def show_outgoing(queue_id: OutgoingQueueId, gateway: GatewayDep) -> OutgoingQueueOut:
    return OutgoingQueueOut.of(await gateway.outgoing.get(queue_id))


@router.post(
    "/api/outgoing-queues/{queue_id}/pause",
    summary="Stop sending to this destination; messages keep waiting (their TTRQ still runs)",
    responses=a.answers(a.ok(OUTGOING_QUEUE_EXAMPLE | {"state": "paused"}), ONE),
)
async def pause(queue_id: OutgoingQueueId, gateway: GatewayDep) -> OutgoingQueueOut:
    return OutgoingQueueOut.of(await gateway.outgoing.pause(queue_id))


@router.post(
    "/api/outgoing-queues/{queue_id}/resume",
    summary="Send again, at once (also cuts a retry wait short)",
    responses=a.answers(a.ok(OUTGOING_QUEUE_EXAMPLE), ONE),
)
async def resume(queue_id: OutgoingQueueId, gateway: GatewayDep) -> OutgoingQueueOut:
    return OutgoingQueueOut.of(await gateway.outgoing.resume(queue_id))


@router.post(
    "/api/outgoing-queues/{queue_id}/purge",
    summary="Drop the waiting messages (dead-lettered with class 0x8001 where they ask for it)",
    responses=a.answers(a.ok({"purged": 3}), ONE),
)
async def purge(queue_id: OutgoingQueueId, gateway: GatewayDep) -> dict[str, int]:
    return {"purged": await gateway.outgoing.purge(queue_id)}
