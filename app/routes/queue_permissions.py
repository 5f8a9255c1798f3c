"""/api/queues/{path}/permissions and /owner: one queue's security, as MQGetQueueSecurity and
MQSetQueueSecurity see it, and taking ownership of it (qm.queue_security).

The queue's own rights guard these: GET_PERMISSIONS, CHANGE_PERMISSIONS and TAKE_OWNERSHIP
(app/access_rules.py), which its owner holds as it creates it. What they change is only the
grants on exactly this queue's path: never a pattern, never the queue manager's rights
(/api/grants, with the queue manager's CHANGE_PERMISSIONS, changes those).
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Request
from pydantic import BaseModel, Field

from app import answers as a
from app.auth import caller, security_of
from app.gateway import Gateway, GatewayDep
from app.routes.access import UNKNOWN_RIGHT, GrantOut
from qm.errors import MqError, MqErrorCode
from qm.model import Queue
from qm.queue_security import OWNER_IMPLICIT, QueueSecurity, SecurityEntry, queue_security, securable
from qm.rights import Grant, parse_rights, rights_names

router = APIRouter(tags=["access"])
E = MqErrorCode
QueuePathParameter = Annotated[
    str,
    Path(description="The queue's path (`private$/orders`) or a format name", examples=["private$/orders"]),
]
NO_SECURITY = a.Problem(
    E.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME,
    "'private$/orders;journal' has no security of its own: name a public or private queue",
)
ANONYMOUS_OWNER = a.Problem(
    E.MQ_ERROR_ACCESS_DENIED, "a caller without credentials cannot own a queue (send an API key)"
)
BUILT_IN_OWNER = a.Problem(
    E.MQ_ERROR_INVALID_PARAMETER,
    "'anonymous' cannot own a queue: its rights reach every caller it stands for",
)
PERMISSIONS_EXAMPLE = {
    "queue": "private$/orders",
    "owner": "orders-admin",
    "owner_rights": ["GET_PERMISSIONS", "CHANGE_PERMISSIONS"],
    "grants": [
        {
            "principal": "orders-admin",
            "queue": "private$/orders",
            "own": True,
            "rights": rights_names(0xF003F, "private$/orders"),
            "mask": 0xF003F,
        },
        {
            "principal": "orders-app",
            "queue": "private$/orders",
            "own": True,
            "rights": ["DELETE_MESSAGE", "PEEK_MESSAGE"],
            "mask": 3,
        },
        {"principal": "auditor", "queue": "private$/*", "own": False, "rights": ["PEEK_MESSAGE"], "mask": 2},
    ],
}
QUEUE_GRANT_EXAMPLE = {
    "principal": "orders-app",
    "queue": "private$/orders",
    "rights": ["DELETE_MESSAGE", "PEEK_MESSAGE"],
    "mask": 3,
    "exact": False,
}


class SecurityEntryOut(BaseModel):
    principal: str = Field(description="Who holds the rights")
    queue: str = Field(description="The grant's scope as written: this queue's path, or a pattern")
    own: bool = Field(
        description="true: a grant on exactly this queue (what this queue's CHANGE_PERMISSIONS changes); "
        "false: a pattern that matches it (only /api/grants changes it)"
    )
    rights: list[str] = Field(description="Single rights held (generic ones spelled out)")
    mask: int = Field(description="The MQQUEUEACCESSMASK")

    @classmethod
    def of(cls, entry: SecurityEntry) -> SecurityEntryOut:
        return cls(
            principal=entry.principal,
            queue=entry.queue,
            own=entry.own,
            rights=rights_names(entry.rights, entry.queue),
            mask=entry.rights,
        )


class QueuePermissionsOut(BaseModel):
    queue: str = Field(description="The queue, as its path is stored")
    owner: str | None = Field(
        description="Who owns it: its creator, or who took ownership since; null: nobody (created "
        "without credentials, by the CLI, or before the gateway recorded owners)"
    )
    owner_rights: list[str] = Field(
        description="What the owner holds on the queue without a grant (as a Windows owner holds "
        "READ_CONTROL and WRITE_DAC)"
    )
    grants: list[SecurityEntryOut] = Field(description="Every grant that reaches the queue, its own first")

    @classmethod
    def of(cls, security: QueueSecurity) -> QueuePermissionsOut:
        return cls(
            queue=security.path.url_path,
            owner=security.owner,
            owner_rights=rights_names(OWNER_IMPLICIT, security.path.url_path),
            grants=[SecurityEntryOut.of(entry) for entry in security.entries],
        )


class QueuePermissionChange(BaseModel):
    principal: str = Field(description="Who is given the rights; created if new", examples=["orders-app"])
    rights: list[str] = Field(
        min_length=1,
        max_length=64,
        description="Queue rights (MQQUEUEACCESSMASK names: RECEIVE_MESSAGE, GENERIC_WRITE, ...; "
        "docs/security.md)",
        examples=[["RECEIVE_MESSAGE"]],
    )
    revoke: bool = Field(False, description="Take these rights away instead of giving them")


class QueueOwnerOut(BaseModel):
    queue: str = Field(description="The queue, as its path is stored")
    owner: str = Field(description="Who owns it now: the caller")


async def _securable_queue(path: str, gateway: Gateway) -> Queue:
    securable(gateway.manager.resolve(path))
    return await gateway.manager.get_queue(path)


@router.get(
    "/api/queues/{path:path}/permissions",
    summary="Show a queue's owner and the grants that reach it (MQGetQueueSecurity)",
    description="Needs the queue's GET_PERMISSIONS, which its owner holds without a grant.",
    responses=a.answers(a.ok(PERMISSIONS_EXAMPLE), a.QUEUE_PATH, NO_SECURITY),
)
async def get_permissions(
    path: QueuePathParameter, gateway: GatewayDep, request: Request
) -> QueuePermissionsOut:
    queue = await _securable_queue(path, gateway)
    access = security_of(request).access
    owner = await access.owner_of(queue.path.url_path)
    grants = await access.store.list_grants(None)
    return QueuePermissionsOut.of(queue_security(queue.path, owner, grants))


@router.post(
    "/api/queues/{path:path}/permissions",
    summary="Give (or, with revoke, take away) rights on exactly this queue (MQSetQueueSecurity)",
    description="Needs the queue's CHANGE_PERMISSIONS, which its owner holds without a grant. Changes "
    "only the principal's grant on exactly this queue's path; patterns and the queue manager's rights "
    "are /api/grants'. Answers the principal's grant on the queue as it is now.",
    responses=a.answers(
        a.ok(QUEUE_GRANT_EXAMPLE), a.INVALID_PARAMETER, UNKNOWN_RIGHT, a.QUEUE_PATH, NO_SECURITY
    ),
)
async def change_permissions(
    path: QueuePathParameter, body: QueuePermissionChange, gateway: GatewayDep, request: Request
) -> GrantOut:
    queue = await _securable_queue(path, gateway)
    scope = queue.path.url_path
    rights = parse_rights(",".join(body.rights), scope)
    add, remove = (0, rights) if body.revoke else (rights, 0)
    access = security_of(request).access
    changed = await access.change_grant(body.principal, scope, add, remove, exact=True)
    await _still_there(path, gateway, request)
    return GrantOut.of(changed or Grant(body.principal, scope, 0, "*" in scope))


async def _still_there(path: str, gateway: Gateway, request: Request) -> None:
    """A queue deleted while its grant was written takes the grant with it, as its ACL goes with
    it in MSMQ: a queue created later under the same name must not inherit it."""
    try:
        await gateway.manager.get_queue(path)
    except MqError as error:
        if error.code is E.MQ_ERROR_QUEUE_NOT_FOUND:
            await security_of(request).access.queue_deleted(gateway.manager.resolve(path).url_path)
        raise


@router.post(
    "/api/queues/{path:path}/owner",
    summary="Take ownership of a queue",
    description="Needs the queue's TAKE_OWNERSHIP. The caller becomes the owner, and so holds the "
    "queue's GET_PERMISSIONS and CHANGE_PERMISSIONS; the grants stay as they are. A caller without "
    "credentials cannot own a queue.",
    responses=a.answers(
        a.ok({"queue": "private$/orders", "owner": "ops"}),
        ANONYMOUS_OWNER,
        BUILT_IN_OWNER,
        a.QUEUE_PATH,
        NO_SECURITY,
    ),
)
async def take_ownership(path: QueuePathParameter, gateway: GatewayDep, request: Request) -> QueueOwnerOut:
    who = caller(request)
    if not who.authenticated:
        raise MqError(E.MQ_ERROR_ACCESS_DENIED, ANONYMOUS_OWNER.detail)
    queue = await _securable_queue(path, gateway)
    if not await security_of(request).access.set_owner(queue.path, who.principal):
        raise MqError(E.MQ_ERROR_QUEUE_NOT_FOUND, f"no queue {path}")
    return QueueOwnerOut(queue=queue.path.url_path, owner=who.principal)
