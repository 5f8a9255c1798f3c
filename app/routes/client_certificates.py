"""/api/client-certificates: which verified TLS client certificates prove which principal
(docs/security.md, Principals by client certificate)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from fastapi import APIRouter, Path, Query, Request, status
from pydantic import BaseModel, Field

from app import answers as a
from app.auth import security_of
from app.client_certs import map_certificate
from app.parameters import INT32_MAX
from qm.access import MAX_DISTINGUISHED_NAME, CertificateMapping
from qm.errors import MqError, MqErrorCode

router = APIRouter(tags=["access"])
E = MqErrorCode
SUBJECT = "CN=winbox.example.net,OU=Servers,O=Example"
ISSUER = "CN=Example Issuing CA,DC=example,DC=net"
MAPPING_EXAMPLE = {
    "id": 1,
    "subject": SUBJECT,
    "issuer": ISSUER,
    "principal": "winbox",
    "description": "Windows sender in the order plant",
    "created_at": "2026-11-27T09:00:00Z",
}
NO_MAPPING = a.Problem(E.MQ_ERROR_INVALID_HANDLE, "no client certificate mapping 7")
MAPPED_ALREADY = a.Problem(
    E.MQ_ERROR_INVALID_PARAMETER,
    "a certificate of this subject and issuer is mapped already (delete that mapping first)",
)
NAME = (
    "An RFC 4514 string, compared exactly as `GET /api/me` shows it for a client presenting the certificate"
)


class MappingCreate(BaseModel):
    subject: str = Field(
        min_length=1,
        max_length=MAX_DISTINGUISHED_NAME,
        description=f"The certificate's subject. {NAME}",
        examples=[SUBJECT],
    )
    issuer: str = Field(
        min_length=1,
        max_length=MAX_DISTINGUISHED_NAME,
        description=f"The subject of the CA that issued it. {NAME}",
        examples=[ISSUER],
    )
    principal: str = Field(description="Who the certificate proves; created if new", examples=["winbox"])
    description: str = Field("", max_length=500, description="What the certificate is for")


class MappingOut(BaseModel):
    id: int = Field(description="The mapping's ID (to delete it)")
    subject: str = Field(description="The certificate's subject (RFC 4514)")
    issuer: str = Field(description="Its issuer's subject (RFC 4514)")
    principal: str = Field(description="Who a verified certificate of this subject and issuer proves")
    description: str = Field(description="What the certificate is for")
    created_at: datetime = Field(description="When the mapping was made")

    @classmethod
    def of(cls, mapping: CertificateMapping) -> MappingOut:
        return cls(
            id=mapping.id,
            subject=mapping.subject,
            issuer=mapping.issuer,
            principal=mapping.principal,
            description=mapping.description,
            created_at=mapping.created_at,
        )


@router.get(
    "/api/client-certificates",
    summary="List the client certificates that prove principals",
    responses=a.answers(a.ok([MAPPING_EXAMPLE])),
)
async def list_mappings(
    request: Request, principal: Annotated[str | None, Query(description="Only this principal's")] = None
) -> list[MappingOut]:
    found = await security_of(request).access.store.list_certificates(principal)
    return [MappingOut.of(mapping) for mapping in found]


@router.post(
    "/api/client-certificates",
    status_code=status.HTTP_201_CREATED,
    summary="Make a client certificate prove a principal",
    description="A client whose certificate the TLS handshake verified against MSMQGW_TLS_CLIENT_CA_FILE, "
    "with exactly this subject and issuer, is this principal: over the API (unless it also sends a key of "
    "another principal: 401) and as an SRMP sender. Other gateway processes see a new mapping within "
    "MSMQGW_AUTH_CACHE_TTL_S.",
    responses=a.answers(a.ok(MAPPING_EXAMPLE, "Created", 201), a.INVALID_PARAMETER, MAPPED_ALREADY),
)
async def create_mapping(body: MappingCreate, request: Request) -> MappingOut:
    security = security_of(request)
    access = security.access
    mapping = await map_certificate(
        access.store, body.subject, body.issuer, body.principal, body.description, access.clock.now()
    )
    security.certificates.forget()
    return MappingOut.of(mapping)


@router.delete(
    "/api/client-certificates/{mapping_id}",
    status_code=204,
    summary="Stop a client certificate proving its principal",
    description="A certificate no longer mapped is anonymous: at once in this process, in other gateway "
    "processes within MSMQGW_AUTH_CACHE_TTL_S.",
    responses=a.answers(a.done("Deleted"), NO_MAPPING),
)
async def delete_mapping(
    mapping_id: Annotated[
        int, Path(ge=1, le=INT32_MAX, description="The mapping's `id` (a 32-bit number)", examples=[1])
    ],
    request: Request,
) -> None:
    security = security_of(request)
    if not await security.access.store.delete_certificate(mapping_id):
        raise MqError(E.MQ_ERROR_INVALID_HANDLE, f"no client certificate mapping {mapping_id}")
    security.certificates.forget()
