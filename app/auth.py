"""Credentials become a principal here, at the edge (API keys: app/keys.py): the Caller and
the request's Security, the helpers routes use to check a right, give ownership and audit, the
anonymous callers (the loopback administrator, the SRMP sender), the start-up refusal on a
network address, and audit pruning. app.authorization applies the rules to every request."""

from __future__ import annotations

import functools
import ipaddress
import logging
from dataclasses import dataclass
from datetime import timedelta

from fastapi import Request
from starlette.types import Scope

from app.client_certs import CertificateMapper, client_certificate
from app.keys import KeyVerifier, Unauthenticated
from app.settings import Settings
from qm.access import ANONYMOUS, ANONYMOUS_SRMP, BUILT_IN, AccessControl, AuditEntry, audit_text
from qm.manager import QueueManager
from qm.paths import QueuePath, parse_queue_path
from qm.rights import (
    QueueManagerRight,
    QueueRight,
    allows,
    on_queue,
    on_queue_manager,
    owner_grant,
)

log = logging.getLogger(__name__)

CALLER = "msmq.caller"
"""Scope key: the Caller of this request."""
AUDIT_NOTE = "msmq.audit_note"
"""Scope key: what an audited operation changes that its URL does not name (`note_for_audit`)."""
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network


@dataclass(frozen=True, slots=True)
class Caller:
    principal: str
    client: str
    authenticated: bool
    """Proved by a key or a mapped client certificate (not anonymous)."""
    everything: bool = False
    """The anonymous administrator (MSMQGW_ANONYMOUS_ADMIN): every right, no grant read."""


@dataclass(frozen=True)
class Security:
    """What authorization needs, built in the lifespan (app.state.security)."""

    settings: Settings
    keys: KeyVerifier
    access: AccessControl
    certificates: CertificateMapper
    srmp_networks: tuple[IPNetwork, ...] = ()

    def anonymous_is_administrator(self, client_host: str) -> bool:
        settings = self.settings
        return settings.anonymous_admin and (
            settings.allow_unauthenticated_network or is_loopback(client_host)
        )


async def srmp_refusal(security: Security, scope: Scope, queue: QueuePath) -> str | None:
    """Why the SRMP sender may not write `queue` (None: it may). A sender whose client
    certificate is mapped writes as that principal, with its own grants; any other as the
    anonymous SRMP sender, within MSMQGW_SRMP_ANONYMOUS_WRITE and MSMQGW_SRMP_CLIENT_CERT."""
    settings = security.settings
    host = (scope.get("client") or ("", 0))[0]
    if security.srmp_networks and not _within(host, security.srmp_networks):
        return f"an SRMP sender from {host} (outside MSMQGW_SRMP_SOURCE_NETWORKS) may not write"
    certificate = client_certificate(scope)
    principal = None if certificate is None else await security.certificates.principal_for(certificate)
    if principal is not None:
        grants = await security.access.grants_of(principal)
        allowed = allows(grants, on_queue(QueueRight.WRITE_MESSAGE, queue))
        return (
            None if allowed else f"{principal!r} (client certificate) lacks WRITE_MESSAGE on {queue.url_path}"
        )
    demanded = settings.srmp_client_cert
    if demanded == "mapped" or (demanded == "required" and certificate is None):
        what = "no client certificate" if certificate is None else "an unmapped client certificate"
        return f"an SRMP sender from {host} with {what} (MSMQGW_SRMP_CLIENT_CERT={demanded}) may not write"
    if settings.srmp_anonymous_write == "all":
        return None
    grants = await security.access.grants_of(ANONYMOUS_SRMP)
    if allows(grants, on_queue(QueueRight.WRITE_MESSAGE, queue)):
        return None
    return f"{ANONYMOUS_SRMP} from {host} may not write to {queue.url_path}"


def _within(host: str, networks: tuple[IPNetwork, ...]) -> bool:
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return any(address in network for network in networks)


@functools.lru_cache(maxsize=1024)
def is_loopback(host: str) -> bool:
    """Remembered per address: parsing one costs about 10 us, and clients come back."""
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _authorization(headers: list[tuple[bytes, bytes]]) -> bytes | None:
    for name, value in headers:
        if name == b"authorization":
            return value
    return None


