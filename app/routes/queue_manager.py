"""/api/queue-manager: identity, machine quota, throttling; /healthz."""

from __future__ import annotations

from fastapi import APIRouter

from app import answers as a
from app.docs import QUEUE_MANAGER_EXAMPLE
from app.gateway import GatewayDep
from app.schemas import QueueManagerOut, QueueManagerUpdate

router = APIRouter(tags=["queue manager"])


@router.get(
    "/api/queue-manager",
    summary="Identity and machine-wide totals",
    responses=a.answers(a.ok(QUEUE_MANAGER_EXAMPLE)),
)
async def show(gateway: GatewayDep) -> QueueManagerOut:
    return QueueManagerOut.of(await gateway.manager.info())


@router.patch(
    "/api/queue-manager",
    summary="Set the machine quota or the throttled switch",
    responses=a.answers(a.ok(QUEUE_MANAGER_EXAMPLE | {"throttled": True}), a.INVALID_PARAMETER),
)
async def update(body: QueueManagerUpdate, gateway: GatewayDep) -> QueueManagerOut:
    return QueueManagerOut.of(
        await gateway.manager.configure(body.quota_kb, body.throttled, body.journal_quota_kb)
    )


@router.get(
    "/healthz",
    summary="The service answers and its store is reachable",
    description="Answers anyone, so it names nothing: the queue manager's GUID is shown by "
    "`GET /api/queue-manager` only.",
    responses=a.answers(a.ok({"status": "ok"})),
)
async def health(gateway: GatewayDep) -> dict[str, str]:
    await gateway.manager.info()  # reaches the store: 503 when it is not reachable
    return {"status": "ok"}
