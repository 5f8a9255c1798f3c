"""Principals, their API keys and grants, and the audit log: the values, the store port, and
the service that answers "may this principal do that?" from its (briefly remembered) grants.

Credentials are checked at the edge (app/auth.py); what a principal may do is decided here,
by qm.rights, so REST, SOAP and the console cannot disagree.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from qm.clock import Clock
from qm.errors import MqError, MqErrorCode
from qm.paths import QueuePath, parse_queue_path
from qm.queue_security import owner_may
from qm.rights import Grant, Requirement, allows, require

ANONYMOUS = "anonymous"
"""Who sends no credentials to the REST and SOAP APIs."""
ANONYMOUS_SRMP = "anonymous-srmp"
"""Who sends an SRMP message: MSMQ's HTTP transport carries no Windows identity."""
BUILT_IN = (ANONYMOUS, ANONYMOUS_SRMP)
MAX_PRINCIPAL_NAME = 124
AUDIT_PAGE_MAX = 500


@dataclass(frozen=True, slots=True)
class Principal:
    name: str
    description: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class ApiKeyRecord:
    key_id: str
    """The public part of the key (`mgw_<key_id>_<secret>`), also the HTTP Basic user name."""
    principal: str
    salt: bytes
    hash: bytes
    """scrypt(secret, salt): the secret itself is never stored."""
    description: str
    created_at: datetime
    revoked_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class CertificateMapping:
    """A client certificate, by its subject and issuer (RFC 4514 strings, compared exactly),
    proves `principal`. The issuer is part of the key: a subject is only a name, and any CA the
    gateway trusts could put any name in a certificate it signs."""

    subject: str
    issuer: str
    principal: str
    description: str
    created_at: datetime
    id: int = 0


@dataclass(frozen=True, slots=True)
class AuditEntry:
    at: datetime
    principal: str
    client: str
    """The client's address as the server saw it (`host:port`, or `local` for the CLI)."""
    action: str
    """`POST /api/queues`, `soap CreateQueue`, `cli keys revoke`."""
    target: str
    outcome: str
    """`allowed 201`, `denied`, `failed 409`."""
    id: int = 0


class AccessRepository(Protocol):
    async def ensure_principal(self, name: str, description: str, now: datetime) -> Principal: ...

    async def list_principals(self) -> list[Principal]: ...

    async def delete_principal(self, name: str) -> bool:
        """With its keys, certificate mappings and grants."""
        ...

    async def add_key(self, record: ApiKeyRecord) -> None: ...

    async def find_key(self, key_id: str) -> ApiKeyRecord | None: ...

    async def list_keys(self, principal: str | None) -> list[ApiKeyRecord]: ...

    async def revoke_key(self, key_id: str, now: datetime) -> bool:
        """False when there is no such key, or it was revoked already."""
        ...

    async def add_certificate(self, mapping: CertificateMapping) -> CertificateMapping:
        """With its ID; MQ_ERROR_INVALID_PARAMETER when that subject and issuer are mapped already."""
        ...

    async def find_certificate(self, subject: str, issuer: str) -> CertificateMapping | None: ...

    async def list_certificates(self, principal: str | None) -> list[CertificateMapping]: ...

    async def delete_certificate(self, mapping_id: int) -> bool: ...

    async def grants_of(self, principal: str) -> list[Grant]: ...

    async def list_grants(self, principal: str | None) -> list[Grant]: ...

    async def change_grant(
        self, principal: str, queue: str | None, add: int, remove: int, exact: bool = False
    ) -> Grant | None:
        """The principal's rights on that scope become (old | add) & ~remove; None: none left.
        A queue path without `*`, or `exact`, is the scope of that one queue: every grant on
        exactly its path (ASCII case folded) is merged into one."""
        ...

    async def queue_owner(self, path_key: str) -> str | None:
        """The owner of the queue whose QueuePath.key this is; None: no owner, or no queue."""
        ...

    async def set_queue_owner(self, path_key: str, principal: str) -> bool:
        """False when there is no such queue."""
        ...

    async def delete_queue_grants(self, queue: str) -> int:
        """The grants on exactly this queue path (ASCII case folded), not patterns that match it."""
        ...

    async def record_audit(self, entry: AuditEntry) -> None: ...

    async def audit_page(self, before_id: int | None, limit: int) -> list[AuditEntry]:
        """Newest first."""
        ...

    async def prune_audit(self, older_than: datetime) -> int: ...


def audit_text(text: str) -> str:
    """Text as an audit entry can hold it in either store: what the caller named may hold a NUL
    (PostgreSQL refuses one in text) or, from a command line, a lone surrogate (neither store
    encodes one); they are written as escapes instead, so the entry is not lost."""
    if text.isascii() and "\x00" not in text:
        return text
    return text.replace("\x00", "\\x00").encode("utf-8", "backslashreplace").decode("utf-8")


