"""Send, receive and peek served ahead of FastAPI's routing: the busiest REST requests.

The FastAPI routes in `messages` declare these operations (the OpenAPI document) and do the
work: this layer only decodes the query parameters those routes declare, in their plain
spellings, and calls the same endpoint functions with a bare `Request`. Anything else (another
spelling of a value, a value out of range, an unknown or repeated parameter, HEAD, a request
another route would take, a request FastAPI's OpenTelemetry support traces) goes on to FastAPI
unchanged, whose validation answers it.

What a request skips so: matching up to twenty routes (about 30 us for receive), FastAPI's
parameter validation and dependency solving, and the exception and exit-stack middlewares.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from fastapi import FastAPI
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route, WebSocketRoute
from starlette.types import ASGIApp, Receive, Scope, Send

from app.gateway import gateway_of
from app.routes import messages

Reader = Callable[[str], Any]
"""Query text -> value, or None: not a plain spelling, so FastAPI decides."""
Endpoint = Callable[[str, Request, dict[str, Any]], Awaitable[Response]]
Handler = Callable[[Request, Exception], Awaitable[Response]]


def _count(low: int, high: int | None = None) -> Reader:
    """Decimal digits only (what pydantic reads as int(text)); short, so int() is cheap."""

    def read(text: str) -> int | None:
        if not (text.isascii() and text.isdigit()) or len(text) > 9:
            return None
        value = int(text)
        return value if value >= low and (high is None or value <= high) else None

    return read


def _text(text: str) -> str | None:
    return text or None


def _flag(text: str) -> bool | None:
    return {"true": True, "false": False}.get(text)


async def _send(path: str, request: Request, params: dict[str, Any]) -> Response:
    return await messages.send(path, request, **params)


async def _receive(path: str, request: Request, params: dict[str, Any]) -> Response:
    return await messages.receive(path, request, **params)


async def _peek(path: str, request: Request, params: dict[str, Any]) -> Response:
    return await messages.peek(path, request, gateway_of(request), **params)


# Endpoint -> how the fast layer calls it, and the query parameters it declares.
OPERATIONS: dict[Callable[..., Any], tuple[Endpoint, dict[str, Reader]]] = {
    messages.send: (_send, {"transaction": _text}),
    messages.receive: (
        _receive,
        {
            "timeout_ms": _count(0),
            "transaction": _text,
            "two_phase": _flag,
            "lock_timeout_ms": _count(1),
            "max_messages": _count(1, messages.MAX_BATCH),
            "decode": _flag,
        },
    ),
    messages.peek: (_peek, {"timeout_ms": _count(0), "decode": _flag}),
}


@dataclass(frozen=True)
class Operation:
    pattern: re.Pattern[str]
    """The route's own path pattern."""
    earlier: tuple[re.Pattern[str], ...]
    """Patterns of the routes before it that take the same method: a path one of them matches
    is theirs (the router takes the first route that matches path and method)."""
    readers: dict[str, Reader]
    endpoint: Endpoint


@dataclass(frozen=True)
class Call:
    operation: Operation
    path: str
    params: dict[str, Any]


def decode_query(query_string: bytes, readers: Mapping[str, Reader]) -> dict[str, Any] | None:
    """The parameters, or None when FastAPI should decide. Split as Starlette splits them."""
    params: dict[str, Any] = {}
    if not query_string:
        return params
    for name, text in parse_qsl(query_string.decode("latin-1"), keep_blank_values=True):
        read = readers.get(name)
        value = None if read is None or name in params else read(text)
        if value is None:
            return None
        params[name] = value
    return params


def operations(routes: list[BaseRoute]) -> dict[str, tuple[Operation, ...]]:
    """Method -> the operations served here, in the router's order."""
    found: dict[str, list[Operation]] = {}
    for index, route in enumerate(routes):
        if not isinstance(route, Route) or getattr(route, "endpoint", None) not in OPERATIONS:
            continue
        (method,) = (route.methods or set()) - {"HEAD"}  # one method each; HEAD goes on to FastAPI
        endpoint, readers = OPERATIONS[route.endpoint]
        earlier = tuple(_patterns_taking(routes[:index], method))
        found.setdefault(method, []).append(Operation(route.path_regex, earlier, readers, endpoint))
    return {method: tuple(listed) for method, listed in found.items()}


def _patterns_taking(routes: list[BaseRoute], method: str) -> list[re.Pattern[str]]:
    patterns = []
    for route in routes:
        if isinstance(route, WebSocketRoute):
            continue
        if not isinstance(route, Route):  # a mount or host: its matching is not a pattern
            raise TypeError(f"{route!r} precedes a fast route; it cannot be checked cheaply")
        if route.methods is None or method in route.methods:
            patterns.append(route.path_regex)
    return patterns


_ROUTED_AT_MOST = 1024
"""Request targets whose routing `FastMessages` remembers, at most (then it starts afresh)."""


class FastMessages:
    """ASGI middleware: serves send, receive and peek when the request is plain (see above).

    Built with the middleware stack, at the first request, so the app's routes and exception
    handlers are final by then."""

    def __init__(self, app: ASGIApp, application: FastAPI) -> None:
        self._app = app
        self._operations = operations(application.router.routes)
        # 500 and Exception handlers belong to the server-error middleware, as in Starlette.
        self._handlers = {
            key: handler
            for key, handler in application.exception_handlers.items()
            if key not in (500, Exception)
        }
        if not all(inspect.iscoroutinefunction(handler) for handler in self._handlers.values()):
            raise TypeError("the fast layer awaits exception handlers; one is not async")
        self._routed: dict[tuple[str, str, bytes], Call | None] = {}
        """What `route` found per method, path and query: a client repeats its requests (a
        long-polling receiver asks the same every time), and matching and decoding a receive
        cost about 9 us. A Call's params are only ever unpacked as keyword arguments."""

    def route(self, scope: Scope) -> Call | None:
        """What this layer answers the request with; None leaves it to FastAPI."""
        if scope["type"] != "http" or scope.get("root_path"):  # a root path: Starlette strips it
            return None
        if scope.get("fastapi.telemetry") is not None:  # traced: the spans name route and endpoint
            return None
        target = (scope["method"], scope["path"], scope["query_string"])
        try:
            return self._routed[target]
        except KeyError:
            pass
        if len(self._routed) >= _ROUTED_AT_MOST:  # targets are the clients' to choose: bounded
            self._routed.clear()
        call = self._routed[target] = self._route(*target)
        return call

    def _route(self, method: str, path: str, query_string: bytes) -> Call | None:
        for operation in self._operations.get(method, ()):
            match = operation.pattern.match(path)
            if match is None:
                continue
            if any(earlier.match(path) for earlier in operation.earlier):
                return None
            params = decode_query(query_string, operation.readers)
            return None if params is None else Call(operation, match["path"], params)
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        call = self.route(scope)
        if call is None:
            await self._app(scope, receive, send)
            return
        request = Request(scope, receive, send)
        try:
            response = await call.operation.endpoint(call.path, request, call.params)
        except Exception as error:
            handler = self._handler_for(error)
            if handler is None:
                raise
            response = await handler(request, error)
        await response(scope, receive, send)

    def _handler_for(self, error: Exception) -> Handler | None:
        """The handler Starlette's exception middleware would pick: by status, then by class."""
        if isinstance(error, HTTPException) and error.status_code in self._handlers:
            return self._handlers[error.status_code]  # type: ignore[return-value]
        for kind in type(error).__mro__:
            if kind in self._handlers:
                return self._handlers[kind]  # type: ignore[return-value]
        return None
