"""/api/queues: create, list, show, update, delete, purge."""

from __future__ import annotations

from fastapi import APIRouter, Response, status
from pydantic import BaseModel

from app.gateway import GatewayDep
from app.schemas import QueueCreate, QueueOut, QueueUpdate

router = APIRouter(prefix="/api/queues", tags=["queues"])


class PurgeOut(BaseModel):
    purged: int


class DeleteOut(BaseModel):
    deleted: str
    messages_dropped: int


@router.get("", summary="List queues, journals and system queues")
async def list_queues(gateway: GatewayDep) -> list[QueueOut]:
    return [QueueOut.of(queue) for queue in await gateway.manager.list_queues()]


@router.post("", status_code=status.HTTP_201_CREATED, summary="Create a queue (and its journal)")
async def create_queue(body: QueueCreate, gateway: GatewayDep, response: Response) -> QueueOut:
    queue = await gateway.manager.create_queue(body.path, body.settings())
    response.headers["Location"] = f"/api/queues/{queue.path.url_path}"
    return QueueOut.of(queue)


@router.post("/{path:path}/purge", summary="Remove every available message")
async def purge_queue(path: str, gateway: GatewayDep) -> PurgeOut:
    return PurgeOut(purged=await gateway.manager.purge_queue(path))


def register_item_routes(api: APIRouter) -> None:
    """Routes on `/{path}` itself match anything, so they are added after all others."""

    @api.get("/api/queues/{path:path}", tags=["queues"], summary="Show a queue with its totals")
    async def get_queue(path: str, gateway: GatewayDep) -> QueueOut:
        return QueueOut.of(await gateway.manager.get_queue(path))

    @api.patch("/api/queues/{path:path}", tags=["queues"], summary="Change label, quotas, journaling")
    async def update_queue(path: str, body: QueueUpdate, gateway: GatewayDep) -> QueueOut:
        return QueueOut.of(await gateway.manager.update_queue(path, body.changes()))

    @api.delete(
        "/api/queues/{path:path}", tags=["queues"], summary="Delete a queue, its journal and messages"
    )
    async def delete_queue(path: str, gateway: GatewayDep) -> DeleteOut:
        dropped = await gateway.manager.delete_queue(path)
        return DeleteOut(deleted=path, messages_dropped=dropped)
