"""The fast layer (app/routes/fast_messages.py) answers exactly as the FastAPI routes do.

Two gateways on two databases with the same queue-manager identity and the same settable
clock: one as built, one without the fast layer (the plain FastAPI routes). Every step goes to
both, in the same order, and the answers must be byte-identical: status, header list, body.
Only tokens the gateway draws at random (transaction IDs, lock tags) are named, not compared.
Each step also says whether the fast layer serves it or leaves it to FastAPI.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, ExitStack
from dataclasses import dataclass, field
from typing import Any, cast

import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute

from app.main import create_app
from app.routes.fast_messages import OPERATIONS, FastMessages
from app.settings import Settings
from qm.clock import SettableClock
from qm.model import QueueManagerInfo
from storage.engine import make_engine
from storage.store import SqlStore
from tests.conftest import STORES
from tests.databases import PostgresDatabases, SqliteDatabases
from tests.integration.support import MAX_BODY_BYTES

GUID = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
Q = "/api/queues/private$/diff"
TXQ = "/api/queues/private$/difftx"
CORRELATION = base64.b64encode(bytes(range(20))).decode()
RAW = {"accept": "application/octet-stream"}
FULL_JSON = {
    "body": "café order",
    "label": "l\u00e4bel",
    "priority": 6,
    "body_type": 8,
    "message_class": 0,
    "correlation_id": CORRELATION,
    "app_specific": 42,
    "extension_base64": base64.b64encode(b"ext").decode(),
    "response_queue": "DIRECT=OS:.\\private$\\replies",
    "admin_queue": "DIRECT=OS:.\\private$\\admin",
    "acknowledge": 14,
    "journal": 3,
    "delivery": "express",
    "time_to_be_received": 3600,
    "time_to_reach_queue": 600,
}
RAW_HEADERS = {
    "content-type": "application/octet-stream",
    "X-Msmq-Label": "caf%C3%A9 order",
    "X-Msmq-Priority": " 5 ",
    "X-Msmq-App-Specific": "7",
    "X-Msmq-Body-Type": "17",
    "X-Msmq-Correlation-Id": CORRELATION,
    "X-Msmq-Response-Queue": "DIRECT=OS:.%5Cprivate$%5Creplies",
    "X-Msmq-Admin-Queue": "DIRECT=OS:.%5Cprivate$%5Cadmin",
    "X-Msmq-Delivery": "Express",
    "X-Msmq-Time-To-Be-Received": "3600",
    "X-Msmq-Time-To-Reach-Queue": "60",
    "X-Msmq-Extension": base64.b64encode(b"ext").decode(),
    "X-Msmq-Acknowledge": "4",
    "X-Msmq-Journal": "2",
    "X-Msmq-Message-Class": "0",
}


@dataclass(frozen=True)
class Step:
    method: str
    url: str
    status: int
    """What both gateways answer: keeps the scenario reaching the state each step is about."""
    fast: bool
    """Whether the fast layer answers it (else FastAPI does, on both gateways)."""
    params: dict[str, str] | list[tuple[str, str]] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    content: bytes | None = None
    json: Any = None

    def query(self, transaction: str) -> list[tuple[str, str | int | float | bool | None]]:
        pairs = self.params.items() if isinstance(self.params, dict) else self.params
        return [(name, value.replace(TX, transaction)) for name, value in pairs]


def send(status: int, fast: bool = True, queue: str = Q, **kwargs: Any) -> Step:
    return Step("POST", f"{queue}/messages", status, fast, **kwargs)


def receive(status: int, fast: bool = True, queue: str = Q, **kwargs: Any) -> Step:
    return Step("POST", f"{queue}/receive", status, fast, **kwargs)


def peek(status: int, fast: bool = True, queue: str = Q, **kwargs: Any) -> Step:
    return Step("GET", f"{queue}/peek", status, fast, **kwargs)


def refill(count: int) -> list[Step]:
    return [send(201, json={"body": f"refill {n}", "priority": n % 8}) for n in range(count)]


TX = "{transaction}"
"""Stands for the ID of the transaction the scenario opened (each gateway has its own)."""
MISSING = "/api/queues/private$/missing"
JOURNAL = "/api/queues/private$/diff;journal"

SENDS = [
    Step("POST", "/api/queues", 201, False, json={"path": "private$/diff", "journal": True}),
    Step("POST", "/api/queues", 201, False, json={"path": "private$/difftx", "transactional": True}),
    send(201, json=FULL_JSON),
    send(201, json={"body_base64": base64.b64encode(b"\xff\xfe binary").decode(), "priority": 1}),
    send(201, json={}),
    send(201, content=b"\x01\x02 raw bytes \xff", headers=RAW_HEADERS),
    send(201, content=b'{"body": "not parsed"}', headers={"content-type": "text/plain; charset=utf-8"}),
    send(201, content=b"k" * MAX_BODY_BYTES),
    send(413, content=b"x" * (MAX_BODY_BYTES + 1)),
    send(413, content=b"tiny", headers={"content-length": str(MAX_BODY_BYTES + 1)}),
    send(413, json={"body": "z" * (MAX_BODY_BYTES + 1)}),
    send(400, content=b"{not json", headers={"content-type": "application/json"}),
    send(400, json={"body": "x", "colour": "red"}),
    send(400, json={"body": "x", "body_base64": "eA=="}),
    send(400, json={"body_base64": "not base64!"}),
    send(400, json={"priority": 9}),
    send(400, json={"label": "x" * 250}),
    send(400, content=b"x", headers={"X-Msmq-Priority": "high"}),
    send(400, content=b"x", headers={"X-Msmq-Delivery": "sometimes"}),
    send(404, queue=MISSING, json={"body": "x"}),
    send(403, queue=JOURNAL, json={"body": "x"}),
    send(403, queue="/api/queues/system$;deadletter", json={"body": "x"}),
    send(404, queue="/api/queues/bad<name>", json={"body": "x"}),
    send(400, queue="/api/queues/private$/", json={"body": "x"}),
    send(201, queue="/api/queues/PRIVATE$\\Diff", json={"body": "other spelling"}),
    send(409, params={"transaction": "nope"}, json={"body": "x"}),
    send(409, params={"transaction": "single"}, json={"body": "x"}),
    send(201, queue=TXQ, params={"transaction": "single"}, json={"body": "t1"}),
    Step("POST", "/api/transactions", 201, False),
    send(201, queue=TXQ, params={"transaction": TX}, json={"body": "t2"}),
    send(409, queue=TXQ, json={"body": "no transaction"}),
    send(201, False, params={"transaction": ""}, json={"body": "x"}),  # empty is absent
    send(201, False, params={"other": "1"}, json={"body": "x"}),
    send(409, False, params=[("transaction", "single"), ("transaction", "nope")], json={"body": "x"}),
    Step("PUT", f"{Q}/messages", 405, False, json={"body": "x"}),
    Step("POST", f"{Q}/messages/", 405, False, json={"body": "x"}),
    Step("GET", f"{Q}/messages", 200, False),
]
PEEKS = [
    peek(200),
    peek(200, headers=RAW),
    peek(200, params={"timeout_ms": "0"}, headers={"accept": "application/octet-stream, application/json"}),
    peek(200, params={"timeout_ms": "007"}),
    peek(400, False, params={"timeout_ms": "abc"}),
    peek(400, False, params={"timeout_ms": "-1"}),
    peek(400, False, params={"timeout_ms": "1.5"}),
    peek(400, False, params={"timeout_ms": ""}),
    peek(400, False, params={"timeout_ms": "1" * 30}),
    peek(400, False, params={"timeout_ms": "\u0663"}),  # a digit to str.isdigit and int()
    peek(400, False, params={"timeout_ms": "\u00b2"}),  # a digit to str.isdigit only
    peek(400, params={"timeout_ms": "999999999"}),
    peek(200, False, params={"timeout_ms": "1", "two_phase": "true"}),
    peek(404, queue=MISSING),
    peek(200, queue=TXQ),
    Step("HEAD", f"{Q}/peek", 405, False),
]
RECEIVES = [
    # One of each message sent above, as raw and as JSON.
    receive(200, headers=RAW),
    receive(200, params={"timeout_ms": "5"}),
    receive(200, params={"timeout_ms": "0"}, headers=RAW),
    receive(200, headers=RAW),
    receive(200),
    receive(200, params={"timeout_ms": "30000"}, headers=RAW),
    receive(400, params={"timeout_ms": "30001"}),
    receive(400, False, params={"timeout_ms": "x"}),
    receive(400, False, params={"timeout_ms": "-5"}),
    receive(400, False, params={"timeout_ms": "12345678901234567890"}),
    receive(200, False, params={"timeout_ms": "+5"}),
    *refill(8),
    receive(200, params={"max_messages": "2"}),
    receive(200, params={"max_messages": "1", "timeout_ms": "0"}, headers=RAW),
    receive(400, False, params={"max_messages": "0"}),
    receive(400, False, params={"max_messages": "1001"}),
    receive(400, False, params={"max_messages": "many"}),
    receive(400, params={"max_messages": "2", "two_phase": "true"}),
    receive(400, params={"max_messages": "2", "transaction": "single"}),
    receive(200, params={"two_phase": "false"}),
    receive(200, params={"two_phase": "true", "lock_timeout_ms": "5000"}),
    receive(200, params={"two_phase": "true"}, headers=RAW),
    receive(400, params={"two_phase": "true", "transaction": "single"}),
    receive(200, False, params={"two_phase": "yes"}),
    receive(200, False, params={"two_phase": "True"}),
    receive(400, False, params={"lock_timeout_ms": "0", "two_phase": "true"}),
    receive(409, params={"transaction": "nope"}),
    receive(409, params={"transaction": "single"}),
    receive(200, queue=TXQ, params={"transaction": "single"}),
    receive(204, queue=TXQ, params={"transaction": TX}),
    Step("POST", f"/api/transactions/{TX}/commit", 204, False),
    receive(200, queue=TXQ, params={"transaction": "single"}, headers=RAW),
    receive(204, queue=TXQ, params={"timeout_ms": "1"}),
    *refill(3),
    receive(200, False, params={"unknown": "1"}),
    receive(200, False, params=[("timeout_ms", "0"), ("timeout_ms", "0")]),
    receive(404, queue=MISSING),
    receive(200, queue=JOURNAL, params={"max_messages": "1000"}),
    Step("POST", f"{Q}/messages/first/receive", 200, False),
    Step("POST", f"{Q}/messages/1/receive", 404, False),
    Step("GET", f"{Q}/receive", 400, False),
    Step("POST", f"{Q}/peek", 405, False),
    *refill(2),
    receive(200, params={"max_messages": "1000", "timeout_ms": "0"}, headers=RAW),
    receive(204),
    receive(204, params={"timeout_ms": "2"}),
    receive(204, params={"max_messages": "3", "timeout_ms": "1"}),
    peek(204, params={"timeout_ms": "1"}),
]
SCENARIO = SENDS + PEEKS + RECEIVES


@pytest.fixture(params=STORES)
def twin_urls(request: pytest.FixtureRequest, sqlite_databases: SqliteDatabases) -> Iterator[list[str]]:
    with ExitStack() as stack:
        if request.param == "sqlite":
            yield [stack.enter_context(sqlite_databases.database()) for _ in range(2)]
        else:
            databases: PostgresDatabases = request.getfixturevalue("postgres_databases")
            yield [stack.enter_context(databases.dedicated_database()) for _ in range(2)]


def twin_settings(url: str) -> Settings:
    return Settings(
        database_url=url,
        max_body_bytes=MAX_BODY_BYTES,
        max_wait_ms=30_000,
        housekeeping_interval_s=3600,
        sweep_interval_s=3600,
        wake_poll_interval_s=3600,
        srmp_send_interval_s=3600,
        triggers_enabled=False,
    )


async def same_identity(settings: Settings) -> None:
    """Message IDs carry the queue manager's GUID: give both databases the same one."""
    store = SqlStore(make_engine(settings.database_url))
    await store.queues.open_queue_manager(QueueManagerInfo(GUID, settings.initial_quota_kb, False))
    await store.close()


