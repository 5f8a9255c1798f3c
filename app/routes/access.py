"""/api/principals, /api/keys, /api/grants, /api/audit: who may do what, and what was done."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Path, Query, Request, status
from pydantic import BaseModel, Field

from app import answers as a
from app.auth import caller, note_for_audit, security_of
from app.client_certs import client_certificate
from app.gateway import GatewayDep
from app.keys import key_record
from app.parameters import Strict
from qm.access import (
    AUDIT_PAGE_MAX,
    ApiKeyRecord,
    AuditEntry,
    Principal,
    check_provable_principal,
)
from qm.errors import MqError, MqErrorCode
from qm.queue_security import OWNER_IMPLICIT
from qm.rights import Grant, every_right, parse_rights, rights_held, rights_names

router = APIRouter(tags=["access"])
E = MqErrorCode
NO_KEY = a.Problem(E.MQ_ERROR_INVALID_HANDLE, "no live key 3f2b8c1d9e0a4b5c (unknown, or revoked already)")
NO_PRINCIPAL = a.Problem(E.MQ_ERROR_INVALID_HANDLE, "no principal 'orders-app'")
UNKNOWN_RIGHT = a.Problem(
    E.MQ_ERROR_INVALID_PARAMETER, "'SEND' is not a queue right; known: DELETE_MESSAGE, ..."
)
CREATED = "2026-11-27T09:00:00Z"
KEY_EXAMPLE = {
    "key_id": "3f2b8c1d9e0a4b5c",
    "principal": "orders-app",
    "description": "order service, production",
    "created_at": CREATED,
    "revoked_at": None,
}
GRANT_EXAMPLE = {
    "principal": "orders-app",
    "queue": "private$/orders",
    "rights": ["DELETE_MESSAGE", "PEEK_MESSAGE", "WRITE_MESSAGE"],
    "mask": 7,
    "exact": False,
}


class PrincipalOut(BaseModel):
    name: str = Field(description="The principal's name (an API key's owner, `anonymous`, `anonymous-srmp`)")
    description: str = Field(description="What the principal is")
    created_at: datetime = Field(description="When it was first named")

    @classmethod
    def of(cls, principal: Principal) -> PrincipalOut:
        return cls(name=principal.name, description=principal.description, created_at=principal.created_at)


class KeyCreate(Strict):
    principal: str = Field(description="Who the key proves; created if new", examples=["orders-app"])
    description: str = Field("", max_length=500, description="What the key is for")


class KeyOut(BaseModel):
    key_id: str = Field(description="The key's public part; also the HTTP Basic user name")
    principal: str = Field(description="Who the key proves")
    description: str = Field(description="What the key is for")
    created_at: datetime = Field(description="When the key was created")
    revoked_at: datetime | None = Field(description="When it was revoked; null: live")

    @classmethod
    def of(cls, record: ApiKeyRecord) -> KeyOut:
        return cls(
            key_id=record.key_id,
            principal=record.principal,
            description=record.description,
            created_at=record.created_at,
            revoked_at=record.revoked_at,
        )


class NewKeyOut(KeyOut):
    key: str = Field(description="The key itself: shown this once, never stored (only a slow hash of it)")


class GrantChange(Strict):
    principal: str = Field(description="Who is given the rights; created if new", examples=["orders-app"])
    queue: str | None = Field(
        min_length=1,
        max_length=400,
        description="A queue path or pattern (`*` = any characters), or null for the queue manager",
        examples=["private$/orders"],
    )
    rights: list[str] = Field(
        min_length=1,
        max_length=64,
        description="Names from docs/security.md: queue rights (MQQUEUEACCESSMASK, e.g. RECEIVE_MESSAGE, "
        "GENERIC_WRITE) or, for the queue manager, its rights (CREATE_QUEUE, MANAGE_TRIGGERS, ...)",
        examples=[["RECEIVE_MESSAGE", "WRITE_MESSAGE"]],
    )
    revoke: bool = Field(False, description="Take these rights away instead of giving them")
    exact: bool = Field(
        False,
        description="Exactly the queue named `queue`: its `*` are characters of the queue's name "
        "(a queue may be named `private$/a*`), not wildcards",
    )


class GrantOut(BaseModel):
    principal: str = Field(description="Who holds the rights")
    queue: str | None = Field(description="Pattern, or null for the queue manager")
    rights: list[str] = Field(description="Single rights held (generic ones spelled out); empty: none left")
    mask: int = Field(description="The MSMQ access mask (queue-manager rights: docs/security.md)")
    exact: bool = Field(
        False, description="The `*` in `queue` are characters of one queue's name, not wildcards"
    )

    @classmethod
    def of(cls, grant: Grant) -> GrantOut:
        return cls(
            principal=grant.principal,
            queue=grant.queue,
            rights=rights_names(grant.rights, grant.queue),
            mask=grant.rights,
            exact=grant.exact,
        )


class AuditEntryOut(BaseModel):
    id: int = Field(description="Increasing; page with `before`")
    at: datetime = Field(description="When it was done")
    principal: str = Field(description="Who did it")
    client: str = Field(description="From where: the client's address and port as the gateway saw them")
    action: str = Field(description="The operation: `METHOD route` or `SOAP Operation`")
    target: str = Field(description="What it named (its path parameters, or the SOAP operation's queue)")
    outcome: str = Field(description="`allowed <status>`, `failed <status or MQ_ERROR>`, or `denied`")

    @classmethod
    def of(cls, entry: AuditEntry) -> AuditEntryOut:
        return cls(
            id=entry.id,
            at=entry.at,
            principal=entry.principal,
            client=entry.client,
            action=entry.action,
            target=entry.target,
            outcome=entry.outcome,
        )


class AuditPage(BaseModel):
    entries: list[AuditEntryOut] = Field(description="Newest first")
    next_before: int | None = Field(description="Pass as `before` for the next (older) page; null: no more")


PrincipalFilter = Annotated[str | None, Query(description="Only this principal's")]


@router.get(
    "/api/principals",
    summary="List principals",
    responses=a.answers(a.ok([{"name": "orders-app", "description": "", "created_at": CREATED}])),
)
async def list_principals(request: Request) -> list[PrincipalOut]:
    return [PrincipalOut.of(found) for found in await security_of(request).access.store.list_principals()]


@router.delete(
    "/api/principals/{name}",
    status_code=204,
    summary="Delete a principal with its keys and grants",
    responses=a.answers(a.done("Deleted"), NO_PRINCIPAL),
)
async def delete_principal(
    name: Annotated[str, Path(description="The principal's name", examples=["orders-app"])], request: Request
) -> None:
    security = security_of(request)
    keys = await security.access.store.list_keys(name)
    deleted = await security.access.delete_principal(name)
    security.certificates.forget()
    if not deleted:
        raise MqError(E.MQ_ERROR_INVALID_HANDLE, f"no principal {name!r}")
    for record in keys:  # refused by this process at once, as a revocation here is
        security.keys.forget(record.key_id)


@router.get(
    "/api/keys", summary="List API keys (never the keys themselves)", responses=a.answers(a.ok([KEY_EXAMPLE]))
)
async def list_keys(request: Request, principal: PrincipalFilter = None) -> list[KeyOut]:
    return [KeyOut.of(record) for record in await security_of(request).access.store.list_keys(principal)]


@router.post(
    "/api/keys",
    status_code=status.HTTP_201_CREATED,
    summary="Create an API key (shown once)",
    description="Send it as `Authorization: Bearer <key>`, or as HTTP Basic with the key as password "
    "and the principal or key ID as user name. Its rights are its principal's grants.",
    responses=a.answers(
        a.ok(KEY_EXAMPLE | {"key": "mgw_3f2b8c1d9e0a4b5c_x2Vh…"}, "Created", 201), a.INVALID_PARAMETER
    ),
)
async def create_key(body: KeyCreate, request: Request) -> NewKeyOut:
    access = security_of(request).access
    note_for_audit(request, principal=body.principal)
    principal = check_provable_principal(body.principal)
    now = access.clock.now()
    await access.store.ensure_principal(principal, "", now)
    text, record = await asyncio.to_thread(
        key_record, principal, body.description, now
    )  # scrypt: off the loop
    await access.store.add_key(record)
    note_for_audit(request, principal=principal, key_id=record.key_id)
    return NewKeyOut(**KeyOut.of(record).model_dump(), key=text)


@router.delete(
    "/api/keys/{key_id}",
    status_code=204,
    summary="Revoke an API key",
    description="Refused by this process at once, by other gateway processes within MSMQGW_AUTH_CACHE_TTL_S.",
    responses=a.answers(a.done("Revoked"), NO_KEY),
)
async def revoke_key(
    key_id: Annotated[str, Path(description="The key's ID (`key_id`)", examples=["3f2b8c1d9e0a4b5c"])],
    request: Request,
) -> None:
    security = security_of(request)
    if not await security.access.store.revoke_key(key_id, security.access.clock.now()):
        raise MqError(E.MQ_ERROR_INVALID_HANDLE, f"no live key {key_id!r} (unknown, or revoked already)")
    security.keys.forget(key_id)


@router.get("/api/grants", summary="List grants", responses=a.answers(a.ok([GRANT_EXAMPLE])))
async def list_grants(request: Request, principal: PrincipalFilter = None) -> list[GrantOut]:
    return [GrantOut.of(grant) for grant in await security_of(request).access.store.list_grants(principal)]


@router.post(
    "/api/grants",
    summary="Give (or, with revoke, take away) rights on a queue pattern or the queue manager",
    responses=a.answers(a.ok(GRANT_EXAMPLE), a.INVALID_PARAMETER, UNKNOWN_RIGHT),
)
async def change_grant(body: GrantChange, request: Request) -> GrantOut:
    rights_named = ",".join(body.rights)
    note_for_audit(
        request, principal=body.principal, queue=body.queue, rights=rights_named, revoke=body.revoke or None
    )
    rights = parse_rights(rights_named, body.queue)
    add, remove = (0, rights) if body.revoke else (rights, 0)
    exact = body.exact and body.queue is not None
    changed = await security_of(request).access.change_grant(body.principal, body.queue, add, remove, exact)
    return GrantOut.of(changed or Grant(body.principal, body.queue, 0, exact and "*" in (body.queue or "")))


@router.get(
    "/api/audit",
    summary="The audit log, newest first",
    responses=a.answers(a.ok({"entries": [], "next_before": None}), a.INVALID_PARAMETER),
)
async def audit_log(
    request: Request,
    before: Annotated[int | None, Query(ge=1, description="Entries older than this ID")] = None,
    limit: Annotated[int, Query(ge=1, le=AUDIT_PAGE_MAX, description="Entries in one page")] = 100,
) -> AuditPage:
    entries = await security_of(request).access.store.audit_page(before, limit)
    next_before = entries[-1].id if len(entries) == limit else None
    return AuditPage(entries=[AuditEntryOut.of(entry) for entry in entries], next_before=next_before)


class CertificateOut(BaseModel):
    subject: str = Field(description="Its subject (RFC 4514), as a mapping must name it")
    issuer: str = Field(description="Its issuer's subject (RFC 4514), as a mapping must name it")


class MeOut(BaseModel):
    principal: str = Field(description="Who the request was taken to come from")
    authenticated: bool = Field(description="Proved by an API key or a mapped client certificate")
    administrator: bool = Field(
        description="The anonymous administrator of a loopback caller (MSMQGW_ANONYMOUS_ADMIN): every right"
    )
    client_certificate: CertificateOut | None = Field(
        None, description="The TLS client certificate the handshake verified; null: none"
    )


class RightsOut(BaseModel):
    queue: str | None = Field(description="The queue asked about; null: the queue manager")
    rights: list[str] = Field(
        description="The single rights the caller holds there (MQQUEUEACCESSMASK names on a queue, "
        "MQQMACCESSMASK and the gateway's own on the queue manager): what the console shows"
    )


@router.get(
    "/api/me",
    summary="Who the caller is",
    responses=a.answers(
        a.ok(
            {
                "principal": "winbox",
                "authenticated": True,
                "administrator": False,
                "client_certificate": {
                    "subject": "CN=winbox.example.net,O=Example",
                    "issuer": "CN=Example Issuing CA,DC=example,DC=net",
                },
            }
        )
    ),
)
async def who_am_i(request: Request) -> MeOut:
    who = caller(request)
    certificate = client_certificate(request.scope)
    shown = (
        None
        if certificate is None
        else CertificateOut(subject=certificate.subject, issuer=certificate.issuer)
    )
    return MeOut(
        principal=who.principal,
        authenticated=who.authenticated,
        administrator=who.everything,
        client_certificate=shown,
    )


@router.get(
    "/api/me/rights",
    summary="The rights the caller holds on a queue, or on the queue manager",
    description="Each right as `allows` decides it for an operation there: a dead-letter or "
    "journal queue answers with the rights that apply to it (MSMQ's queue-manager rights). What "
    "the console asks to show only the actions a principal may take; the gateway checks every "
    "operation itself either way.",
    responses=a.answers(
        a.ok({"queue": "private$/orders", "rights": ["PEEK_MESSAGE", "WRITE_MESSAGE"]}),
        a.INVALID_PARAMETER,
        a.QUEUE_PATH,
    ),
)
async def my_rights(
    request: Request,
    gateway: GatewayDep,
    queue: Annotated[
        str | None, Query(max_length=300, description="A queue path; absent: the queue manager")
    ] = None,
) -> RightsOut:
    who = caller(request)
    path = None if queue is None else gateway.manager.resolve(queue)
    if who.everything:
        return RightsOut(queue=queue, rights=every_right(path))
    access = security_of(request).access
    grants = await access.grants_of(who.principal)
    owned = path is not None and path.writable and await access.owner_of(path.url_path) == who.principal
    return RightsOut(queue=queue, rights=rights_held(grants, path, OWNER_IMPLICIT if owned else 0))
