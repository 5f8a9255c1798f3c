"""Timers, dead-letter queues, journals and acknowledgments over the REST API, and the sweeper
of a real server process expiring a message on its own."""

from __future__ import annotations

import base64
import struct
import uuid
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from fastapi import FastAPI
from pydantic import ValidationError

from app.configs import manager_config
from app.gateway import Gateway
from app.main import create_app
from app.settings import Settings, load_settings
from qm.clock import SettableClock
from qm.config import TransactionTtbr
from tests.integration.support import (
    assert_problem,
    bodies,
    create_queue,
    json_of,
    message_count,
    peek,
    receive,
    send,
)
from tests.integration.test_crash_durability import running

pytestmark = pytest.mark.anyio

QUEUE = "private$/orders"
ADMIN = "private$/admin"
DEADLETTER = "system$;deadletter"
INFINITE = 4294967295
NACK_RECEIVE_TIMEOUT = 0xC002
DIRECT_DEADLETTER = "DIRECT=OS:.\\SYSTEM$;DEADLETTER"
DIRECT_ORDERS = "DIRECT=OS:.\\private$\\orders"


async def _expire(client: httpx.AsyncClient, app: FastAPI, clock: SettableClock, seconds: float) -> None:
    """Move the clock and run one sweeper pass, as the background task would; then QUEUE is
    empty. Not "this pass expired them": the background sweeper's first pass, begun at
    start-up, may still be running and read the moved clock first."""
    gateway: Gateway = app.state.gateway
    clock.advance(seconds)
    await gateway.manager.expire_due()
    assert await message_count(client, QUEUE) == 0


async def _guid(client: httpx.AsyncClient) -> str:
    guid: str = json_of(await client.get("/api/queue-manager"))["guid"]
    return guid


async def _dead_letter(client: httpx.AsyncClient, app: FastAPI, clock: SettableClock, body: str) -> None:
    await create_queue(client, QUEUE)
    await send(client, QUEUE, body, label="late", time_to_be_received=10, journal=1)
    await _expire(client, app, clock, 10)


def _url(name: str) -> str:
    """A format name as the {path} of /api/queues/{path}: every reserved character escaped."""
    return quote(name, safe="$")


# -- reading dead-letter queues and journals ----------------------------------------------


async def test_an_expired_message_is_read_from_system_deadletter(
    client: httpx.AsyncClient, app: FastAPI, clock: SettableClock
) -> None:
    await _dead_letter(client, app, clock, "expired order")
    assert await message_count(client, QUEUE) == 0
    queue = json_of(await client.get(f"/api/queues/{DEADLETTER}"))
    assert (queue["path"], queue["kind"], queue["message_count"]) == (DEADLETTER, "system", 1)
    [listed] = json_of(await client.get(f"/api/queues/{DEADLETTER}/messages"))["messages"]
    peeked = await peek(client, DEADLETTER)
    received = await receive(client, DEADLETTER)
    assert peeked is not None and received is not None
    for message in (listed, peeked, received):
        assert message["body"] == "expired order" and message["label"] == "late"
        assert message["message_class"] == NACK_RECEIVE_TIMEOUT
        assert message["message_class_name"] == "MQMSG_CLASS_NACK_RECEIVE_TIMEOUT"
        assert message["destination_queue"] == "private$\\orders"
        assert message["queue"] == DEADLETTER
        assert message["time_to_be_received"] == INFINITE  # a dead letter does not expire again
        assert message["journal"] == 1
    assert await message_count(client, DEADLETTER) == 0


async def test_a_dead_letter_queue_is_purged_and_emptied_by_lookup_id(
    client: httpx.AsyncClient, app: FastAPI, clock: SettableClock
) -> None:
    await create_queue(client, QUEUE)
    for number in range(3):
        await send(client, QUEUE, f"late {number}", time_to_be_received=10 + number, journal=1)
    await _expire(client, app, clock, 12)
    first = json_of(await client.get(f"/api/queues/{DEADLETTER}/messages/first"))
    removed = json_of(await client.post(f"/api/queues/{DEADLETTER}/messages/{first['lookup_id']}/receive"))
    assert removed["lookup_id"] == first["lookup_id"]
    assert json_of(await client.post(f"/api/queues/{DEADLETTER}/purge")) == {"purged": 2}
    assert await message_count(client, DEADLETTER) == 0


