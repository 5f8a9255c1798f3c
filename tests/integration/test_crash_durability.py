"""A real server killed with SIGKILL mid-stream loses nothing it acknowledged with a 201.

The gateway runs as `msmq-gateway serve --no-migrate` on loopback, on each store. A few
concurrent clients send until the process dies; a new process on the same database must
hold every acknowledged message exactly once, with the same message and lookup IDs, and
keep the queue manager's identity and its lookup-ID counter.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tests.integration.support import gateway_command

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

QUEUE = "private$/durable"
MESSAGES = f"/api/queues/{QUEUE}/messages"
PRIORITY = 3
CLIENTS = 4
ACKNOWLEDGED_BEFORE_KILL = 80
READY_ATTEMPTS = 300
READY_INTERVAL_S = 0.05
"""Readiness probe: at most READY_ATTEMPTS polls of /healthz, READY_INTERVAL_S apart."""
STREAM_LIMIT_S = 60.0
"""Bounds the whole stream; only reached on failure."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class Server:
    """A gateway process on a free loopback port, serving an already migrated database."""

    def __init__(self, database_url: str, log: Path) -> None:
        self.log = log
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        environment = {name: value for name, value in os.environ.items() if not name.startswith("MSMQGW_")}
        environment["MSMQGW_DATABASE_URL"] = database_url
        command = [
            *gateway_command(),
            "serve",
            "--no-migrate",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
        ]
        with log.open("ab") as output:
            self.process = subprocess.Popen(
                [*command, "--log-level", "warning"], env=environment, stdout=output, stderr=subprocess.STDOUT
            )

    def kill(self) -> None:
        """SIGKILL: no shutdown, no flush, no lifespan exit."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    async def ready(self, client: httpx.AsyncClient) -> dict[str, Any]:
        """Poll /healthz a bounded number of times: a readiness probe, not synchronisation."""
        for _ in range(READY_ATTEMPTS):
            if self.process.poll() is not None:
                break
            try:
                response = await client.get(f"{self.base_url}/healthz")
            except httpx.TransportError:
                await anyio.sleep(READY_INTERVAL_S)
                continue
            assert response.status_code == 200, response.text
            health: dict[str, Any] = response.json()
            return health
        raise AssertionError(f"the server did not become ready:\n{self.log.read_text(errors='replace')}")


@contextmanager
def running(database_url: str, log: Path) -> Iterator[Server]:
    server = Server(database_url, log)
    try:
        yield server
    finally:
        server.kill()


@dataclass
class Stream:
    """What the clients were told: acknowledged sends, and sends whose fate is unknown."""

    acknowledged: dict[str, dict[str, Any]] = field(default_factory=dict)
    unknown: set[str] = field(default_factory=set)
    refused: list[str] = field(default_factory=list)
    enough: anyio.Event = field(default_factory=anyio.Event)

    async def client(self, http: httpx.AsyncClient, base_url: str, number: int) -> None:
        """Send numbered bodies until the server stops answering."""
        sequence = 0
        while True:
            body = f"client {number} message {sequence}"
            sequence += 1
            try:
                response = await http.post(f"{base_url}{MESSAGES}", json={"body": body, "priority": PRIORITY})
            except httpx.TransportError:
                self.unknown.add(body)  # in flight when the process died: may or may not be stored
                return
            if response.status_code != 201:
                self.refused.append(f"{body}: {response.status_code} {response.text}")
                return
            self.acknowledged[body] = response.json()
            if len(self.acknowledged) >= ACKNOWLEDGED_BEFORE_KILL:
                self.enough.set()


async def stored_messages(http: httpx.AsyncClient, base_url: str) -> list[dict[str, Any]]:
    """Every available message of the queue, paging by lookup ID."""
    found: list[dict[str, Any]] = []
    after = "0"
    while True:
        response = await http.get(f"{base_url}{MESSAGES}", params={"after": after, "limit": 1000})
        assert response.status_code == 200, response.text
        page = response.json()
        found.extend(page["messages"])
        if page["next_after"] is None:
            return found
        after = page["next_after"]


async def send_one(http: httpx.AsyncClient, base_url: str, body: str) -> dict[str, Any]:
    response = await http.post(f"{base_url}{MESSAGES}", json={"body": body, "priority": PRIORITY})
    assert response.status_code == 201, response.text
    sent: dict[str, Any] = response.json()
    return sent


async def test_nothing_acknowledged_is_lost_when_the_server_is_killed(
    database_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "server.log"
    stream = Stream()
    async with httpx.AsyncClient(timeout=30) as http:
        with running(database_url, log) as first:
            health = await first.ready(http)
            created = await http.post(f"{first.base_url}/api/queues", json={"path": QUEUE})
            assert created.status_code == 201, created.text
            before = await send_one(http, first.base_url, "before the stream")
            with anyio.fail_after(STREAM_LIMIT_S):
                async with anyio.create_task_group() as group:
                    for number in range(CLIENTS):
                        group.start_soon(stream.client, http, first.base_url, number)
                    await stream.enough.wait()
                    first.kill()
            assert first.process.returncode == -signal.SIGKILL
        assert not stream.refused, stream.refused
        assert len(stream.acknowledged) >= ACKNOWLEDGED_BEFORE_KILL
        assert len(stream.unknown) == CLIENTS  # every client was cut off by the kill

        with running(database_url, log) as second:
            after_restart = await second.ready(http)
            stored = await stored_messages(http, second.base_url)
            queue = (await http.get(f"{second.base_url}/api/queues/{QUEUE}")).json()
            manager = (await http.get(f"{second.base_url}/api/queue-manager")).json()
            new = await send_one(http, second.base_url, "after the restart")

    by_body = {message["body"]: message for message in stored}
    counts = Counter(message["body"] for message in stored)
    assert not [body for body, count in counts.items() if count > 1], "stored twice"
    lost = sorted(set(stream.acknowledged) - set(by_body))
    assert not lost, f"acknowledged with 201 but missing after the restart: {lost[:10]}"
    for body, answer in stream.acknowledged.items():
        assert (by_body[body]["message_id"], by_body[body]["lookup_id"]) == (
            answer["message_id"],
            answer["lookup_id"],
        )
    invented = set(by_body) - set(stream.acknowledged) - stream.unknown - {"before the stream"}
    assert not invented, f"stored but never sent: {sorted(invented)[:10]}"
    assert by_body["before the stream"]["message_id"] == before["message_id"]
    assert queue["message_count"] == len(stored)

    assert after_restart["queue_manager"] == health["queue_manager"] == manager["guid"]
    old_lookup_ids = [int(message["lookup_id"]) for message in stored]
    assert int(new["lookup_id"]) > max(old_lookup_ids)  # same priority: the counter went on
    assert new["message_id"] not in {message["message_id"] for message in stored}
    assert new["message_id"].startswith("{" + manager["guid"] + "}\\")
