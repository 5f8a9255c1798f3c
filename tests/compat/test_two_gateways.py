"""Two gateway processes on loopback, A forwarding to B over SRMP (issue: outbound SRMP).

A sends to `DIRECT=HTTP://127.0.0.1:<B>/msmq/...`: the message waits in A's outgoing queue and
goes out with the envelope builder; B stores it as from any Windows sender. Outcomes are
asynchronous, so each test polls the observable result (a bounded probe, not a sleep)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import pytest

from tests.compat.replay_support import Server
from tests.conftest import STORES
from tests.databases import PostgresDatabases, SqliteDatabases
from tests.gateway_process import free_port
from tests.srmp_messages import new_stream_id, stream_request

T = TypeVar("T")
EVENTUALLY_S = 30.0
"""How long an asynchronous outcome may take; only reached on failure."""
FAST_SENDING = {
    "MSMQGW_SRMP_SEND_INTERVAL_S": "0.05",
    "MSMQGW_SRMP_RETRY_MIN_S": "0.1",
    "MSMQGW_SRMP_RETRY_MAX_S": "0.2",
}
# Both listen on loopback; each knows itself by one name and the other by the other name.
A_SETTINGS = FAST_SENDING | {
    "MSMQGW_LOCAL_HOST_NAMES": "127.0.0.1",
    "MSMQGW_SRMP_OUTBOUND_HOSTS": "localhost:*",
}
B_SETTINGS = FAST_SENDING | {
    "MSMQGW_LOCAL_HOST_NAMES": "localhost",
    "MSMQGW_SRMP_OUTBOUND_HOSTS": "127.0.0.1:*",
}
DEADLETTER = 1
JOURNAL = 2
POS_ARRIVAL = 1


def eventually(probe: Callable[[], T | None], what: str) -> T:
    deadline = time.monotonic() + EVENTUALLY_S
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"not within {EVENTUALLY_S} s: {what}")


@dataclass
class Pair:
    a: Server
    b: Server
    b_database: str
    logs: Path

    def remote(self, queue: str) -> str:
        return f"DIRECT=HTTP://localhost:{self.b.port}/msmq/{queue}"

    def send_from_a(self, queue: str, **message: Any) -> dict[str, Any]:
        response = self.a.api.post(f"/api/queues/{quote(self.remote(queue), safe='')}/messages", json=message)
        assert response.status_code == 201, response.text
        body: dict[str, Any] = response.json()
        return body

    def outgoing_of_a(self) -> dict[str, dict[str, Any]]:
        response = self.a.api.get("/api/outgoing-queues")
        assert response.status_code == 200, response.text
        return {queue["url"].casefold(): queue for queue in response.json()["outgoing_queues"]}

    def restart_b(self) -> None:
        self.b = Server(self.b_database, B_SETTINGS, self.logs / "b.log", port=self.b.port)
        self.b.wait_ready()


@pytest.fixture(scope="module", params=STORES)
def pair(
    request: pytest.FixtureRequest,
    sqlite_databases: SqliteDatabases,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Pair]:
    databases: SqliteDatabases | PostgresDatabases = (
        sqlite_databases if request.param == "sqlite" else request.getfixturevalue("postgres_databases")
    )
    logs = tmp_path_factory.mktemp(f"two-gateways-{request.param}")
    with ExitStack() as stack:
        a_database = stack.enter_context(databases.dedicated_database())
        b_database = stack.enter_context(databases.dedicated_database())
        a = Server(a_database, A_SETTINGS, logs / "a.log")
        stack.callback(a.stop)
        b = Server(b_database, B_SETTINGS, logs / "b.log", port=free_port())
        pair = Pair(a, b, b_database, logs)
        stack.callback(lambda: pair.b.stop())
        a.wait_ready()
        b.wait_ready()
        for queue in ("private$/orders", "private$/outage", "private$/order_queue$"):
            b.create_queue(queue, transactional=False)
        b.create_queue("private$/orders_tx", transactional=True)
        a.create_queue("private$/admin", transactional=False)
        a.create_queue("private$/orders_tx", transactional=True)
        yield pair


def only(messages: list[dict[str, Any]], label: str) -> dict[str, Any] | None:
    found = [message for message in messages if message["label"] == label]
    assert len(found) <= 1, found
    return found[0] if found else None


@pytest.mark.parametrize("delivery", ["express", "recoverable"])
def test_message_reaches_the_other_gateway_with_its_properties(pair: Pair, delivery: str) -> None:
    label = f"forwarded {delivery}"
    pair.send_from_a(
        "private$/orders",
        body="order 17",
        label=label,
        priority=6,
        app_specific=4711,
        correlation_id="AAECAwQFBgcICQoLDA0ODxAREhM=",
        delivery=delivery,
        journal=JOURNAL,
        time_to_be_received=3600,
    )
    arrived = eventually(lambda: only(pair.b.messages("private$/orders"), label), "arrival at B")
    assert arrived["body"] == "order 17"
    assert (arrived["priority"], arrived["app_specific"], arrived["delivery"]) == (6, 4711, delivery)
    assert arrived["correlation_id"] == "AAECAwQFBgcICQoLDA0ODxAREhM="
    assert 3500 < arrived["time_to_be_received"] <= 3600
    # positive source journaling: A keeps a copy in its computer journal once B took it
    journaled = eventually(lambda: only(pair.a.messages("system$;journal"), label), "journal copy at A")
    assert journaled["body"] == "order 17"
    outgoing = pair.outgoing_of_a()[pair.remote("private$/orders")[len("DIRECT=") :].casefold()]
    assert outgoing["message_count"] == 0 and outgoing["delivered_count"] >= 1


def test_a_message_the_destination_refuses_is_dead_lettered_at_the_source(pair: Pair) -> None:
    pair.send_from_a("private$/no_such_queue", body="lost", label="refused", journal=DEADLETTER)
    dead = eventually(lambda: only(pair.a.messages("system$;deadletter"), "refused"), "dead letter at A")
    assert dead["message_class"] == 0x8000  # MQMSG_CLASS_NACK_BAD_DST_Q
    assert dead["body"] == "lost"
    outgoing = pair.outgoing_of_a()[pair.remote("private$/no_such_queue")[len("DIRECT=") :].casefold()]
    assert outgoing["message_count"] == 0 and "HTTP 400" in outgoing["last_error"]


def test_messages_wait_out_an_outage_of_the_receiver_and_arrive_in_order(pair: Pair) -> None:
    pair.b.stop()
    try:
        for number in range(3):
            pair.send_from_a("private$/outage", body=f"during outage {number}", label=f"outage {number}")
        key = pair.remote("private$/outage")[len("DIRECT=") :].casefold()
        waiting = eventually(
            lambda: (queue := pair.outgoing_of_a().get(key)) and queue["attempts"] >= 2 and queue,
            "A notices the outage",
        )
        assert waiting["state"] == "waiting-to-connect" and waiting["message_count"] == 3
    finally:
        pair.restart_b()
    wanted = [f"during outage {number}" for number in range(3)]
    arrived = eventually(lambda: len(pair.b.messages("private$/outage")) == 3, "arrival after the outage")
    assert arrived
    assert [message["body"] for message in pair.b.messages("private$/outage")] == wanted


def test_paused_outgoing_queue_keeps_its_messages_until_resumed(pair: Pair) -> None:
    pair.send_from_a("private$/orders", body="first", label="before pause")
    eventually(lambda: only(pair.b.messages("private$/orders"), "before pause"), "arrival")
    key = pair.remote("private$/orders")[len("DIRECT=") :].casefold()
    queue_id = pair.outgoing_of_a()[key]["id"]
    paused = pair.a.api.post(f"/api/outgoing-queues/{queue_id}/pause")
    assert paused.status_code == 200 and paused.json()["state"] == "paused"
    pair.send_from_a("private$/orders", body="held", label="while paused")
    assert pair.outgoing_of_a()[key]["message_count"] == 1
    resumed = pair.a.api.post(f"/api/outgoing-queues/{queue_id}/resume")
    assert resumed.status_code == 200
    eventually(lambda: only(pair.b.messages("private$/orders"), "while paused"), "arrival after resume")


def test_arrival_acknowledgment_comes_back_to_the_senders_admin_queue(pair: Pair) -> None:
    admin = f"DIRECT=HTTP://127.0.0.1:{pair.a.port}/msmq/private$/admin"
    sent = pair.send_from_a(
        "private$/orders", body="ack me", label="acknowledged", admin_queue=admin, acknowledge=POS_ARRIVAL
    )
    ack = eventually(lambda: only(pair.a.messages("private$/admin"), "acknowledged"), "ack at A")
    assert ack["message_class"] == 0x0002  # MQMSG_CLASS_ACK_REACH_QUEUE
    assert ack["correlation_id"] is not None and sent["message_id"]


def test_stream_receipt_reaches_the_senders_order_queue(pair: Pair) -> None:
    """A receives a stream whose receipts go to B's order queue: the receipt reaches B, which
    answers it 200 and, since B does not send that stream, drops and counts it (a stray
    receipt, reference §4.3, §4.7): nothing is stored in B's order queue."""
    stream = new_stream_id()
    receipts_to = f"http://localhost:{pair.b.port}/msmq/private$/order_queue$"
    to = f"http://127.0.0.1:{pair.a.port}/msmq/private$/orders_tx"
    for current in (1, 2, 3):
        content_type, body = stream_request(
            to, stream, current, receipts_to=receipts_to if current == 1 else None
        )
        response = pair.a.api.post(
            "/msmq/private$/orders_tx", content=body, headers={"Content-Type": content_type}
        )
        assert response.status_code == 200
    counted = eventually(
        lambda: pair.b.api.get("/api/srmp/statistics").json()["stray_stream_receipts"],
        "stream receipt at B",
    )
    assert 1 <= counted <= 3
    assert pair.b.messages("private$/order_queue$") == []


