"""/api/outgoing-queues: messages waiting for remote SRMP queues, and their delivery state."""

from __future__ import annotations

from fastapi import APIRouter

from app import answers as a
from app.docs import OUTGOING_QUEUE_EXAMPLE
from app.gateway import GatewayDep
from app.parameters import OutgoingQueueId
from app.schemas import OutgoingQueueOut

router = APIRouter(tags=["outgoing queues"])
ONE = (a.INVALID_PARAMETER, a.OUTGOING_NOT_FOUND)
"""What naming an outgoing queue can fail with."""


@router.get(
    "/api/outgoing-queues",
    summary="Every outgoing queue (one per remote destination) with its delivery state",
    responses=a.answers(a.ok([OUTGOING_QUEUE_EXAMPLE])),
)
async def list_outgoing(gateway: GatewayDep) -> list[OutgoingQueueOut]:
    return [OutgoingQueueOut.of(outgoing) for outgoing in await gateway.outgoing.all()]


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
