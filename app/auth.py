"""Credentials become a principal here, at the edge; `Authorization` then applies the rule of
app/access_rules.py to every request, asking qm (AccessControl) whether the principal may.

API keys read `mgw_<key id>_<secret>`. They come as `Authorization: Bearer <key>` or as HTTP
Basic with the key as password and its principal or key ID as user (zeep, suds and curl all
speak Basic). Only scrypt(secret, salt) is stored; a key verified once is remembered by a
SHA-256 of the whole key for `auth_cache_ttl_s`, so later requests cost a hash and a dict
look-up, and a key revoked in another process stops working within that time.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import functools
import hashlib
import hmac
import ipaddress
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from starlette.routing import Match, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.access_rules import RULES, Locate, Rule
from app.errors import PROBLEM_JSON, problem
from app.settings import Settings
from qm.access import ANONYMOUS, ANONYMOUS_SRMP, AccessControl, AccessRepository, ApiKeyRecord, AuditEntry
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

KEY_PREFIX = "mgw"
SCRYPT_N, SCRYPT_R, SCRYPT_P, HASH_BYTES = 2**14, 8, 1, 32
"""scrypt's cost: about 40 ms and 16 MB per verification, once per key per process and TTL."""
CALLER = "msmq.caller"
"""Scope key: the Caller of this request."""
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
REALM = 'Basic realm="msmq-gateway", charset="UTF-8"'


@dataclass(frozen=True, slots=True)
class Caller:
    principal: str
    client: str
    authenticated: bool
    """Proved by a key (not anonymous)."""
    everything: bool = False
    """The anonymous administrator (MSMQGW_ANONYMOUS_ADMIN): every right, no grant read."""


def new_key() -> tuple[str, str, str]:
    """(the key as shown once, its ID, its secret)."""
    key_id, secret = secrets.token_hex(8), secrets.token_urlsafe(32)
    return f"{KEY_PREFIX}_{key_id}_{secret}", key_id, secret


def split_key(text: str) -> tuple[str, str] | None:
    prefix, _, rest = text.partition("_")
    key_id, _, secret = rest.partition("_")
    if prefix != KEY_PREFIX or len(key_id) != 16 or not secret or len(text) > 200:
        return None
    return key_id, secret


def hash_secret(secret: str, salt: bytes) -> bytes:
    return hashlib.scrypt(
        secret.encode(), salt=salt, n=SCRYPT_N, r=SCRYPT_R, p=SCRYPT_P, dklen=HASH_BYTES, maxmem=64 << 20
    )


def key_record(principal: str, description: str, now: Any) -> tuple[str, ApiKeyRecord]:
    """A new key for `principal`: the text to show once, and what is stored."""
    text, key_id, secret = new_key()
    salt = secrets.token_bytes(16)
    return text, ApiKeyRecord(key_id, principal, salt, hash_secret(secret, salt), description, now)


class KeyVerifier:
    """Key text -> principal, remembered for a TTL once verified."""

    def __init__(
        self, store: AccessRepository, ttl_s: float, monotonic: Callable[[], float] = time.monotonic
    ) -> None:
        self._store = store
        self._ttl_s = ttl_s
        self._monotonic = monotonic
        self._verified: dict[str, tuple[float, bytes, str]] = {}
        self._headers: dict[bytes, tuple[float, str, str]] = {}
        """Authorization header -> (until, key ID, principal), for headers that proved a key."""
        self._verifying: dict[tuple[str, bytes], asyncio.Future[str | None]] = {}
        """Verifications under way: the requests that arrive meanwhile with the same key wait
        for that one (64 clients starting at once would otherwise hash 64 times)."""
        # scrypt is slow on purpose: one at a time, off the event loop, so that a flood of
        # wrong keys costs one core's worth of hashing and never stalls the other requests.
        self._hashing = asyncio.Semaphore(1)

    async def principal_for(self, header: bytes) -> str | None:
        """The principal an Authorization header proves. A header seen with a key verified
        within the TTL is looked up as it came: no decoding, parsing or hashing (its dict key's
        hash is SipHash with a per-process secret, so a look-up tells nothing of other keys)."""
        remembered = self._headers.get(header)
        if remembered is not None and remembered[0] > self._monotonic():
            return remembered[2]
        key, user = credentials(header)
        principal = await self.principal_of(key, user)
        parts = split_key(key)
        if principal is None or parts is None or parts[0] not in self._verified:
            return principal
        if len(self._headers) >= 4096:  # bounded, like everything a client chooses
            self._headers.clear()
        self._headers[header] = (self._verified[parts[0]][0], parts[0], principal)
        return principal

    async def principal_of(self, key: str, user: str | None = None) -> str | None:
        parts = split_key(key)
        if parts is None:
            return None
        key_id, secret = parts
        digest = hashlib.sha256(key.encode()).digest()
        remembered = self._verified.get(key_id)
        if remembered is not None and remembered[0] > self._monotonic():
            principal = remembered[2] if hmac.compare_digest(remembered[1], digest) else None
        else:
            principal = await self._verify_once(key_id, secret, digest)
        if principal is None or user not in (None, "", principal, key_id):
            return None
        return principal

    async def _verify_once(self, key_id: str, secret: str, digest: bytes) -> str | None:
        pending = self._verifying.get((key_id, digest))
        if pending is not None:
            try:
                return await asyncio.shield(pending)
            except asyncio.CancelledError:
                if not pending.cancelled():  # this request was cancelled, not the verification
                    raise
                return await self._verify(key_id, secret, digest)
        if len(self._verifying) >= 1024:  # a flood of distinct keys: no sharing, still bounded work
            return await self._verify(key_id, secret, digest)
        future: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self._verifying[(key_id, digest)] = future
        try:
            principal = await self._verify(key_id, secret, digest)
        except BaseException:
            future.cancel()  # those waiting verify for themselves
            raise
        else:
            future.set_result(principal)
        finally:
            del self._verifying[(key_id, digest)]
        return principal

    async def _verify(self, key_id: str, secret: str, digest: bytes) -> str | None:
        record = await self._store.find_key(key_id)
        if record is None or record.revoked_at is not None:
            return None
        async with self._hashing:
            computed = await asyncio.to_thread(hash_secret, secret, record.salt)
        if not hmac.compare_digest(computed, record.hash):
            return None
        if len(self._verified) >= 4096:  # keys in use are few; bounded all the same
            self._verified.clear()
        self._verified[key_id] = (self._monotonic() + self._ttl_s, digest, record.principal)
        return record.principal

    def forget(self, key_id: str) -> None:
        """After a revocation in this process: refused from the next request on."""
        self._verified.pop(key_id, None)
        for header in [header for header, (_, owner, _) in self._headers.items() if owner == key_id]:
            del self._headers[header]


