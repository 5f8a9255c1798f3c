"""A client that hangs up during a waiting receive must not cost a message."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, MutableMapping
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from uvicorn.server import ServerState

from app.http_protocol import OneWriteHttpToolsProtocol
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


@pytest.fixture
async def port(app: FastAPI) -> AsyncIterator[int]:
    """The app behind `serve`'s own HTTP protocol on a loopback socket, in the test's loop."""
    config = uvicorn.Config(
        app, lifespan="off", ws="none", http=OneWriteHttpToolsProtocol, log_level="warning"
    )
    config.load()
    state = ServerState()
    listening = socket.create_server(("127.0.0.1", 0))
    server = await asyncio.get_running_loop().create_server(
        lambda: OneWriteHttpToolsProtocol(config, state, {}), sock=listening
    )
    yield listening.getsockname()[1]
    server.close()
    for connection in list(state.connections):
        connection.shutdown()
    await server.wait_closed()


@pytest.mark.parametrize("query", [b"timeout_ms=30000", b"timeout_ms=30000&max_messages=5"])
async def test_a_hang_up_behind_a_pipelined_request_ends_the_wait_and_the_message_stays(
    app: FastAPI, client: httpx.AsyncClient, port: int, query: bytes
) -> None:
    """A second request sent on the connection while the receive waits is held until the
    receive answers; the server must still see the client hang up behind it."""
    assert (await client.post("/api/queues", json={"path": QUEUE})).status_code == 201
    wakeups = observe_wakeups(app)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        b"POST /api/queues/" + QUEUE.encode() + b"/receive?" + query + b" HTTP/1.1\r\n"
        b"Host: localhost\r\nContent-Length: 0\r\n\r\n"
        b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"
    )
    await writer.drain()
    await wakeups.until_waiting()
    writer.close()
    await writer.wait_closed()
    await wakeups.until_none_waiting()  # the hang-up ended the wait
    assert (await client.post(f"/api/queues/{QUEUE}/messages", json={"body": "kept"})).status_code == 201
    peeked = await client.get(f"/api/queues/{QUEUE}/peek")
    assert peeked.status_code == 200 and peeked.json()["body"] == "kept"
    del reader


async def read_answer(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    return int(head.split(b" ", 2)[1]), await reader.readexactly(length)


async def test_requests_pipelined_behind_a_waiting_receive_are_answered_in_order(
    app: FastAPI, client: httpx.AsyncClient, port: int
) -> None:
    assert (await client.post("/api/queues", json={"path": QUEUE})).status_code == 201
    wakeups = observe_wakeups(app)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        b"POST /api/queues/" + QUEUE.encode() + b"/receive?timeout_ms=30000 HTTP/1.1\r\n"
        b"Host: localhost\r\nContent-Length: 0\r\n\r\n"
        b"GET /api/queues/" + QUEUE.encode() + b" HTTP/1.1\r\nHost: localhost\r\n\r\n"
        b"POST /api/queues/" + QUEUE.encode() + b"/messages HTTP/1.1\r\nHost: localhost\r\n"
        b"Content-Length: 6\r\n\r\nsecond"
        b"GET /api/queues/" + QUEUE.encode() + b"/peek HTTP/1.1\r\nHost: localhost\r\n\r\n"
    )
    await writer.drain()
    await wakeups.until_waiting()
    assert (await client.post(f"/api/queues/{QUEUE}/messages", json={"body": "first"})).status_code == 201
    answers = [await read_answer(reader) for _ in range(4)]
    writer.close()
    assert [status for status, _ in answers] == [200, 200, 201, 200]
    assert b'"first"' in answers[0][1] and b'"second"' in answers[3][1]


async def test_a_client_that_pipelines_too_much_behind_a_waiting_receive_is_disconnected(
    app: FastAPI, client: httpx.AsyncClient, port: int
) -> None:
    assert (await client.post("/api/queues", json={"path": QUEUE})).status_code == 201
    wakeups = observe_wakeups(app)
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(
        b"POST /api/queues/" + QUEUE.encode() + b"/receive?timeout_ms=30000 HTTP/1.1\r\n"
        b"Host: localhost\r\nContent-Length: 0\r\n\r\n"
    )
    await writer.drain()
    await wakeups.until_waiting()
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n" * 2000)  # about 90 KiB
    await writer.drain()
    await wakeups.until_none_waiting()  # the server closed the connection: the wait ended
    assert await reader.read() == b""
    writer.close()
    assert (await client.post(f"/api/queues/{QUEUE}/messages", json={"body": "kept"})).status_code == 201
    assert (await client.get(f"/api/queues/{QUEUE}/peek")).json()["body"] == "kept"