async def test_a_queue_journal_is_read_over_http(client: httpx.AsyncClient) -> None:
    await create_queue(client, QUEUE, journal=True)
    sent = await send(client, QUEUE, "to be journaled")
    assert (await receive(client, QUEUE) or {}).get("body") == "to be journaled"
    journal = f"{QUEUE};journal"
    copy = await peek(client, journal)
    assert copy is not None
    assert (copy["message_id"], copy["destination_queue"]) == (sent["message_id"], "private$\\orders")
    assert copy["queue"] == journal
    assert json_of(await client.post(f"/api/queues/{journal}/purge")) == {"purged": 1}


async def test_a_queue_is_shown_and_purged_by_format_name(
    client: httpx.AsyncClient, app: FastAPI, clock: SettableClock
) -> None:
    await _dead_letter(client, app, clock, "dead")
    guid = await _guid(client)
    names = (f"MACHINE={{{guid}}};DEADLETTER", DIRECT_DEADLETTER, "DIRECT=OS:localhost\\system$;deadletter")
    for name in names:
        shown = json_of(await client.get(f"/api/queues/{_url(name)}"))
        assert (shown["path"], shown["message_count"]) == (DEADLETTER, 1), name
    purged = json_of(await client.post(f"/api/queues/{_url(f'MACHINE={guid};DEADLETTER')}/purge"))
    assert purged == {"purged": 1}


async def test_a_dead_letter_queue_is_listed_by_format_name(
    client: httpx.AsyncClient, app: FastAPI, clock: SettableClock
) -> None:
    await _dead_letter(client, app, clock, "dead")
    name = f"MACHINE={{{await _guid(client)}}};DEADLETTER"
    page = json_of(await client.get(f"/api/queues/{_url(name)}/messages"))
    assert [message["body"] for message in page["messages"]] == ["dead"]


async def test_a_dead_letter_queue_is_peeked_by_format_name(
    client: httpx.AsyncClient, app: FastAPI, clock: SettableClock
) -> None:
    await _dead_letter(client, app, clock, "dead")
    name = f"MACHINE={{{await _guid(client)}}};DEADLETTER"
    response = await client.get(f"/api/queues/{_url(name)}/peek")
    assert json_of(response)["body"] == "dead"


async def test_a_dead_letter_queue_is_received_from_by_format_name(
    client: httpx.AsyncClient, app: FastAPI, clock: SettableClock
) -> None:
    await _dead_letter(client, app, clock, "dead")
    response = await client.post(f"/api/queues/{_url(DIRECT_DEADLETTER)}/receive")
    assert json_of(response)["body"] == "dead"
    assert await message_count(client, DEADLETTER) == 0


async def test_a_send_to_a_local_format_name_is_stored_once_and_answered_201(
    client: httpx.AsyncClient,
) -> None:
    await create_queue(client, QUEUE)
    response = await client.post(
        f"/api/queues/{_url(DIRECT_ORDERS)}/messages", json={"body": "by format name"}
    )
    assert response.status_code == 201, response.text
    assert response.json()["queue"] == QUEUE
    assert await bodies(client, QUEUE) == ["by format name"]


@pytest.mark.parametrize(
    "name",
    [
        DEADLETTER,
        "system$;deadxact",
        "system$;journal",
        f"{QUEUE};journal",
        "MACHINE={guid};DEADLETTER",
        "DIRECT=OS:.\\SYSTEM$;DEADXACT",
    ],
)
async def test_sending_to_a_dead_letter_or_journal_queue_is_refused(
    client: httpx.AsyncClient, name: str
) -> None:
    await create_queue(client, QUEUE)
    target = _url(name.format(guid=await _guid(client)))
    for request in (
        client.post(f"/api/queues/{target}/messages", json={"body": "refused"}),
        client.post(f"/api/queues/{target}/messages", content=b"raw refused"),
    ):
        assert_problem(await request, 403, "MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION")
    assert json_of(await client.get("/api/queue-manager"))["message_count"] == 0