def check_principal_name(name: str) -> str:
    if not name or len(name) > MAX_PRINCIPAL_NAME or not name.isprintable() or ":" in name:
        raise MqError(
            MqErrorCode.MQ_ERROR_INVALID_PARAMETER,
            f"a principal's name is 1-{MAX_PRINCIPAL_NAME} printable characters without ':' "
            "(HTTP Basic separates user and password with it)",
        )
    return name


def check_provable_principal(name: str) -> str:
    """Whom a credential (an API key, a client certificate's mapping) may prove: not a built-in
    principal. One proving `anonymous` would make the queues its holder creates every keyless
    caller's (the creator's grant), and one proving `anonymous-srmp` would give a REST client
    what is granted to Windows senders."""
    check_principal_name(name)
    if name in BUILT_IN:
        raise MqError(
            MqErrorCode.MQ_ERROR_INVALID_PARAMETER,
            f"{name!r} is a built-in principal: callers are it without credentials, none proves it",
        )
    return name


MAX_DISTINGUISHED_NAME = 1000


def check_distinguished_name(name: str, what: str) -> str:
    if not name or len(name) > MAX_DISTINGUISHED_NAME or not name.isprintable():
        raise MqError(
            MqErrorCode.MQ_ERROR_INVALID_PARAMETER,
            f"a certificate's {what} is an RFC 4514 string of 1-{MAX_DISTINGUISHED_NAME} printable "
            "characters, such as CN=winbox.example.net,O=Example",
        )
    return name


class AccessControl:
    """Grants per principal, remembered for `ttl_s` so that a request after the first reads
    nothing: another process's change is seen within that time, this process's at once."""

    def __init__(
        self,
        store: AccessRepository,
        clock: Clock,
        ttl_s: float,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.clock = clock
        self._ttl_s = ttl_s
        self._monotonic = monotonic
        self._grants: dict[str, tuple[float, tuple[Grant, ...]]] = {}
        self.generation = 0
        """Moves on each change of grants here: decisions remembered elsewhere compare it."""

    async def grants_of(self, principal: str) -> tuple[Grant, ...]:
        now = self._monotonic()
        remembered = self._grants.get(principal)
        if remembered is not None and remembered[0] > now:
            return remembered[1]
        grants = tuple(await self.store.grants_of(principal))
        if len(self._grants) >= 4096:  # principals are few; bounded all the same
            self._grants.clear()
        self._grants[principal] = (now + self._ttl_s, grants)
        return grants

    def forget(self) -> None:
        """After a change of grants here: the next check reads them again."""
        self._grants.clear()
        self.generation += 1

    def known_until(self, principal: str) -> float:
        """Until when (monotonic) the remembered grants of `principal` are used: a decision
        taken from them may be remembered as long, and no longer."""
        remembered = self._grants.get(principal)
        return remembered[0] if remembered is not None else 0.0

    def monotonic(self) -> float:
        return self._monotonic()

    async def check(self, principal: str, requirement: Requirement) -> None:
        """MQ_ERROR_ACCESS_DENIED unless the principal's grants allow it, or it owns the queue
        and the requirement is within an owner's implicit rights (qm.queue_security)."""
        grants = await self.grants_of(principal)
        if allows(grants, requirement):
            return
        if owner_may(requirement) and await self.owner_of(requirement.queue) == principal:
            return
        require(principal, grants, requirement)

    async def owner_of(self, queue: str | None) -> str | None:
        if queue is None:
            return None
        try:
            path = parse_queue_path(queue)
        except MqError:
            return None
        return await self.store.queue_owner(path.key)

    async def set_owner(self, path: QueuePath, principal: str) -> bool:
        """The principal owns the queue from now on (False: no such queue)."""
        if principal in BUILT_IN:
            raise MqError(
                MqErrorCode.MQ_ERROR_INVALID_PARAMETER,
                f"{principal!r} cannot own a queue: its rights reach every caller it stands for",
            )
        check_principal_name(principal)
        await self.store.ensure_principal(principal, "", self.clock.now())
        try:
            return await self.store.set_queue_owner(path.key, principal)
        finally:
            self.forget()

    async def change_grant(
        self, principal: str, queue: str | None, add: int, remove: int, exact: bool = False
    ) -> Grant | None:
        check_principal_name(principal)
        await self.store.ensure_principal(principal, "", self.clock.now())
        try:
            return await self.store.change_grant(principal, queue, add, remove, exact)
        finally:
            self.forget()

    async def give(self, grants: Sequence[Grant]) -> None:
        """Add these grants (a queue's owner, an administrator)."""
        for grant in grants:
            await self.change_grant(grant.principal, grant.queue, grant.rights, 0, grant.exact)

    async def queue_deleted(self, queue: str) -> None:
        """A deleted queue's own grants go with it, as its ACL does in MSMQ: a queue created
        later under the same name starts with only its new creator's."""
        try:
            await self.store.delete_queue_grants(queue)
        finally:
            self.forget()

    async def delete_principal(self, name: str) -> bool:
        try:
            return await self.store.delete_principal(name)
        finally:
            self.forget()