@dataclass(frozen=True)
class Security:
    """What authorization needs, built in the lifespan (app.state.security)."""

    settings: Settings
    keys: KeyVerifier
    access: AccessControl
    srmp_networks: tuple[IPNetwork, ...] = ()

    def anonymous_is_administrator(self, client_host: str) -> bool:
        settings = self.settings
        return settings.anonymous_admin and (
            settings.allow_unauthenticated_network or is_loopback(client_host)
        )


async def srmp_sender_may_write(security: Security, client_host: str, queue: QueuePath) -> bool:
    """The anonymous SRMP sender's right to write `queue`, from where it is."""
    settings = security.settings
    networks = security.srmp_networks
    if networks and not _within(client_host, networks):
        return False
    if settings.srmp_anonymous_write == "all":
        return True
    grants = await security.access.grants_of(ANONYMOUS_SRMP)
    return allows(grants, on_queue(QueueRight.WRITE_MESSAGE, queue))


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


class Unauthenticated(Exception):
    """Credentials were sent and are not valid: 401, whatever the operation."""


def _authorization(headers: list[tuple[bytes, bytes]]) -> bytes | None:
    for name, value in headers:
        if name == b"authorization":
            return value
    return None


def credentials(header: bytes) -> tuple[str, str | None]:
    """(key, Basic user name or None) from an Authorization header's value."""
    scheme, _, token = header.decode("latin-1").strip().partition(" ")
    token = token.strip()
    if scheme.lower() == "bearer" and token:
        return token, None
    if scheme.lower() == "basic" and token:
        return _basic(token)
    raise Unauthenticated("use Authorization: Bearer <key>, or Basic with the key as password")


def _basic(token: str) -> tuple[str, str]:
    try:
        user, colon, password = base64.b64decode(token, validate=True).decode().partition(":")
    except (binascii.Error, UnicodeDecodeError):
        raise Unauthenticated("the Basic credentials are not base64 of user:password") from None
    if not colon:
        raise Unauthenticated("the Basic credentials are not base64 of user:password")
    return password, user


async def caller_of(scope: Scope, security: Security) -> Caller:
    client = scope.get("client") or ("", 0)
    address = f"{client[0]}:{client[1]}"
    header = _authorization(scope["headers"])
    if header is None:
        return Caller(ANONYMOUS, address, False, security.anonymous_is_administrator(client[0]))
    principal = await security.keys.principal_for(header)
    if principal is None:
        raise Unauthenticated("the key is not valid (unknown, revoked, or not this principal's)")
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


async def give_ownership(request: Request, queue_path: str) -> None:
    """The creator of a queue owns it (MQSEC_QUEUE_GENERIC_ALL on its path). Anonymous callers
    own nothing: a grant to `anonymous` would reach every caller without a key."""
    who = caller(request)
    if who.authenticated:
        await security_of(request).access.give([owner_grant(who.principal, parse_queue_path(queue_path))])


