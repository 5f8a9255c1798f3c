"""For test_srmp_replay: a real gateway process, and raw HTTP/1.x over a socket.

Requests go out exactly as given (byte-exact vectors, pipelined or deliberately broken ones);
answers are parsed by hand, one at a time, so that their order and framing can be checked.
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.gateway_process import GatewayProcess

SOCKET_TIMEOUT_S = 10.0
"""Bounds every read; only reached on failure (the server owes each answer at once)."""


class Server(GatewayProcess):
    """A gateway process with a REST client for checking what the replays stored."""

    def __init__(
        self, database_url: str, settings: dict[str, str], log: Path, port: int | None = None
    ) -> None:
        super().__init__(database_url, settings, log, port)
        self.api = httpx.Client(base_url=self.base_url, timeout=SOCKET_TIMEOUT_S)

    def stop(self) -> None:
        self.api.close()
        super().stop()

    def alive(self) -> bool:
        health = self.api.get("/healthz")
        return self.process.poll() is None and health.status_code == 200 and health.json()["status"] == "ok"

    def create_queue(self, path: str, transactional: bool) -> None:
        created = self.api.post("/api/queues", json={"path": path, "transactional": transactional})
        assert created.status_code == 201, created.text

    def messages(self, queue: str) -> list[dict[str, Any]]:
        """Every available message of a queue, in queue order, paging by lookup ID."""
        found: list[dict[str, Any]] = []
        after = "0"
        while True:
            response = self.api.get(f"/api/queues/{queue}/messages", params={"after": after, "limit": 1000})
            assert response.status_code == 200, response.text
            page = response.json()
            found.extend(page["messages"])
            if page["next_after"] is None:
                return found
            after = page["next_after"]

    def counts(self) -> dict[str, int]:
        """The message count of every queue (journals included) and of the whole queue manager."""
        queues = self.api.get("/api/queues")
        machine = self.api.get("/api/queue-manager")
        assert queues.status_code == machine.status_code == 200, (queues.text, machine.text)
        counts = {queue["path"]: queue["message_count"] for queue in queues.json()}
        return counts | {"(queue manager)": machine.json()["message_count"]}


@dataclass(frozen=True)
class Answer:
    status: int
    headers: dict[str, str]
    """Names lower-cased."""
    body: bytes


class Connection:
    """One TCP connection: bytes go out exactly as given, answers are read one at a time."""

    def __init__(self, port: int) -> None:
        self._socket = socket.create_connection(("127.0.0.1", port), timeout=SOCKET_TIMEOUT_S)
        self._buffer = b""

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *_exc: object) -> None:
        self._socket.close()

    def send(self, data: bytes) -> None:
        self._socket.sendall(data)

    def answer(self) -> Answer:
        """The next answer: status line, headers, then exactly Content-Length bytes."""
        while b"\r\n\r\n" not in self._buffer:
            self._fill()
        head, _, self._buffer = self._buffer.partition(b"\r\n\r\n")
        status_line, *lines = head.decode("latin-1").split("\r\n")
        fields = (line.partition(":") for line in lines)
        headers = {name.strip().lower(): value.strip() for name, _, value in fields}
        length = int(headers.get("content-length", "0"))
        while len(self._buffer) < length:
            self._fill()
        body, self._buffer = self._buffer[:length], self._buffer[length:]
        return Answer(int(status_line.split(" ")[1]), headers, body)

    def closed_by_server(self) -> bool:
        """True when the server closed the connection with nothing more to read."""
        return self._buffer == b"" and self._socket.recv(1) == b""

    def _fill(self) -> None:
        chunk = self._socket.recv(65536)
        assert chunk, f"the server closed the connection; unread: {self._buffer[:200]!r}"
        self._buffer += chunk


def replay(server: Server, data: bytes) -> Answer:
    """Send the bytes on a new connection and read one answer; nothing else is sent or awaited."""
    with Connection(server.port) as connection:
        connection.send(data)
        return connection.answer()
