"""`Authorization`, the ASGI middleware that applies the rule of app/access_rules.py to every
request: who is calling (app.auth), whether the principal may (qm's AccessControl), and the
audit entry of a change."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI
from starlette.routing import Match, Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.access_rules import RULES, Locate, Rule
from app.auth import AUDIT_NOTE, CALLER, Caller, Security, caller_of, queue_path, record
from app.errors import problem
from app.keys import REALM, Unauthenticated
from qm.errors import MqError, MqErrorCode
from qm.rights import QueueManagerRight, QueueRight, Requirement, on_queue, on_queue_manager

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
