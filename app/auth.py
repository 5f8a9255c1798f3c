"""Credentials become a principal here, at the edge (API keys: app/keys.py); `Authorization`
then applies the rule of app/access_rules.py to every request, asking qm (AccessControl)
whether the principal may. Also: the anonymous callers (the loopback administrator, the SRMP
sender), the start-up refusal on a network address, and the audit entries."""

from __future__ import annotations

import functools
import ipaddress
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from starlette.routing import Match, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.access_rules import RULES, Locate, Rule
from app.client_certs import CertificateMapper, client_certificate
from app.errors import problem
from app.keys import REALM, KeyVerifier, Unauthenticated
from app.settings import Settings
from qm.access import ANONYMOUS, ANONYMOUS_SRMP, BUILT_IN, AccessControl, AuditEntry, audit_text
from qm.errors import MqError, MqErrorCode
from qm.manager import QueueManager
from qm.paths import QueuePath, parse_queue_path
from qm.rights import (
    QueueManagerRight,
    QueueRight,
    Requirement,
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


_ROUTED_AT_MOST = 1024
NO_RULE = Rule(None, Locate.PUBLIC)
"""A route that is not in RULES: refused to everyone (see `Authorization`)."""


class Authorization:
    """ASGI middleware: who is calling (or 401), the operation's rule, the check (or 403 problem
    +json MQ_ERROR_ACCESS_DENIED before anything is done), and the audit entry of a change."""

    def __init__(self, app: ASGIApp, application: FastAPI) -> None:
        self._app = app
        self._routes = [route for route in application.router.routes if isinstance(route, Route)]
        self._routed: dict[tuple[str, str], tuple[Rule, str, dict[str, Any]] | None] = {}
        self._allowed: dict[tuple[str, str, str], tuple[float, int]] = {}
        """(principal, method, path) -> (until, AccessControl generation) of a check that
        passed: a client repeats its requests, and resolving the queue and checking the
        grants again cost about 10 us, 5 % of a send."""

    def route(self, scope: Scope) -> tuple[Rule, str, dict[str, Any]] | None:
        """(rule, route path, path parameters); None when no route takes the request (FastAPI
        answers 404 or 405 and does nothing)."""
        target = (scope["method"], scope["path"])
        try:
            return self._routed[target]
        except KeyError:
            pass
        if len(self._routed) >= _ROUTED_AT_MOST:  # paths are the clients' to choose: bounded
            self._routed.clear()
        found = self._routed[target] = self._match(scope)
        return found

    def _match(self, scope: Scope) -> tuple[Rule, str, dict[str, Any]] | None:
        method = "GET" if scope["method"] == "HEAD" else scope["method"]
        for route in self._routes:
            match, child = route.matches(scope)
            if match is Match.FULL:
                rule = RULES.get((method, route.path), NO_RULE)
                return rule, route.path, dict(child.get("path_params", {}))
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        routed = self.route(scope)
        if routed is None or (routed[0].locate is Locate.PUBLIC and routed[0] is not NO_RULE):
            await self._app(scope, receive, send)
            return
        rule, route_path, params = routed
        security: Security = scope["app"].state.security
        try:
            who = await caller_of(scope, security)
        except Unauthenticated as refused:
            await _unauthenticated(str(refused))(scope, receive, send)
            return
        scope[CALLER] = who
        action = f"{scope['method']} {route_path}"
        try:
            await self._check(rule, params, who, security, scope)
        except MqError as error:
            if rule.audited and who.authenticated:  # anonymous refusals would be unbounded rows
                await record(security, who, action, _target(params), "denied")
            await problem(error)(scope, receive, send)
            return
        if not rule.audited:
            await self._app(scope, receive, send)
            return
        await _serve_audited(
            self._app,
            scope,
            receive,
            send,
            lambda status: self._record(security, who, action, params, scope, status),
        )

    @staticmethod
    async def _record(
        security: Security, who: Caller, action: str, params: dict[str, Any], scope: Scope, status: int
    ) -> None:
        outcome = f"{'allowed' if status < 400 else 'failed'} {status}"
        target = " ".join(filter(None, (_target(params), scope.get(AUDIT_NOTE))))
        await record(security, who, action, target, outcome)

    async def _check(
        self, rule: Rule, params: dict[str, Any], who: Caller, security: Security, scope: Scope
    ) -> None:
        if rule is NO_RULE:
            raise MqError(
                MqErrorCode.MQ_ERROR_ACCESS_DENIED,
                "this operation has no access rule (app/access_rules.py), so nobody may call it",
            )
        if who.everything or rule.locate in (Locate.ROUTE, Locate.CALLER):
            return
        access = security.access
        remembered = (who.principal, scope["method"], scope["path"])
        now = access.monotonic()
        until, generation = self._allowed.get(remembered, (0.0, -1))
        if until > now and generation == access.generation:
            return
        requirement = await _requirement(rule, params, scope)
        if requirement is None:
            return
        generation = access.generation  # before the check: a change during it is not missed
        await access.check(who.principal, requirement)
        if len(self._allowed) >= _ROUTED_AT_MOST:  # paths are the clients' to choose: bounded
            self._allowed.clear()
        self._allowed[remembered] = (access.known_until(who.principal), generation)


async def _requirement(rule: Rule, params: dict[str, Any], scope: Scope) -> Requirement | None:
    """None: the queue cannot be named (a malformed path, a closed cursor), so the route's own
    answer (400, 404) is all there is, and nothing is done."""
    if isinstance(rule.right, QueueManagerRight):
        return on_queue_manager(rule.right)
    assert isinstance(rule.right, QueueRight)
    try:
        if rule.locate is Locate.CURSOR:
            _record, queue = await scope["app"].state.gateway.cursors.describe(params["cursor_id"])
            return on_queue(rule.right, queue.path)
        return on_queue(
            rule.right, queue_path(scope["app"].state.gateway.manager, rule.right, params["path"])
        )
    except MqError as error:
        if error.code is MqErrorCode.MQ_ERROR_ACCESS_DENIED:
            raise
        return None


def _target(params: dict[str, Any]) -> str:
    return " ".join(f"{name}={value}" for name, value in sorted(params.items()))


def _unauthenticated(detail: str) -> Any:
    response = problem(MqError(MqErrorCode.MQ_ERROR_ACCESS_DENIED, detail), HTTPStatus.UNAUTHORIZED)
    response.headers["WWW-Authenticate"] = REALM
    return response


async def _serve_audited(
    app: ASGIApp, scope: Scope, receive: Receive, send: Send, audit: Callable[[int], Awaitable[None]]
) -> None:
    """Serve, recording the audit entry once the outcome is known and before the answer leaves:
    a client that reads /api/audit after its answer finds its entry, and the entries of one
    client's changes are in the order it made them."""
    recorded = False

    async def auditing(message: Message) -> None:
        nonlocal recorded
        if message["type"] == "http.response.start" and not recorded:
            recorded = True
            await audit(message["status"])
        await send(message)

    try:
        await app(scope, receive, auditing)
    finally:
        if not recorded:  # no answer started (the app failed): the server answers 500
            await audit(500)


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