def test_transactional_messages_travel_as_a_stream_and_leave_once_receipted(pair: Pair) -> None:
    """A's transactional sends reach B once and in order; they stay in A's outgoing queue until
    B's stream receipt (POSTed back to A's order queue URL) covers them."""
    began = pair.a.api.post("/api/transactions")
    assert began.status_code == 201, began.text
    transaction = began.json()["id"]
    target = f"/api/queues/{quote(pair.remote('private$/orders_tx'), safe='')}/messages"
    for number in range(3):
        sent = pair.a.api.post(target, params={"transaction": transaction}, json={"body": f"tx {number}"})
        assert sent.status_code == 201, sent.text
    single = pair.a.api.post(target, params={"transaction": "single"}, json={"body": "tx single"})
    assert single.status_code == 201, single.text
    assert pair.a.api.post(f"/api/transactions/{transaction}/commit").status_code == 204
    eventually(lambda: len(pair.b.messages("private$/orders_tx")) >= 4, "arrival at B")
    arrived = [message["body"] for message in pair.b.messages("private$/orders_tx")]
    assert sorted(arrived) == ["tx 0", "tx 1", "tx 2", "tx single"]
    assert [body for body in arrived if body != "tx single"] == ["tx 0", "tx 1", "tx 2"]
    key = pair.remote("private$/orders_tx")[len("DIRECT=") :].casefold()
    settled = eventually(
        lambda: (queue := pair.outgoing_of_a().get(key)) is not None and queue["message_count"] == 0,
        "the stream receipt settles A's outgoing queue",
    )
    assert settled
    assert pair.outgoing_of_a()[key]["delivered_count"] == 4
    assert len(pair.b.messages("private$/orders_tx")) == 4