async def caller_of(scope: Scope, security: Security) -> Caller:
    """A key (Authorization) or a mapped client certificate proves the principal; both may come
    only when they prove the same one. Two proofs of different principals are refused rather than
    one of them chosen: the request would act as someone its other credential does not name."""
    client = scope.get("client") or ("", 0)
    address = f"{client[0]}:{client[1]}"
    certificate = client_certificate(scope)
    by_certificate = None if certificate is None else await security.certificates.principal_for(certificate)
    header = _authorization(scope["headers"])
    if header is None:
        if by_certificate is not None:
            return Caller(by_certificate, address, True)
        return Caller(ANONYMOUS, address, False, security.anonymous_is_administrator(client[0]))
    principal = await security.keys.principal_for(header)
    if principal is None:
        raise Unauthenticated("the key is not valid (unknown, revoked, or not this principal's)")
    if by_certificate not in (None, principal):
        raise Unauthenticated(
            f"the key proves {principal!r} and the client certificate {by_certificate!r}: send one of them"
        )
    return Caller(principal, address, True)


def caller(request: Request) -> Caller:
    found: Caller = request.scope[CALLER]
    return found


def security_of(request: Request) -> Security:
    found: Security = request.app.state.security
    return found


async def authorize(request: Request, right: QueueRight | QueueManagerRight, queue: str | None) -> None:
    """For the routes whose queue is in the body (Locate.ROUTE): the same check, there."""
    who = caller(request)
    if who.everything:
        return
    if isinstance(right, QueueManagerRight):
        requirement = on_queue_manager(right)
    else:
        assert queue is not None
        requirement = on_queue(right, queue_path(request.app.state.gateway.manager, right, queue))
    await security_of(request).access.check(who.principal, requirement)


def queue_path(manager: QueueManager, right: QueueRight, text: str) -> QueuePath:
    """The queue an operation on `text` acts on, resolved as the queue manager resolves it: a
    format name is the local queue it designates, and a send may go to a remote queue's
    outgoing queue. Checking the text as written would let a format name pass unchecked."""
    return manager.destination(text) if right is QueueRight.WRITE_MESSAGE else manager.resolve(text)


def note_for_audit(request: Request, **named: object) -> None:
    """Name in the audit entry what the body named (the queue created, the principal given
    rights): its path parameters alone leave `POST /api/queues` with no target."""
    request.scope[AUDIT_NOTE] = " ".join(
        f"{name}={value}" for name, value in named.items() if value is not None
    )


async def give_ownership(request: Request, queue_path: str) -> None:
    """The creator of a queue owns it (qm.queue_security), with MQSEC_QUEUE_GENERIC_ALL on exactly
    its path. Anonymous callers own nothing: a grant to `anonymous` would reach every caller
    without a key, even one whose key names that principal (so neither built-in one owns)."""
    who = caller(request)
    if who.authenticated and who.principal not in BUILT_IN:
        path = parse_queue_path(queue_path)
        access = security_of(request).access
        await access.give([owner_grant(who.principal, path)])
        await access.set_owner(path, who.principal)


async def queue_deleted(request: Request, queue_path: str) -> None:
    path = request.app.state.gateway.manager.resolve(queue_path)
    await security_of(request).access.queue_deleted(path.url_path)


async def audit(request: Request, action: str, target: str, outcome: str) -> None:
    who = caller(request)
    await record(security_of(request), who, action, target, outcome)


async def record(security: Security, who: Caller, action: str, target: str, outcome: str) -> None:
    entry = AuditEntry(
        security.access.clock.now(),
        who.principal,
        who.client,
        audit_text(action),
        audit_text(target),
        outcome,
    )
    try:
        await security.access.store.record_audit(entry)
    except Exception:  # the change is made: a failed audit write is logged, not the caller's failure
        log.exception("audit entry not recorded: %s", entry)


def check_exposure(settings: Settings) -> None:
    """Refuse to listen on a network address while callers without credentials administer,
    unless MSMQGW_ALLOW_UNAUTHENTICATED_NETWORK says so (then warn)."""
    if is_loopback_name(settings.host) or not settings.anonymous_admin:
        return
    if settings.allow_unauthenticated_network:
        log.warning(
            "listening on %s and callers WITHOUT CREDENTIALS have every right "
            "(MSMQGW_ALLOW_UNAUTHENTICATED_NETWORK); see docs/security.md",
            settings.host,
        )
        return
    raise RuntimeError(
        f"refusing to listen on {settings.host}: callers without credentials would administer this "
        "gateway. Create an administrator key (msmq-gateway keys create --principal ops --admin) and set "
        "MSMQGW_ANONYMOUS_ADMIN=false, or set MSMQGW_ALLOW_UNAUTHENTICATED_NETWORK=true on a closed "
        "network (docs/security.md)"
    )


def is_loopback_name(host: str) -> bool:
    return host.strip().casefold() == "localhost" or is_loopback(host)


async def prune_audit_pass(access: AccessControl, settings: Settings) -> None:
    cutoff = access.clock.now() - timedelta(days=settings.audit_retention_days)
    pruned = await access.store.prune_audit(cutoff)
    if pruned:
        log.info("pruned %d audit entries older than %g days", pruned, settings.audit_retention_days)