def without_fast_layer(app: FastAPI) -> FastAPI:
    app.user_middleware = [
        entry for entry in app.user_middleware if cast(object, entry.cls) is not FastMessages
    ]
    return app


class Twin:
    """One gateway and the random tokens it handed out, by the name the comparison gives them."""

    def __init__(self, app: FastAPI, client: httpx.AsyncClient) -> None:
        self.app = app
        self.client = client
        self.tokens: dict[str, str] = {}

    async def answer(self, step: Step) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        transaction = self.tokens.get(TX, TX)
        response = await self.client.request(
            step.method,
            step.url.replace(TX, transaction),
            params=step.query(transaction),
            headers={"x-request-id": "twin", **step.headers},  # else each answer's ID is a new random one
            content=step.content,
            json=step.json,
        )
        self._learn(step, response)
        return response.status_code, self._named(response.headers.raw), self._named(response.content)

    def _learn(self, step: Step, response: httpx.Response) -> None:
        if step.url == "/api/transactions" and response.status_code == 201:
            self.tokens[TX] = response.json()["id"]
        tag = response.headers.get("x-msmq-lock-tag")
        if response.content and response.headers.get("content-type") == "application/json":
            tag = json.loads(response.content).get("lock_tag") or tag
        if tag:
            self.tokens[f"{{lock {len(self.tokens)}}}"] = tag

    def _named(self, value: Any) -> Any:
        if isinstance(value, list):
            return [(name, self._named(text)) for name, text in value]
        for name, token in self.tokens.items():
            value = value.replace(token.encode(), name.encode())
        return value