def test_a_message_that_cannot_reach_its_queue_in_time_is_dead_lettered_at_the_source(pair: Pair) -> None:
    unreachable = "DIRECT=HTTP://localhost:1/msmq/private$/nowhere"  # nothing listens on port 1
    response = pair.a.api.post(
        f"/api/queues/{quote(unreachable, safe='')}/messages",
        json={"body": "too late", "label": "ttrq ran out", "journal": DEADLETTER, "time_to_reach_queue": 1},
    )
    assert response.status_code == 201, response.text
    dead = eventually(lambda: only(pair.a.messages("system$;deadletter"), "ttrq ran out"), "dead letter at A")
    assert dead["message_class"] == 0x8002  # MQMSG_CLASS_NACK_REACH_QUEUE_TIMEOUT
    outgoing = pair.outgoing_of_a()["http://localhost:1/msmq/private$/nowhere"]
    assert outgoing["message_count"] == 0 and outgoing["state"] in ("waiting-to-connect", "idle")


def test_a_transactional_message_purged_at_the_destination_lands_in_the_senders_deadxact(pair: Pair) -> None:
    """Reference §4.4: B purges a transactional message A sent with DEADLETTER; B's final receipt
    (class 0xC001) comes back to A's order queue URL, and A moves its copy, which it kept after
    the stream receipt, to its transactional dead-letter queue."""
    pair.b.create_queue("private$/final_tx", transactional=True)
    target = f"/api/queues/{quote(pair.remote('private$/final_tx'), safe='')}/messages"
    body = {"body": "purged at B", "label": "final receipt", "journal": DEADLETTER}
    sent = pair.a.api.post(target, params={"transaction": "single"}, json=body)
    assert sent.status_code == 201, sent.text
    eventually(lambda: pair.b.messages("private$/final_tx"), "arrival at B")
    key = pair.remote("private$/final_tx")[len("DIRECT=") :].casefold()
    kept = eventually(
        lambda: (queue := pair.outgoing_of_a().get(key)) and queue["delivered_count"] == 1 and queue,
        "B's stream receipt reaches A",
    )
    assert kept["message_count"] == 1  # kept at A until the final receipt
    assert pair.b.api.post("/api/queues/private$/final_tx/purge").status_code == 200
    dead = eventually(lambda: only(pair.a.messages("system$;deadxact"), "final receipt"), "DEADXACT at A")
    assert dead["message_class"] == 0xC001  # MQMSG_CLASS_NACK_Q_PURGED
    assert (dead["message_id"], dead["body"]) == (sent.json()["message_id"], "purged at B")
    assert pair.outgoing_of_a()[key]["message_count"] == 0


@pytest.mark.parametrize(
    ("message", "body_type", "value"),
    [
        ({"format": "dotnet-xml-string", "body": "for .NET"}, 0, {"string": "for .NET"}),
        ({"format": "activex", "vt": "VT_BSTR", "body": "for COM"}, 8, "for COM"),
        ({"format": "activex", "vt": "VT_I4", "value": 4711}, 3, 4711),
        ({"format": "activex", "vt": "VT_UI1|VT_VECTOR", "value": "AAEC"}, 4113, "AAEC"),
    ],
)
def test_bodies_in_dotnet_formats_arrive_decodable(
    pair: Pair, message: dict[str, Any], body_type: int, value: Any
) -> None:
    label = f"formatted {message['format']} {message.get('vt', '')}"
    pair.send_from_a("private$/orders", label=label, **message)

    def arrived() -> dict[str, Any] | None:
        response = pair.b.api.get("/api/queues/private$/orders/messages", params={"decode": "true"})
        return only(response.json()["messages"], label)

    message_at_b = eventually(arrived, "arrival at B")
    assert message_at_b["body_type"] == body_type
    assert message_at_b["decoded"]["value"] == value
