"""A real server killed with SIGKILL mid-stream loses nothing it acknowledged with a 201.

The gateway runs as `msmq-gateway serve --no-migrate` on loopback, on each store. A few
concurrent clients send until the process dies; a new process on the same database must
hold every acknowledged message exactly once, with the same message and lookup IDs, and
keep the queue manager's identity and its lookup-ID counter.
"""

from __future__ import annotations

import signal
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tests.gateway_process import GatewayProcess
from tests.srmp_messages import new_stream_id, stream_request

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

QUEUE = "private$/durable"
MESSAGES = f"/api/queues/{QUEUE}/messages"
PRIORITY = 3
CLIENTS = 4
ACKNOWLEDGED_BEFORE_KILL = 80
STREAM_LIMIT_S = 60.0
"""Bounds the whole stream; only reached on failure."""


class Server(GatewayProcess):
    async def ready(self, client: httpx.AsyncClient) -> dict[str, Any]:
        """Wait until serving (bounded probe), then return its queue manager's identity."""
        await anyio.to_thread.run_sync(self.wait_ready)
        response = await client.get(f"{self.base_url}/api/queue-manager")
        assert response.status_code == 200, response.text
        health: dict[str, Any] = response.json()
        return health


@contextmanager
def running(database_url: str, log: Path) -> Iterator[Server]:
    server = Server(database_url, {}, log)
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

    assert after_restart["guid"] == health["guid"] == manager["guid"]
    old_lookup_ids = [int(message["lookup_id"]) for message in stored]
    assert int(new["lookup_id"]) > max(old_lookup_ids)  # same priority: the counter went on
    assert new["message_id"] not in {message["message_id"] for message in stored}
    assert new["message_id"].startswith("{" + manager["guid"] + "}\\")


TX_QUEUE = "private$/durable_tx"
RECEIPTS = "http://sender.example/msmq/private$/order_queue$"
STREAM_ORDINALS = 60
KILL_AFTER_ORDINAL = 25
RESEND_BACK = 5
"""A Windows sender resends every message no stream receipt covered; these tests have no
receipts, so the resend starts a few ordinals before the last answered one."""


@dataclass
class StreamSender:
    """A Windows sender's transactional stream, one message after another (reference §4)."""

    url: str
    stream_id: Any = field(default_factory=new_stream_id)
    answered: int = 0
    enough: anyio.Event = field(default_factory=anyio.Event)

    async def send(self, http: httpx.AsyncClient, base_url: str, first: int, last: int) -> None:
        for current in range(first, last + 1):
            content_type, body = stream_request(
                self.url, self.stream_id, current, receipts_to=RECEIPTS if current == 1 else None
            )
            try:
                response = await http.post(
                    f"{base_url}/msmq/{TX_QUEUE}", content=body, headers={"Content-Type": content_type}
                )
            except httpx.TransportError:
                return  # the server died with this message in flight
            assert response.status_code == 200, response.text
            self.answered = current
            if current >= KILL_AFTER_ORDINAL:
                self.enough.set()


async def test_a_transactional_stream_resumes_after_a_kill_without_loss_duplicates_or_reordering(
    database_url: str, tmp_path: Path
) -> None:
    log = tmp_path / "server.log"
    sender = StreamSender(f"http://localhost/msmq/{TX_QUEUE}")
    async with httpx.AsyncClient(timeout=30) as http:
        with running(database_url, log) as first:
            await first.ready(http)
            created = await http.post(
                f"{first.base_url}/api/queues", json={"path": TX_QUEUE, "transactional": True}
            )
            assert created.status_code == 201, created.text
            with anyio.fail_after(STREAM_LIMIT_S):
                async with anyio.create_task_group() as group:
                    group.start_soon(sender.send, http, first.base_url, 1, STREAM_ORDINALS)
                    await sender.enough.wait()
                    first.kill()
        assert KILL_AFTER_ORDINAL <= sender.answered < STREAM_ORDINALS
        with running(database_url, log) as second:
            await second.ready(http)
            resume_from = max(1, sender.answered - RESEND_BACK)
            await sender.send(http, second.base_url, resume_from, STREAM_ORDINALS)
            assert sender.answered == STREAM_ORDINALS
            response = await http.get(
                f"{second.base_url}/api/queues/{TX_QUEUE}/messages", params={"limit": 1000}
            )
            assert response.status_code == 200, response.text
            stored = [message["body"] for message in response.json()["messages"]]
    assert stored == [f"body-{current}" for current in range(1, STREAM_ORDINALS + 1)]
