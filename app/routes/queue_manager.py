"""/api/queue-manager: identity, machine quota, throttling; /healthz."""

from __future__ import annotations

from fastapi import APIRouter

from app.docs import QUEUE_MANAGER_EXAMPLE, example
from app.gateway import GatewayDep
from app.schemas import QueueManagerOut, QueueManagerUpdate

router = APIRouter(tags=["queue manager"])


@router.get(
    "/api/queue-manager",
    summary="Identity and machine-wide totals",
    responses={200: example(QUEUE_MANAGER_EXAMPLE)},
)
async def show(gateway: GatewayDep) -> QueueManagerOut:
    return QueueManagerOut.of(await gateway.manager.info())


@router.patch(
    "/api/queue-manager",
    summary="Set the machine quota or the throttled switch",
    responses={200: example(QUEUE_MANAGER_EXAMPLE | {"throttled": True})},
)
async def update(body: QueueManagerUpdate, gateway: GatewayDep) -> QueueManagerOut:
    return QueueManagerOut.of(
        await gateway.manager.configure(body.quota_kb, body.throttled, body.journal_quota_kb)
    )


@router.get(
    "/healthz",
    summary="The service answers and its store is reachable",
    responses={200: example({"status": "ok", "queue_manager": QUEUE_MANAGER_EXAMPLE["guid"]})},
)
async def health(gateway: GatewayDep) -> dict[str, str]:
    info = await gateway.manager.info()
    return {"status": "ok", "queue_manager": str(info.guid)}