@pytest.fixture
async def twins(twin_urls: list[str]) -> AsyncIterator[tuple[Twin, Twin]]:
    async with AsyncExitStack() as stack:
        pair = []
        for url, fast in zip(twin_urls, (True, False), strict=True):
            settings = twin_settings(url)
            await same_identity(settings)
            app = create_app(settings, SettableClock())
            if not fast:
                without_fast_layer(app)
            await stack.enter_async_context(app.router.lifespan_context(app))
            transport = httpx.ASGITransport(app=app)
            client = httpx.AsyncClient(transport=transport, base_url="http://localhost")
            pair.append(Twin(app, await stack.enter_async_context(client)))
        yield pair[0], pair[1]


def served_fast(app: FastAPI, request: httpx.Request, extra: dict[str, Any] | None = None) -> bool:
    """Whether the fast layer of `app` takes this request, asked as the server would ask it."""
    scope = {
        "type": "http",
        "method": request.method,
        "path": request.url.path,
        "query_string": request.url.query,
        "root_path": "",
        **(extra or {}),
    }
    return FastMessages(app, app).route(scope) is not None


@pytest.mark.anyio
async def test_the_fast_layer_answers_byte_for_byte_as_the_routes(twins: tuple[Twin, Twin]) -> None:
    fast, plain = twins
    answered: list[tuple[int, Step]] = []
    for step in SCENARIO:
        ours, theirs = await fast.answer(step), await plain.answer(step)
        assert ours == theirs, step
        answered.append((ours[0], step))
    unexpected = [f"{status} to {step}" for status, step in answered if status != step.status]
    assert not unexpected, "\n".join(unexpected)