async def queue_deleted(request: Request, queue_path: str) -> None:
    path = request.app.state.gateway.manager.resolve(queue_path)
    await security_of(request).access.queue_deleted(path.url_path)


async def audit(request: Request, action: str, target: str, outcome: str) -> None:
    who = caller(request)
    await record(security_of(request), who, action, target, outcome)


async def record(security: Security, who: Caller, action: str, target: str, outcome: str) -> None:
    entry = AuditEntry(security.access.clock.now(), who.principal, who.client, action, target, outcome)
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
        status = await _serve_noting_status(self._app, scope, receive, send)
        outcome = f"{'allowed' if status < 400 else 'failed'} {status}"
        await record(security, who, action, _target(params), outcome)

    async def _check(
        self, rule: Rule, params: dict[str, Any], who: Caller, security: Security, scope: Scope
    ) -> None:
        if rule is NO_RULE:
            raise MqError(
                MqErrorCode.MQ_ERROR_ACCESS_DENIED,
                "this operation has no access rule (app/access_rules.py), so nobody may call it",
            )
        if who.everything or rule.locate is Locate.ROUTE:
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


async def _serve_noting_status(app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> int:
    status = 500

    async def noting(message: Message) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        await send(message)

    await app(scope, receive, noting)
    return status


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


def problem_body(code: MqErrorCode, detail: str, status: HTTPStatus) -> dict[str, Any]:
    return {
        "type": f"urn:msmq-gateway:error:{code.name}",
        "title": code.name,
        "status": int(status),
        "detail": detail,
        "mq_error": code.name,
        "mq_error_code": code.hex,
    }


SECURITY_SCHEMES = {
    "apiKey": {
        "type": "http",
        "scheme": "bearer",
        "description": "An API key (`msmq-gateway keys create`, POST /api/keys): "
        "`Authorization: Bearer mgw_…`",
    },
    "basic": {
        "type": "http",
        "scheme": "basic",
        "description": "HTTP Basic: the principal or the key ID as user name, the API key as password",
    },
}
_UNAUTHENTICATED = {
    "description": "Credentials were sent and are not valid (unknown, revoked, or another principal's key)",
    "headers": {"WWW-Authenticate": {"description": REALM, "schema": {"type": "string"}}},
    "content": {
        PROBLEM_JSON: {
            "schema": {"$ref": "#/components/schemas/Problem"},
            "example": problem_body(
                MqErrorCode.MQ_ERROR_ACCESS_DENIED,
                "the key is not valid (unknown, revoked, or not this principal's)",
                HTTPStatus.UNAUTHORIZED,
            ),
        }
    },
}


def declare_access(document: dict[str, Any]) -> None:
    """Every guarded operation of the OpenAPI document: how to authenticate, the right it needs
    (`x-msmq-right`), and its 401 and 403 answers."""
    document.setdefault("components", {})["securitySchemes"] = SECURITY_SCHEMES
    for path, item in document["paths"].items():
        for method, operation in item.items():
            rule = RULES.get((method.upper(), _route_path(path)))
            if rule is None or rule.locate is Locate.PUBLIC:
                continue
            operation["security"] = [{"apiKey": []}, {"basic": []}, {}]
            operation["x-msmq-right"] = _right_text(rule, operation)
            responses = operation.setdefault("responses", {})
            responses["401"] = _UNAUTHENTICATED
            _add_denied(responses, operation["x-msmq-right"])


def _route_path(document_path: str) -> str:
    return document_path.replace("/api/queues/{path}", "/api/queues/{path:path}")


def _right_text(rule: Rule, operation: dict[str, Any]) -> str:
    if rule.right is None:
        return "one per SOAP operation (docs/security.md)"
    scope = "the queue manager" if isinstance(rule.right, QueueManagerRight) else "the queue"
    return f"{rule.right.name} on {scope}"


def _add_denied(responses: dict[str, Any], right: str) -> None:
    example = problem_body(
        MqErrorCode.MQ_ERROR_ACCESS_DENIED, f"'orders-app' lacks {right}", HTTPStatus.FORBIDDEN
    )
    denied = responses.setdefault(
        "403",
        {
            "description": "MQ_ERROR_ACCESS_DENIED",
            "content": {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}, "examples": {}}},
        },
    )
    media = denied.setdefault("content", {}).setdefault(PROBLEM_JSON, {})
    if "example" in media:
        media["examples"] = {"other": {"summary": "refused", "value": media.pop("example")}}
    media.setdefault("examples", {})["MQ_ERROR_ACCESS_DENIED (rights)"] = {
        "summary": "the caller's principal lacks the right",
        "value": example,
    }
    if "MQ_ERROR_ACCESS_DENIED" not in denied.get("description", ""):
        denied["description"] = denied.get("description", "") + " or MQ_ERROR_ACCESS_DENIED"
