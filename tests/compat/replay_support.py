"""For test_srmp_replay: a real gateway process, and raw HTTP/1.x over a socket.

Requests go out exactly as given (byte-exact vectors, pipelined or deliberately broken ones);
answers are parsed by hand, one at a time, so that their order and framing can be checked.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.integration.support import gateway_command

READY_ATTEMPTS = 300
READY_INTERVAL_S = 0.05
"""Readiness probe: at most READY_ATTEMPTS polls of /healthz, READY_INTERVAL_S apart."""
SOCKET_TIMEOUT_S = 10.0
"""Bounds every read; only reached on failure (the server owes each answer at once)."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class Server:
    """`msmq-gateway serve` on a free loopback port, on an already migrated database."""

    def __init__(self, database_url: str, settings: dict[str, str], log: Path) -> None:
        self.log = log
        self.port = free_port()
        environment = {name: value for name, value in os.environ.items() if not name.startswith("MSMQGW_")}
        environment |= {"MSMQGW_DATABASE_URL": database_url, **settings}
        command = [*gateway_command(), "serve", "--no-migrate", "--host", "127.0.0.1"]
        with log.open("ab") as output:
            self.process = subprocess.Popen(
                [*command, "--port", str(self.port), "--log-level", "warning"],
                env=environment,
                stdout=output,
                stderr=subprocess.STDOUT,
            )
        self.api = httpx.Client(base_url=f"http://127.0.0.1:{self.port}", timeout=SOCKET_TIMEOUT_S)

    def wait_ready(self) -> None:
        """Poll /healthz a bounded number of times: a readiness probe, not synchronisation."""
        for _ in range(READY_ATTEMPTS):
            if self.process.poll() is not None:
                break
            try:
                if self.api.get("/healthz").status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(READY_INTERVAL_S)
        raise AssertionError(f"the server did not become ready:\n{self.log_text()}")

    def stop(self) -> None:
        self.api.close()
        if self.process.poll() is None:
            self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

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
