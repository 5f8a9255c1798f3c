"""/api/queues: create, list, show, update, delete, purge."""

from __future__ import annotations

from urllib.parse import quote

from fastapi import APIRouter, Request, Response, status
from pydantic import BaseModel, Field

from app import answers as a
from app.auth import give_ownership, note_for_audit, queue_deleted
from app.docs import QUEUE_EXAMPLE
from app.gateway import GatewayDep
from app.schemas import QueueCreate, QueueOut, QueueUpdate

router = APIRouter(prefix="/api/queues", tags=["queues"])


class PurgeOut(BaseModel):
    purged: int = Field(description="How many messages were removed")


class DeleteOut(BaseModel):
    deleted: str = Field(description="The queue as named in the request")
    messages_dropped: int = Field(description="Messages that were in it and its journal")


LOCATION = {
    "Location": {
        "description": "The new queue's URL path, its name percent-encoded where needed",
        "required": True,
        "schema": {"type": "string"},
        "example": "/api/queues/private$/orders",
    }
}


@router.get("", summary="List queues, journals and system queues", responses=a.answers(a.ok([QUEUE_EXAMPLE])))
async def list_queues(gateway: GatewayDep) -> list[QueueOut]:
    return [QueueOut.of(queue) for queue in await gateway.manager.list_queues()]


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    summary="Create a queue (and its journal)",
    responses=a.answers(
        {201: a.ok(QUEUE_EXAMPLE, "Created", 201)[201] | {"headers": LOCATION}},
        a.INVALID_PARAMETER,
        a.ILLEGAL_PATH,
        a.ILLEGAL_QUEUE_SETTING,
        a.QUEUE_EXISTS,
    ),
)
async def create_queue(
    body: QueueCreate, gateway: GatewayDep, request: Request, response: Response
) -> QueueOut:
    note_for_audit(request, path=body.path)
    queue = await gateway.manager.create_queue(body.path, body.settings())
    await give_ownership(request, queue.path.url_path)
    # Queue names may hold `#`, `?` or `%`: the URL carries them percent-encoded.
    response.headers["Location"] = f"/api/queues/{quote(queue.path.url_path, safe='$/')}"
    return QueueOut.of(queue)


@router.post(
    "/{path:path}/purge",
    summary="Remove every available message",
    responses=a.answers(a.ok({"purged": 3}), a.QUEUE_PATH),
)
async def purge_queue(path: str, gateway: GatewayDep) -> PurgeOut:
    return PurgeOut(purged=await gateway.manager.purge_queue(path))


def register_item_routes(api: APIRouter) -> None:
    """Routes on `/{path}` itself match anything, so they are added after all others."""

    @api.get(
        "/api/queues/{path:path}",
        tags=["queues"],
        summary="Show a queue with its totals",
        responses=a.answers(a.ok(QUEUE_EXAMPLE), a.QUEUE_PATH),
    )
    async def get_queue(path: str, gateway: GatewayDep) -> QueueOut:
        return QueueOut.of(await gateway.manager.get_queue(path))

    @api.patch(
        "/api/queues/{path:path}",
        tags=["queues"],
        summary="Change label, quotas, journaling",
        responses=a.answers(
            a.ok(QUEUE_EXAMPLE), a.INVALID_PARAMETER, a.ILLEGAL_QUEUE_SETTING, a.QUEUE_PATH, a.ADMINISTERED
        ),
    )
    async def update_queue(path: str, body: QueueUpdate, gateway: GatewayDep) -> QueueOut:
        return QueueOut.of(await gateway.manager.update_queue(path, body.changes()))

    @api.delete(
        "/api/queues/{path:path}",
        tags=["queues"],
        summary="Delete a queue, its journal and messages",
        responses=a.answers(
            a.ok({"deleted": "private$/orders", "messages_dropped": 3}), a.QUEUE_PATH, a.ADMINISTERED
        ),
    )
    async def delete_queue(path: str, gateway: GatewayDep, request: Request) -> DeleteOut:
        dropped = await gateway.manager.delete_queue(path)
        await queue_deleted(request, path)
        return DeleteOut(deleted=path, messages_dropped=dropped)
