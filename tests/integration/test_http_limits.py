"""HTTP-layer limits against a real `serve` process, over raw sockets: what a hostile client
can make the server read, hold or wait for is bounded."""

from __future__ import annotations

import select
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.gateway_process import GatewayProcess

SOCKET_TIMEOUT_S = 10.0
"""Bounds every socket read; only reached on failure."""
CHUNK = 64 * 1024
PUSHED_AT_MOST = 64 * 1024 * 1024
"""What the client offers: far more than any cap, so that a server reading it all is seen."""


@pytest.fixture
def server(database_url: str, tmp_path: Path) -> Iterator[GatewayProcess]:
    process = GatewayProcess(database_url, {"MSMQGW_TRIGGERS_ENABLED": "false"}, tmp_path / "gateway.log")
    try:
        process.wait_ready()
        yield process
    finally:
        process.stop()


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def read_answer(connection: socket.socket) -> bytes:
    """Everything the server sent until it closed the connection (or the head, at least)."""
    received = b""
    try:
        while b"\r\n\r\n" not in received or not received.endswith(b"}"):
            data = connection.recv(65536)
            if not data:
                break
            received += data
    except ConnectionResetError:
        pass
    return received


def push_chunked(port: int, head: bytes) -> tuple[int, bytes]:
    """Send a chunked body until the server answers or closes; (bytes pushed, answer)."""
    with socket.create_connection(("127.0.0.1", port), timeout=SOCKET_TIMEOUT_S) as connection:
        connection.sendall(head)
        pushed = 0
        chunk = b"%x\r\n" % CHUNK + b"x" * CHUNK + b"\r\n"
        while pushed < PUSHED_AT_MOST:
            readable, _, _ = select.select([connection], [], [], 0)
            if readable:
                break
            try:
                connection.sendall(chunk)
            except (BrokenPipeError, ConnectionResetError):
                break
            pushed += CHUNK
        return pushed, read_answer(connection)


@pytest.mark.parametrize(
    ("method", "target"),
    [
        ("POST", "/api/queues"),
        ("PATCH", "/api/queue-manager"),
        ("POST", "/api/rules"),
    ],
)
def test_a_chunked_admin_body_is_refused_before_the_client_has_sent_it(
    server: GatewayProcess, method: str, target: str
) -> None:
    before = rss_kib(server.process.pid)
    head = (
        f"{method} {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\n\r\n"
    ).encode()
    pushed, answer = push_chunked(server.port, head)
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    assert b"application/problem+json" in answer
    assert pushed < PUSHED_AT_MOST // 4, pushed  # the server stopped reading at the cap
    assert rss_kib(server.process.pid) - before < 32 * 1024
    assert httpx.get(f"{server.base_url}/healthz").status_code == 200


def test_a_declared_admin_body_over_the_cap_is_refused_from_its_head(server: GatewayProcess) -> None:
    with socket.create_connection(("127.0.0.1", server.port), timeout=SOCKET_TIMEOUT_S) as connection:
        connection.sendall(
            b"POST /api/queues HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: 400000000\r\n\r\n"
        )
        answer = read_answer(connection)
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
    assert b"connection: close" in answer.lower()
