"""HTTP-layer limits against a real `serve` process, over raw sockets: what a hostile client
can make the server read, hold or wait for is bounded."""

from __future__ import annotations

import select
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from tests.conftest import STORES
from tests.databases import PostgresDatabases, SqliteDatabases
from tests.gateway_process import GatewayProcess

SOCKET_TIMEOUT_S = 10.0
"""Bounds every socket read; only reached on failure."""
CHUNK = 64 * 1024
PUSHED_AT_MOST = 64 * 1024 * 1024
"""What the client offers: far more than any cap, so that a server reading it all is seen."""


@pytest.fixture(scope="module", params=STORES)
def store_url(request: pytest.FixtureRequest, sqlite_databases: SqliteDatabases) -> Iterator[str]:
    """A database of each kind for the module's servers: what is checked here is what the HTTP
    layer reads, holds and answers, so the tests of a store share one process per setting
    (a server's start took about 2 s of each test)."""
    databases: SqliteDatabases | PostgresDatabases = (
        sqlite_databases if request.param == "sqlite" else request.getfixturevalue("postgres_databases")
    )
    with databases.dedicated_database() as url:
        yield url


@contextmanager
def serving(database_url: str, settings: dict[str, str], log: Path) -> Iterator[GatewayProcess]:
    process = GatewayProcess(database_url, settings, log)
    try:
        process.wait_ready()
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def server(store_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    log = tmp_path_factory.mktemp("server") / "gateway.log"
    with serving(store_url, {"MSMQGW_TRIGGERS_ENABLED": "false"}, log) as process:
        yield process


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


SMALL_LIMITS = {
    "MSMQGW_TRIGGERS_ENABLED": "false",
    "MSMQGW_HTTP_MAX_HEADER_BYTES": "8192",
    "MSMQGW_HTTP_MAX_HEADERS": "20",
    "MSMQGW_HTTP_HEADER_TIMEOUT_S": "1",
    "MSMQGW_HTTP_BODY_TIMEOUT_S": "1",
}


@pytest.fixture(scope="module")
def limited(store_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[GatewayProcess]:
    with serving(store_url, SMALL_LIMITS, tmp_path_factory.mktemp("limited") / "gateway.log") as process:
        yield process


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/1.1 ") else 0


def push_head(port: int, head: bytes, pieces: Iterator[bytes]) -> tuple[int, bytes]:
    """Send a head, then pieces of it until the server answers or closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=SOCKET_TIMEOUT_S) as connection:
        connection.sendall(head)
        pushed = 0
        for piece in pieces:
            if select.select([connection], [], [], 0)[0]:
                break
            try:
                connection.sendall(piece)
            except (BrokenPipeError, ConnectionResetError):
                break
            pushed += len(piece)
        return pushed, read_answer(connection)


def test_a_header_larger_than_the_limit_is_refused_while_it_comes(limited: GatewayProcess) -> None:
    before = rss_kib(limited.process.pid)
    pieces = (b"a" * CHUNK for _ in range(PUSHED_AT_MOST // CHUNK))
    pushed, answer = push_head(limited.port, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ", pieces)
    assert status_of(answer) == 431, answer[:200]
    assert pushed < PUSHED_AT_MOST // 4, pushed
    assert rss_kib(limited.process.pid) - before < 32 * 1024
    assert httpx.get(f"{limited.base_url}/healthz").status_code == 200


def test_too_many_headers_are_refused(limited: GatewayProcess) -> None:
    headers = b"".join(b"X-Header-%d: v\r\n" % number for number in range(100))
    with socket.create_connection(("127.0.0.1", limited.port), timeout=SOCKET_TIMEOUT_S) as connection:
        connection.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n" + headers + b"\r\n")
        answer = read_answer(connection)
    assert status_of(answer) == 431, answer[:200]


@pytest.mark.parametrize(
    "sent",
    [
        b"",  # connects and says nothing
        b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n",  # a head that never ends
        b"POST /api/queues HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: 100\r\n\r\n{",  # a body that never ends
    ],
    ids=["idle", "slow head", "slow body"],
)
def test_a_connection_that_stalls_is_closed(limited: GatewayProcess, sent: bytes) -> None:
    """The server ends it (408 or a plain close) long before the client's 10 s read bound."""
    with socket.create_connection(("127.0.0.1", limited.port), timeout=SOCKET_TIMEOUT_S) as connection:
        connection.sendall(sent)
        answer = read_answer(connection)
        assert status_of(answer) in (0, 408), answer[:200]
        assert connection.recv(1) == b""  # closed by the server, not timed out here


def test_connections_over_the_cap_are_refused(database_url: str, tmp_path: Path) -> None:
    cap = 8
    settings = {"MSMQGW_TRIGGERS_ENABLED": "false", "MSMQGW_MAX_CONNECTIONS": str(cap)}
    process = GatewayProcess(database_url, settings, tmp_path / "gateway.log")
    held: list[socket.socket] = []
    try:
        process.wait_ready()
        statuses = []
        for _ in range(cap + 4):
            connection = socket.create_connection(("127.0.0.1", process.port), timeout=SOCKET_TIMEOUT_S)
            held.append(connection)  # kept open: each holds a place
            connection.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            statuses.append(status_of(read_answer_once(connection)))
        assert statuses.count(503) >= 4 and set(statuses) == {200, 503}, statuses
        assert statuses[: cap - 1] == [200] * (cap - 1), statuses
        for connection in held:
            connection.close()
        held.clear()
        with httpx.Client(base_url=process.base_url) as fresh:  # places free again once closed
            assert any(fresh.get("/healthz").status_code == 200 for _ in range(50))
    finally:
        for connection in held:
            connection.close()
        process.stop()


def read_answer_once(connection: socket.socket) -> bytes:
    """One answer with a Content-Length body on a connection that stays open."""
    received = b""
    while b"\r\n\r\n" not in received:
        data = connection.recv(65536)
        if not data:
            return received
        received += data
    head, _, body = received.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        data = connection.recv(65536)
        if not data:
            break
        body += data
    return head + b"\r\n\r\n" + body
