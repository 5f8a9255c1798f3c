"""Every HTTP request observed once, outermost: a request ID (taken from X-Request-ID when it is
sane, otherwise made here) returned in the answer's headers, the latency histogram of its route
family, REST send/receive/peek outcomes, and, when asked for (MSMQGW_REQUEST_LOG=json), one JSON
log line. A pure ASGI middleware: it costs a few microseconds, not a Starlette Request."""

from __future__ import annotations

import itertools
import json
import logging
import secrets
import time
from collections.abc import Callable
from typing import Any

from prometheus_client.metrics import Counter, Histogram
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.metrics import ProcessMetrics

REQUEST_ID_HEADER = b"x-request-id"
MAX_REQUEST_ID_LENGTH = 128
"""Longer or unprintable IDs from the client are replaced: they would go into every log line."""
_LOGGED_PATH_LENGTH = 256

log = logging.getLogger("msmq_gateway.requests")

OPERATIONS = frozenset({"send", "receive", "peek"})


def route_family(method: str, path: str, srmp_prefix: str) -> str:
    """A small fixed set of names for the latency histogram (a label per queue or lookup ID
    would make a time series per client's choice)."""
    if path.startswith("/api/queues"):
        return _queue_family(method, path)
    if path.startswith("/api/"):
        section = path[5:].split("/", 1)[0]
        return _API_SECTIONS.get(section, "other")
    if path[: len(srmp_prefix)].casefold() == srmp_prefix or "://" in path or "\\" in path:
        return "srmp"
    return _TOP_LEVEL.get(path, "other")


def _queue_family(method: str, path: str) -> str:
    if not path.startswith("/api/queues/"):
        return "queues"
    if path.endswith("/receive"):
        return "receive"
    if path.endswith("/peek"):
        return "peek"
    if path.endswith("/messages"):
        return "send" if method == "POST" else "browse"
    if "/messages/" in path and method == "GET":
        return "peek"
    return "queues"


_API_SECTIONS = {
    "transactions": "transactions",
    "cursors": "cursors",
    "locks": "locks",
    "triggers": "triggers",
    "rules": "triggers",
    "outgoing-queues": "outgoing",
    "queue-manager": "queue_manager",
    "srmp": "srmp_statistics",
}
_TOP_LEVEL = {
    "/metrics": "metrics",
    "/livez": "probes",
    "/readyz": "probes",
    "/healthz": "probes",
    "/soap": "soap",
}


def outcome_of(status: int) -> str:
    if status == 204:
        return "no_message"
    if status < 400:
        return "done"
    if status < 500 or status == 507:  # 507: the queue manager's quota or throttling refused it
        return "refused"
    return "failed"


def request_id(scope: Scope, make: Callable[[], bytes]) -> bytes:
    """The client's X-Request-ID when it is sane, else a new one from `make`."""
    for name, value in scope["headers"]:
        if name == REQUEST_ID_HEADER:
            if 0 < len(value) <= MAX_REQUEST_ID_LENGTH and all(0x21 <= byte <= 0x7E for byte in value):
                return bytes(value)
            break
    return make()


def id_maker() -> Callable[[], bytes]:
    """32 hex digits: a random half per process, a counter's half per request. Unique, not
    secret (nothing is granted by a request ID), and a fifth of os.urandom's cost."""
    prefix = secrets.token_hex(8)
    counter = itertools.count(1)
    return lambda: f"{prefix}{next(counter):016x}".encode()


_FAMILIES_AT_MOST = 1024
"""(method, path) pairs whose family `Observed` remembers, at most (then it starts afresh)."""


class Observed:
    def __init__(
        self, app: ASGIApp, metrics: ProcessMetrics, srmp_directory: str, log_requests: bool
    ) -> None:
        self._app = app
        self._metrics = metrics
        self._srmp_prefix = f"/{srmp_directory.strip('/')}/".casefold()
        self._log_requests = log_requests
        self._make_id = id_maker()
        self._families: dict[tuple[str, str], str] = {}
        """Per method and path, its family: clients repeat their requests, and classifying a
        path costs more than looking it up. Bounded: paths are the clients' to choose."""
        self._children: dict[tuple[str, int], tuple[Histogram, Counter | None]] = {}
        """Per family and status, the metric children a request adds to (labels() costs a
        lock and a dict look-up each time). Bounded: families are a fixed set, statuses too."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        identifier = request_id(scope, self._make_id)
        status = 500  # what the server answers if the app raises before starting an answer

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message = {
                    **message,
                    "headers": [*message.get("headers", ()), (REQUEST_ID_HEADER, identifier)],
                }
            await send(message)

        started = time.perf_counter()
        try:
            await self._app(scope, receive, send_with_id)
        finally:
            duration = time.perf_counter() - started
            family = self._family(scope["method"], scope["path"])
            self._observe(family, status, duration)
            if self._log_requests:
                _log_line(scope, family, status, duration, identifier)

    def _family(self, method: str, path: str) -> str:
        family = self._families.get((method, path))
        if family is None:
            if len(self._families) >= _FAMILIES_AT_MOST:
                self._families.clear()
            family = self._families[(method, path)] = route_family(method, path, self._srmp_prefix)
        return family

    def _observe(self, family: str, status: int, duration: float) -> None:
        children = self._children.get((family, status))
        if children is None:
            operation = (
                self._metrics.operations.labels(family, outcome_of(status)) if family in OPERATIONS else None
            )
            children = self._children[(family, status)] = (
                self._metrics.request_seconds.labels(family),
                operation,
            )
        histogram, operation = children
        histogram.observe(duration)
        if operation is not None:
            operation.inc()


def json_request_log() -> None:
    """Request lines go out as bare JSON objects, one a line on stderr, whatever the format of
    the other logs (each worker process sets this up for itself)."""
    log.setLevel(logging.INFO)
    log.propagate = False
    if not any(getattr(handler, _OURS, False) for handler in log.handlers):
        handler = logging.StreamHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        setattr(handler, _OURS, True)
        log.addHandler(handler)


_OURS = "msmq_gateway_request_lines"


def _log_line(scope: Scope, family: str, status: int, duration: float, identifier: bytes) -> None:
    route: Any = scope.get("route")
    line = {
        "request_id": identifier.decode("ascii"),
        "method": scope["method"],
        "route": getattr(route, "path", None) or family,
        "path": scope["path"][:_LOGGED_PATH_LENGTH],
        "status": status,
        "duration_ms": round(duration * 1000, 3),
    }
    log.info(json.dumps(line))
