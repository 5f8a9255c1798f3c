"""Helpers for the HTTP-level tests: problem+json assertions, queues and messages."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI

from app.gateway import Gateway
from qm.errors import MqErrorCode
from tests.observed_wakeups import ObservedWakeUps

MAX_BODY_BYTES = 1024
"""The integration app's body cap: small, so oversize requests are cheap to build."""
MAX_WAIT_MS = 30_000
"""The integration app's longest wait; above WAIT_LIMIT_S, so a missed wake-up fails a test."""
WAIT_LIMIT_S = 10.0
"""How long a test waits for something that should happen at once; only reached on failure."""

PROBLEM_JSON = "application/problem+json"


def gateway_command() -> list[str]:
    """The installed `msmq-gateway` script next to this Python, else `python -m app.cli`."""
    script = Path(sys.executable).parent / "msmq-gateway"
    return [str(script)] if script.exists() else [sys.executable, "-m", "app.cli"]


def assert_problem(response: httpx.Response, status: int, mq_error: str) -> dict[str, Any]:
    """The response is a problem+json document with this status and MQ_ERROR name and code."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == PROBLEM_JSON, response.headers
    problem: dict[str, Any] = response.json()
    assert problem["status"] == status
    assert problem["mq_error"] == mq_error
    assert problem["mq_error_code"] == MqErrorCode[mq_error].hex
    assert problem["title"] == mq_error
    assert problem["type"] == f"urn:msmq-gateway:error:{mq_error}"
    assert isinstance(problem["detail"], str) and problem["detail"]
    return problem


def json_of(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    return response.json()


async def create_queue(client: httpx.AsyncClient, path: str, **settings: Any) -> dict[str, Any]:
    queue: dict[str, Any] = json_of(await client.post("/api/queues", json={"path": path, **settings}), 201)
    return queue


async def send(
    client: httpx.AsyncClient, path: str, body: str, transaction: str | None = None, **properties: Any
) -> dict[str, Any]:
    """Send a JSON message with a text body; return the 201 answer."""
    params = {} if transaction is None else {"transaction": transaction}
    response = await client.post(
        f"/api/queues/{path}/messages", json={"body": body, **properties}, params=params
    )
    sent: dict[str, Any] = json_of(response, 201)
    return sent


async def receive(client: httpx.AsyncClient, path: str, **params: Any) -> dict[str, Any] | None:
    """Plain receive; None on 204."""
    response = await client.post(f"/api/queues/{path}/receive", params=params)
    if response.status_code == 204:
        assert response.content == b""
        return None
    message: dict[str, Any] = json_of(response)
    return message


async def peek(client: httpx.AsyncClient, path: str, **params: Any) -> dict[str, Any] | None:
    response = await client.get(f"/api/queues/{path}/peek", params=params)
    if response.status_code == 204:
        return None
    message: dict[str, Any] = json_of(response)
    return message


async def message_count(client: httpx.AsyncClient, path: str) -> int:
    count: int = json_of(await client.get(f"/api/queues/{path}"))["message_count"]
    return count


async def bodies(client: httpx.AsyncClient, path: str) -> list[str]:
    """The bodies of the available messages, in queue order (browse, one page)."""
    page = json_of(await client.get(f"/api/queues/{path}/messages", params={"limit": 1000}))
    return [message["body"] for message in page["messages"]]


def observe_wakeups(app: FastAPI) -> ObservedWakeUps:
    """Wrap the running app's wake-ups (built in its lifespan) to observe waiting readers."""
    gateway: Gateway = app.state.gateway
    observed = ObservedWakeUps(gateway.manager.wakeups)
    gateway.manager.wakeups = observed
    return observed


def gateway_of(app: FastAPI) -> Gateway:
    gateway: Gateway = app.state.gateway
    return gateway


async def key_with_grants(
    admin: httpx.AsyncClient, principal: str, *grants: tuple[str | None, list[str]]
) -> str:
    """A new API key for `principal`, given `grants` first ((queue pattern or None for the queue
    manager, rights)) by the administrator `admin`."""
    for queue, rights in grants:
        granted = await admin.post(
            "/api/grants", json={"principal": principal, "queue": queue, "rights": rights}
        )
        assert granted.status_code == 200, granted.text
    created = await admin.post("/api/keys", json={"principal": principal})
    assert created.status_code == 201, created.text
    key: str = created.json()["key"]
    return key