def test_the_fast_layer_takes_the_plain_requests_and_leaves_the_rest() -> None:
    app = create_app(Settings(database_url="sqlite+aiosqlite:///:memory:"))
    for step in SCENARIO:
        url = "http://localhost" + step.url.replace(TX, "t")
        request = httpx.Request(step.method, url, params=step.query("t"))
        assert served_fast(app, request) is step.fast, step


def test_a_fast_route_only_after_routes_it_can_check() -> None:
    """A mount before the fast routes would match by rules the layer does not repeat."""
    app = create_app(Settings(database_url="sqlite+aiosqlite:///:memory:"))
    app.mount("/api/queues/mounted", FastAPI())
    app.router.routes.insert(0, app.router.routes.pop())
    with pytest.raises(TypeError, match="precedes a fast route"):
        FastMessages(app, app)


def test_a_request_that_fastapi_traces_goes_through_its_routing() -> None:
    """With OpenTelemetry configured, spans name the route and the endpoint: FastAPI's path."""
    app = create_app(Settings(database_url="sqlite+aiosqlite:///:memory:"))
    request = httpx.Request("POST", f"http://localhost{Q}/receive")
    assert served_fast(app, request)
    assert not served_fast(app, request, {"fastapi.telemetry": object()})
    assert served_fast(app, request, {"fastapi.telemetry": None})  # a request it excludes


@pytest.mark.anyio
async def test_an_srmp_virtual_directory_named_like_the_rest_prefix_still_takes_its_requests(
    sqlite_databases: SqliteDatabases,
) -> None:
    """The SRMP layer is outside this one, as it was outside FastAPI's routing."""
    with sqlite_databases.database() as url:
        app = create_app(twin_settings(url).model_copy(update={"srmp_virtual_directory": "API"}))
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
                xml = {"content-type": "text/xml"}  # a JSON body is refused earlier (app/edge.py)
                response = await client.post(f"{Q}/messages", content=b'{"body": "x"}', headers=xml)
    assert (response.status_code, response.content) == (400, b"")  # not an SRMP request


def test_the_layer_reads_exactly_the_parameters_the_routes_declare() -> None:
    """A parameter added to a route must be added here too (until then, requests that carry it
    go to FastAPI, as unknown ones do); headers, cookies or a body model would be unchecked."""
    app = create_app(Settings(database_url="sqlite+aiosqlite:///:memory:"))
    routes = [route for route in app.routes if isinstance(route, APIRoute) and route.endpoint in OPERATIONS]
    assert {route.endpoint for route in routes} == set(OPERATIONS)
    for route in routes:
        dependant = route.dependant
        assert {param.alias for param in dependant.query_params} == set(OPERATIONS[route.endpoint][1])
        assert (dependant.header_params, dependant.cookie_params, dependant.body_params) == ([], [], [])
