"""A client that hangs up during a waiting receive must not cost a message."""

from __future__ import annotations

import asyncio
from collections.abc import MutableMapping
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.integration.support import observe_wakeups

pytestmark = pytest.mark.anyio

QUEUE = "private$/orders"


class HangingUpClient:
    """Drives one ASGI request and disconnects when told, as a closed socket would."""

    def __init__(self, app: FastAPI, path: str, query: bytes = b"timeout_ms=30000") -> None:
        self._app = app
        self._path = path
        self._query = query
        self._hang_up = asyncio.Event()
        self.messages: list[MutableMapping[str, Any]] = []
        self._body_sent = False

    async def receive(self) -> dict[str, Any]:
        if not self._body_sent:
            self._body_sent = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await self._hang_up.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: MutableMapping[str, Any]) -> None:
        self.messages.append(message)

    async def run(self) -> None:
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "POST",
            "scheme": "http",
            "path": self._path,
            "raw_path": self._path.encode(),
            "query_string": self._query,
            "headers": [(b"host", b"localhost")],
            "client": ("127.0.0.1", 50000),
            "server": ("testserver", 80),
        }
        await self._app(scope, self.receive, self.send)

    def hang_up(self) -> None:
        self._hang_up.set()

    @property
    def status(self) -> int:
        return int(next(m["status"] for m in self.messages if m["type"] == "http.response.start"))


async def test_a_receive_abandoned_by_its_client_takes_no_message(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    assert (await client.post("/api/queues", json={"path": QUEUE})).status_code == 201
    waiting = HangingUpClient(app, f"/api/queues/{QUEUE}/receive")
    request = asyncio.create_task(waiting.run())
    waiting.hang_up()
    await asyncio.wait_for(request, timeout=10)  # well before the 30 s wait it asked for
    assert waiting.status == 204
    assert (await client.post(f"/api/queues/{QUEUE}/messages", json={"body": "kept"})).status_code == 201
    peeked = await client.get(f"/api/queues/{QUEUE}/peek")
    assert peeked.status_code == 200 and peeked.json()["body"] == "kept"


@pytest.mark.parametrize("query", [b"timeout_ms=30000", b"timeout_ms=30000&max_messages=5"])
async def test_a_hang_up_during_the_wait_ends_it_and_a_later_message_stays(
    app: FastAPI, client: httpx.AsyncClient, query: bytes
) -> None:
    """The connection is read while the receive waits (app.routes.messages.HangUp): a hang-up
    that comes once it waits ends the wait, as one that came before it."""
    assert (await client.post("/api/queues", json={"path": QUEUE})).status_code == 201
    wakeups = observe_wakeups(app)
    waiting = HangingUpClient(app, f"/api/queues/{QUEUE}/receive", query)
    request = asyncio.create_task(waiting.run())
    await wakeups.until_waiting()
    waiting.hang_up()
    await asyncio.wait_for(request, timeout=10)  # well before the 30 s wait it asked for
    assert waiting.status == 204
    assert (await client.post(f"/api/queues/{QUEUE}/messages", json={"body": "kept"})).status_code == 201
    peeked = await client.get(f"/api/queues/{QUEUE}/peek")
    assert peeked.status_code == 200 and peeked.json()["body"] == "kept"