@pytest.mark.parametrize(
    "name",
    ["MACHINE={0f0e0d0c-0b0a-4908-8706-050403020100};DEADLETTER", "DIRECT=OS:client01\\private$\\orders"],
)
async def test_a_format_name_of_another_computer_is_403(client: httpx.AsyncClient, name: str) -> None:
    await create_queue(client, QUEUE)
    assert_problem(
        await client.get(f"/api/queues/{_url(name)}"), 403, "MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION"
    )
    assert_problem(
        await client.post(f"/api/queues/{_url(name)}/messages", json={"body": "x"}),
        403,
        "MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION",
    )


# -- the queue manager's journal quota ----------------------------------------------------


async def test_the_computer_journal_quota_is_set_on_the_queue_manager(client: httpx.AsyncClient) -> None:
    await create_queue(client, QUEUE)
    assert json_of(await client.get("/api/queue-manager"))["journal_quota_kb"] == INFINITE
    manager = json_of(await client.patch("/api/queue-manager", json={"journal_quota_kb": 1}))
    assert (manager["journal_quota_kb"], manager["quota_kb"], manager["throttled"]) == (1, INFINITE, False)
    assert json_of(await client.get("/api/queue-manager"))["journal_quota_kb"] == 1
    assert json_of(await client.get("/api/queues/system$;journal"))["quota_kb"] == 1
    for body in ("a" * 600, "b" * 600, "c" * 424):
        await send(client, QUEUE, body, journal=2)  # every send succeeds
    assert [len(body) for body in await bodies(client, "system$;journal")] == [600, 424]
    assert await message_count(client, QUEUE) == 3
    for wrong in ({"journal_quota_kb": -1}, {"journal_quota_kb": INFINITE + 1}, {"journal_quota_kb": "big"}):
        assert_problem(
            await client.patch("/api/queue-manager", json=wrong), 400, "MQ_ERROR_INVALID_PARAMETER"
        )
    assert json_of(await client.get("/api/queue-manager"))["journal_quota_kb"] == 1


# -- acknowledgments ----------------------------------------------------------------------


async def test_an_acknowledgment_reads_as_json(client: httpx.AsyncClient) -> None:
    await create_queue(client, QUEUE)
    await create_queue(client, ADMIN)
    sent = await send(
        client,
        QUEUE,
        "payload",
        label="order 17",
        priority=5,
        app_specific=4711,
        admin_queue="DIRECT=http://localhost/msmq/private$/admin",
        acknowledge=1,
    )
    [ack] = json_of(await client.get(f"/api/queues/{ADMIN}/messages"))["messages"]
    guid_text, sequence = sent["message_id"].rsplit("\\", 1)
    expected = uuid.UUID(guid_text.strip("{}")).bytes_le + struct.pack("<I", int(sequence))
    assert base64.b64decode(ack["correlation_id"]) == expected
    assert (ack["message_class"], ack["message_class_name"]) == (2, "MQMSG_CLASS_ACK_REACH_QUEUE")
    assert (ack["label"], ack["app_specific"], ack["priority"]) == ("order 17", 4711, 5)
    assert (ack["body"], ack["delivery"], ack["acknowledge"]) == ("", "express", 0)
    assert ack["time_to_be_received"] == INFINITE and ack["admin_queue"] is None
    shown = json_of(await client.get(f"/api/queues/{_url(ack['response_queue'])}"))
    assert shown["path"] == QUEUE  # the response queue names the original destination


# -- settings -----------------------------------------------------------------------------


async def test_the_transaction_ttbr_setting_chooses_the_rule(
    settings: Settings, clock: SettableClock
) -> None:
    for rule, expected in (("first-message", [100, 100]), ("per-message", [100, 1000])):
        application = create_app(
            settings.model_copy(update={"transaction_ttbr": TransactionTtbr(rule)}), clock
        )
        async with application.router.lifespan_context(application):
            transport = httpx.ASGITransport(app=application)
            async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
                path = f"private$/{rule}"
                await create_queue(client, path, transactional=True)
                transaction = json_of(await client.post("/api/transactions"), 201)["id"]
                await send(client, path, "first", transaction, time_to_be_received=100)
                await send(client, path, "second", transaction, time_to_be_received=1000)
                assert (await client.post(f"/api/transactions/{transaction}/commit")).status_code == 204
                page = json_of(await client.get(f"/api/queues/{path}/messages"))["messages"]
                assert [message["time_to_be_received"] for message in page] == expected, rule


