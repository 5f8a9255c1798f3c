"""/api/queues: create, list, show, update, delete, purge."""

from __future__ import annotations

from urllib.parse import quote

from fastapi import APIRouter, Response, status
from pydantic import BaseModel

from app.docs import ILLEGAL_PATH, QUEUE_EXAMPLE, QUEUE_NOT_FOUND, example, problem_example
from app.gateway import GatewayDep
from app.schemas import QueueCreate, QueueOut, QueueUpdate

router = APIRouter(prefix="/api/queues", tags=["queues"])


class PurgeOut(BaseModel):
    purged: int


class DeleteOut(BaseModel):
    deleted: str
    messages_dropped: int


@router.get("", summary="List queues, journals and system queues", responses={200: example([QUEUE_EXAMPLE])})
async def list_queues(gateway: GatewayDep) -> list[QueueOut]:
    return [QueueOut.of(queue) for queue in await gateway.manager.list_queues()]


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    summary="Create a queue (and its journal)",
    responses={
        201: example(QUEUE_EXAMPLE, "Created"),
        400: ILLEGAL_PATH,
        409: problem_example("MQ_ERROR_QUEUE_EXISTS", "0xC00E0005", 409, "private$/orders already exists"),
    },
)
async def create_queue(body: QueueCreate, gateway: GatewayDep, response: Response) -> QueueOut:
    queue = await gateway.manager.create_queue(body.path, body.settings())
    # Queue names may hold `#`, `?` or `%`: the URL carries them percent-encoded.
    response.headers["Location"] = f"/api/queues/{quote(queue.path.url_path, safe='$/')}"
    return QueueOut.of(queue)


@router.post(
    "/{path:path}/purge",
    summary="Remove every available message",
    responses={200: example({"purged": 3}), 404: QUEUE_NOT_FOUND},
)
async def purge_queue(path: str, gateway: GatewayDep) -> PurgeOut:
    return PurgeOut(purged=await gateway.manager.purge_queue(path))


def register_item_routes(api: APIRouter) -> None:
    """Routes on `/{path}` itself match anything, so they are added after all others."""

    @api.get(
        "/api/queues/{path:path}",
        tags=["queues"],
        summary="Show a queue with its totals",
        responses={200: example(QUEUE_EXAMPLE), 404: QUEUE_NOT_FOUND},
    )
    async def get_queue(path: str, gateway: GatewayDep) -> QueueOut:
        return QueueOut.of(await gateway.manager.get_queue(path))

    @api.patch(
        "/api/queues/{path:path}",
        tags=["queues"],
        summary="Change label, quotas, journaling",
        responses={200: example(QUEUE_EXAMPLE), 404: QUEUE_NOT_FOUND},
    )
    async def update_queue(path: str, body: QueueUpdate, gateway: GatewayDep) -> QueueOut:
        return QueueOut.of(await gateway.manager.update_queue(path, body.changes()))

    @api.delete(
        "/api/queues/{path:path}",
        tags=["queues"],
        summary="Delete a queue, its journal and messages",
        responses={200: example({"deleted": "private$/orders", "messages_dropped": 3}), 404: QUEUE_NOT_FOUND},
    )
    async def delete_queue(path: str, gateway: GatewayDep) -> DeleteOut:
        dropped = await gateway.manager.delete_queue(path)
        return DeleteOut(deleted=path, messages_dropped=dropped)
