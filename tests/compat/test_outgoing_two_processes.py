"""Two gateway processes on one database send one outgoing queue to a third: one at a time.

A1 and A2 share a database (as `serve --workers 2` or two hosts would); messages for B's queue
are sent through both, alternately, so both delivery loops are woken and race for the same
outgoing queue. With the lease, B stores each message once, in the order it was sent, and
never sees a duplicate POST (its counter of dropped duplicates stays 0). The takeover of a
crashed owner's queue is tested with a settable clock in tests/contract/test_outgoing_leases.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import pytest

from tests.compat.replay_support import Server
from tests.compat.test_two_gateways import A_SETTINGS, B_SETTINGS, eventually
from tests.conftest import STORES
from tests.databases import PostgresDatabases, SqliteDatabases

pytestmark = pytest.mark.slow
MESSAGES = 40


@dataclass
class Trio:
    a1: Server
    a2: Server
    b: Server

    @property
    def remote(self) -> str:
        return f"DIRECT=HTTP://localhost:{self.b.port}/msmq/private$/orders"

    def send(self, through: Server, body: str) -> None:
        response = through.api.post(
            f"/api/queues/{quote(self.remote, safe='')}/messages", json={"body": body}
        )
        assert response.status_code == 201, response.text

    def outgoing(self) -> dict[str, Any]:
        response = self.a1.api.get("/api/outgoing-queues")
        assert response.status_code == 200, response.text
        [queue] = response.json()["outgoing_queues"]
        return dict(queue)


@pytest.fixture(scope="module", params=STORES)
def trio(
    request: pytest.FixtureRequest,
    sqlite_databases: SqliteDatabases,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Trio]:
    databases: SqliteDatabases | PostgresDatabases = (
        sqlite_databases if request.param == "sqlite" else request.getfixturevalue("postgres_databases")
    )
    logs = tmp_path_factory.mktemp(f"outgoing-two-processes-{request.param}")
    with ExitStack() as stack:
        a_database = stack.enter_context(databases.dedicated_database())
        b_database = stack.enter_context(databases.dedicated_database())
        servers = [
            Server(a_database, A_SETTINGS, logs / "a1.log"),
            Server(a_database, A_SETTINGS, logs / "a2.log"),
            Server(b_database, B_SETTINGS, logs / "b.log"),
        ]
        for server in servers:
            stack.callback(server.stop)
        for server in servers:
            server.wait_ready()
        servers[2].create_queue("private$/orders", transactional=False)
        yield Trio(*servers)


def test_each_message_is_posted_once_and_in_order(trio: Trio) -> None:
    bodies = [f"message {number}" for number in range(MESSAGES)]
    for number, body in enumerate(bodies):
        trio.send(trio.a1 if number % 2 else trio.a2, body)
    eventually(lambda: len(trio.b.messages("private$/orders")) >= MESSAGES, "arrival of every message at B")
    assert [message["body"] for message in trio.b.messages("private$/orders")] == bodies
    statistics = trio.b.api.get("/api/srmp/statistics").json()
    assert (statistics["stored"], statistics["duplicates"]) == (MESSAGES, 0), statistics
    settled = eventually(
        lambda: (queue := trio.outgoing())["message_count"] == 0 and queue["owner"] is None and queue,
        "A's outgoing queue empty and its lease given up",
    )
    assert settled["delivered_count"] == MESSAGES