def test_the_timer_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MSMQGW_TRANSACTION_TTBR", "per-message")
    monkeypatch.setenv("MSMQGW_SWEEP_INTERVAL_S", "0.25")
    monkeypatch.setenv("MSMQGW_LOCAL_HOST_NAMES", " gw01 , GW01.Example.NET,,10.0.0.5 ")
    settings = load_settings()
    config = manager_config(settings)
    assert settings.sweep_interval_s == 0.25
    assert config.transaction_ttbr is TransactionTtbr.PER_MESSAGE
    assert config.local_host_names == frozenset({"gw01", "gw01.example.net", "10.0.0.5"})


def test_the_timer_settings_have_msmqs_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("MSMQGW_TRANSACTION_TTBR", "MSMQGW_SWEEP_INTERVAL_S", "MSMQGW_LOCAL_HOST_NAMES"):
        monkeypatch.delenv(name, raising=False)
    settings = load_settings()
    assert settings.sweep_interval_s == 0.5
    assert manager_config(settings).transaction_ttbr is TransactionTtbr.FIRST_MESSAGE
    assert {"localhost", "127.0.0.1", "::1"} <= manager_config(settings).local_host_names


@pytest.mark.parametrize(
    ("variable", "value"), [("MSMQGW_TRANSACTION_TTBR", "sometimes"), ("MSMQGW_SWEEP_INTERVAL_S", "0")]
)
def test_bad_timer_settings_are_refused(monkeypatch: pytest.MonkeyPatch, variable: str, value: str) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValidationError):
        load_settings()


# -- the sweeper of a real server ---------------------------------------------------------

PEEK_WAIT_MS = 1000
PEEK_ATTEMPTS = 10
"""Bounded: up to ten waiting peeks of 1 s each; a working sweeper answers the first or second."""


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@pytest.mark.slow
async def test_a_real_server_dead_letters_an_expired_message_within_a_second_of_its_deadline(
    database_url: str, tmp_path: Path
) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        with running(database_url, tmp_path / "server.log") as server:
            await server.ready(http)
            base = server.base_url
            assert (await http.post(f"{base}/api/queues", json={"path": QUEUE})).status_code == 201
            sent = await http.post(
                f"{base}/api/queues/{QUEUE}/messages",
                json={"body": "short-lived", "time_to_be_received": 1, "journal": 1},
            )
            assert sent.status_code == 201, sent.text
            copy = await _first_dead_letter(http, base)
            assert (await http.get(f"{base}/api/queues/{QUEUE}")).json()["message_count"] == 0
            guid = (await http.get(f"{base}/api/queue-manager")).json()["guid"]
            by_format_name = await http.get(f"{base}/api/queues/{_url(f'MACHINE={{{guid}}};DEADLETTER')}")
            assert by_format_name.json()["message_count"] == 1
    assert copy["message_id"] == sent.json()["message_id"]
    assert copy["message_class"] == NACK_RECEIVE_TIMEOUT
    assert copy["destination_queue"] == "private$\\orders"
    deadline = _instant(copy["sent_time"]) + timedelta(seconds=1)
    lateness = (_instant(copy["arrived_time"]) - deadline).total_seconds()
    assert 0 <= lateness <= 1.0, f"dead-lettered {lateness:.3f} s after the deadline"


async def _first_dead_letter(http: httpx.AsyncClient, base: str) -> dict[str, Any]:
    """Waiting peeks on the dead-letter queue (woken by the sweeper's insert), a bounded number."""
    for _ in range(PEEK_ATTEMPTS):
        response = await http.get(f"{base}/api/queues/{DEADLETTER}/peek", params={"timeout_ms": PEEK_WAIT_MS})
        if response.status_code == 200:
            copy: dict[str, Any] = response.json()
            return copy
        assert response.status_code == 204, response.text
    raise AssertionError(f"no dead letter after {PEEK_ATTEMPTS * PEEK_WAIT_MS} ms")
