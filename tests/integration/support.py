"""Helpers for the HTTP-level tests: problem+json assertions, queues and messages."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import anyio
import httpx
from fastapi import FastAPI

from app.gateway import Gateway
from qm.errors import MqErrorCode
from qm.wakeups import WakeUps, Watch

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


class _ObservedWatch:
    def __init__(self, inner: Watch, owner: ObservedWakeUps) -> None:
        self._inner = inner
        self._owner = owner

    async def wait(self, timeout: float) -> None:  # noqa: ASYNC109 - the port's signature
        self._owner.changed(+1)
        try:
            await self._inner.wait(timeout)
        finally:
            self._owner.changed(-1)


class ObservedWakeUps:
    """The app's own wake-ups, wrapped so that a test can wait until a reader is blocked."""

    def __init__(self, inner: WakeUps) -> None:
        self._inner = inner
        self.waiting = 0
        self._change = asyncio.Event()

    def watch(self, queue_id: int) -> Watch:
        return _ObservedWatch(self._inner.watch(queue_id), self)

    def signal(self, queue_ids: Iterable[int]) -> None:
        self._inner.signal(queue_ids)

    def changed(self, delta: int) -> None:
        self.waiting += delta
        self._change.set()
        self._change = asyncio.Event()

    async def until_waiting(self, count: int = 1) -> None:
        """Return once at least `count` readers are blocked waiting for a change."""
        with anyio.fail_after(WAIT_LIMIT_S):
            while self.waiting < count:
                await self._change.wait()


def observe_wakeups(app: FastAPI) -> ObservedWakeUps:
    """Wrap the running app's wake-ups (built in its lifespan) to observe waiting readers."""
    gateway: Gateway = app.state.gateway
    observed = ObservedWakeUps(gateway.manager.wakeups)
    gateway.manager.wakeups = observed
    return observed
