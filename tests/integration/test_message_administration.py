"""Single-message administration over REST, on both stores: delete by lookup ID, move to another
queue in one transaction, resend dead letters, export to JSON lines and import them."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.gateway import Gateway
from app.settings import Settings
from qm.clock import SettableClock
from tests.integration.support import (
    MAX_BODY_BYTES,
    assert_problem,
    bodies,
    create_queue,
    json_of,
    message_count,
    observe_wakeups,
    send,
)

pytestmark = pytest.mark.anyio

ORDERS = "private$/orders"
TARGET = "private$/target"
DEADLETTER = "system$;deadletter"
MAX_IMPORT_BYTES = 64 * 1024
NDJSON = {"Content-Type": "application/x-ndjson"}


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """A small import cap, so that a file over it is cheap to build."""
    return settings.model_copy(update={"max_import_bytes": MAX_IMPORT_BYTES})


def messages_url(path: str, rest: str = "") -> str:
    return f"/api/queues/{path}/messages{rest}"


async def sent_three(client: httpx.AsyncClient, **settings: Any) -> dict[str, dict[str, Any]]:
    await create_queue(client, ORDERS, **settings)
    transaction = "single" if settings.get("transactional") else None
    return {body: await send(client, ORDERS, body, transaction) for body in ("a", "b", "c")}


async def totals(client: httpx.AsyncClient, path: str) -> tuple[int, int]:
    queue = json_of(await client.get(f"/api/queues/{path}"))
    return queue["message_count"], queue["byte_count"]


# -- delete ---------------------------------------------------------------------------


async def test_delete_removes_one_message_as_a_receive_would(client: httpx.AsyncClient) -> None:
    await create_queue(client, "private$/acks")
    await create_queue(client, ORDERS, journal=True)
    admin = "DIRECT=OS:.\\private$\\acks"  # a positive receive acknowledgment there
    sent = {body: await send(client, ORDERS, body, admin_queue=admin, acknowledge=2) for body in "abc"}
    response = await client.delete(messages_url(ORDERS, f"/{sent['b']['lookup_id']}"))
    assert response.status_code == 204, response.text
    assert await bodies(client, ORDERS) == ["a", "c"]
    assert await totals(client, ORDERS) == (2, 2)
    assert await bodies(client, f"{ORDERS};journal") == ["b"]
    acks = json_of(await client.get(messages_url("private$/acks")))["messages"]
    assert [m["message_class_name"] for m in acks] == ["MQMSG_CLASS_ACK_RECEIVE"]
    again = await client.delete(messages_url(ORDERS, f"/{sent['b']['lookup_id']}"))
    assert_problem(again, 404, "MQ_ERROR_MESSAGE_NOT_FOUND")


async def test_delete_refuses_a_locked_message_and_a_bad_lookup_id(client: httpx.AsyncClient) -> None:
    sent = await sent_three(client)
    locked = json_of(await client.post(f"/api/queues/{ORDERS}/receive", params={"two_phase": "true"}))
    assert locked["body"] == "a"
    response = await client.delete(messages_url(ORDERS, f"/{sent['a']['lookup_id']}"))
    assert_problem(response, 409, "MQ_ERROR_MESSAGE_LOCKED_UNDER_TRANSACTION")
    assert_problem(await client.delete(messages_url(ORDERS, "/x1")), 400, "MQ_ERROR_INVALID_PARAMETER")
    assert await message_count(client, ORDERS) == 3


# -- move -----------------------------------------------------------------------------


async def test_move_keeps_message_ids_and_properties_and_changes_both_totals(
    client: httpx.AsyncClient,
) -> None:
    sent = await sent_three(client)
    await create_queue(client, TARGET)
    chosen = [sent["c"]["lookup_id"], sent["a"]["lookup_id"]]
    answer = json_of(
        await client.post(messages_url(ORDERS, "/move"), json={"lookup_ids": chosen, "to": TARGET})
    )
    assert answer["queue"] == TARGET
    assert [item["lookup_id"] for item in answer["moved"]] == [sent["a"]["lookup_id"], sent["c"]["lookup_id"]]
    assert [item["message_id"] for item in answer["moved"]] == [
        sent["a"]["message_id"],
        sent["c"]["message_id"],
    ]
    assert await bodies(client, ORDERS) == ["b"]
    assert await bodies(client, TARGET) == ["a", "c"]
    assert await totals(client, ORDERS) == (1, 1)
    assert await totals(client, TARGET) == (2, 2)
    moved = json_of(await client.get(messages_url(TARGET, f"/{answer['moved'][0]['new_lookup_id']}")))
    assert moved["message_id"] == sent["a"]["message_id"]
    assert moved["queue"] == TARGET
    assert moved["message_class"] == 0
    missing = await client.get(messages_url(ORDERS, f"/{sent['a']['lookup_id']}"))
    assert_problem(missing, 404, "MQ_ERROR_MESSAGE_NOT_FOUND")
    assert await bodies(client, f"{ORDERS};journal") == []  # a move is no receive


async def test_move_is_all_or_nothing(client: httpx.AsyncClient) -> None:
    sent = await sent_three(client)
    await create_queue(client, TARGET)
    chosen = [sent["a"]["lookup_id"], "72057594037927999"]
    response = await client.post(messages_url(ORDERS, "/move"), json={"lookup_ids": chosen, "to": TARGET})
    assert_problem(response, 404, "MQ_ERROR_MESSAGE_NOT_FOUND")
    await client.post(f"/api/queues/{ORDERS}/receive", params={"two_phase": "true"})  # locks a
    chosen = [sent["b"]["lookup_id"], sent["a"]["lookup_id"]]
    response = await client.post(messages_url(ORDERS, "/move"), json={"lookup_ids": chosen, "to": TARGET})
    assert_problem(response, 409, "MQ_ERROR_MESSAGE_LOCKED_UNDER_TRANSACTION")
    assert await bodies(client, ORDERS) == ["b", "c"]
    assert await totals(client, ORDERS) == (3, 3)
    assert await totals(client, TARGET) == (0, 0)


async def test_move_refuses_a_transactional_mismatch_a_full_target_and_read_only_queues(
    client: httpx.AsyncClient,
) -> None:
    sent = await sent_three(client)
    one = {"lookup_ids": [sent["a"]["lookup_id"], sent["b"]["lookup_id"]]}
    await create_queue(client, "private$/xact", transactional=True)
    response = await client.post(messages_url(ORDERS, "/move"), json=one | {"to": "private$/xact"})
    assert_problem(response, 409, "MQ_ERROR_TRANSACTION_USAGE")
    await create_queue(client, "private$/small", quota_kb=1)
    await send(client, "private$/small", "x" * 1023)
    response = await client.post(messages_url(ORDERS, "/move"), json=one | {"to": "private$/small"})
    assert_problem(response, 507, "MQ_ERROR_INSUFFICIENT_RESOURCES")
    for read_only in (f"{ORDERS};journal", DEADLETTER):
        response = await client.post(messages_url(ORDERS, "/move"), json=one | {"to": read_only})
        assert_problem(response, 403, "MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION")
    response = await client.post(messages_url(ORDERS, "/move"), json=one | {"to": ORDERS})
    assert_problem(response, 400, "MQ_ERROR_INVALID_PARAMETER")
    twice = {"lookup_ids": [sent["a"]["lookup_id"]] * 2, "to": TARGET}
    assert_problem(
        await client.post(messages_url(ORDERS, "/move"), json=twice), 400, "MQ_ERROR_INVALID_PARAMETER"
    )
    none = {"lookup_ids": [], "to": TARGET}
    assert_problem(
        await client.post(messages_url(ORDERS, "/move"), json=none), 400, "MQ_ERROR_INVALID_PARAMETER"
    )
    assert await bodies(client, ORDERS) == ["a", "b", "c"]


async def test_move_between_transactional_queues(client: httpx.AsyncClient) -> None:
    sent = await sent_three(client, transactional=True)
    await create_queue(client, TARGET, transactional=True)
    chosen = {"lookup_ids": [sent["b"]["lookup_id"]], "to": TARGET}
    json_of(await client.post(messages_url(ORDERS, "/move"), json=chosen))
    taken = json_of(await client.post(f"/api/queues/{TARGET}/receive", params={"transaction": "single"}))
    assert taken["body"] == "b"
    assert taken["message_id"] == sent["b"]["message_id"]


async def test_a_move_wakes_a_receiver_waiting_on_the_target(client: httpx.AsyncClient, app: FastAPI) -> None:
    sent = await sent_three(client)
    await create_queue(client, TARGET)
    wakeups = observe_wakeups(app)
    waiting = asyncio.create_task(client.post(f"/api/queues/{TARGET}/receive", params={"timeout_ms": 20000}))
    await wakeups.until_waiting()  # blocked on the empty queue: only a wake-up brings the message
    chosen = {"lookup_ids": [sent["c"]["lookup_id"]], "to": TARGET}
    json_of(await client.post(messages_url(ORDERS, "/move"), json=chosen))
    assert json_of(await asyncio.wait_for(waiting, 10))["body"] == "c"


# -- resend ---------------------------------------------------------------------------


async def dead_letters(client: httpx.AsyncClient, app: FastAPI, clock: SettableClock) -> list[dict[str, Any]]:
    """Two messages of ORDERS expired into the dead-letter queue (journal 1, TTBR 5 s)."""
    await create_queue(client, ORDERS)
    for body in ("x", "y"):
        await send(client, ORDERS, body, journal=1, time_to_be_received=5)
    gateway: Gateway = app.state.gateway
    clock.advance(10)
    await gateway.manager.expire_due()
    letters: list[dict[str, Any]] = json_of(await client.get(messages_url(DEADLETTER)))["messages"]
    assert [m["body"] for m in letters] == ["x", "y"]
    return letters


async def test_resend_puts_dead_letters_back_in_their_queue_as_new_arrivals(
    client: httpx.AsyncClient, app: FastAPI, clock: SettableClock
) -> None:
    letters = await dead_letters(client, app, clock)
    answer = json_of(
        await client.post(messages_url(DEADLETTER, "/resend"), json={"lookup_ids": [letters[1]["lookup_id"]]})
    )
    assert [(item["lookup_id"], item["queue"]) for item in answer["resent"]] == [
        (letters[1]["lookup_id"], ORDERS)
    ]
    assert await bodies(client, DEADLETTER) == ["x"]
    resent = json_of(await client.get(messages_url(ORDERS)))["messages"]
    assert [(m["body"], m["message_class"], m["message_id"]) for m in resent] == [
        ("y", 0, letters[1]["message_id"])
    ]
    assert resent[0]["time_to_be_received"] == 5  # its timer starts afresh
    answer = json_of(await client.post(messages_url(DEADLETTER, "/resend"), json={"all": True}))
    assert len(answer["resent"]) == 1
    assert await bodies(client, ORDERS) == ["y", "x"]
    assert await totals(client, DEADLETTER) == (0, 0)


async def test_resend_is_all_or_nothing_and_only_from_dead_letter_queues(
    client: httpx.AsyncClient, app: FastAPI, clock: SettableClock
) -> None:
    letters = await dead_letters(client, app, clock)
    chosen = {"lookup_ids": [m["lookup_id"] for m in letters]}
    await client.delete(f"/api/queues/{ORDERS}")
    response = await client.post(messages_url(DEADLETTER, "/resend"), json=chosen)
    assert_problem(response, 404, "MQ_ERROR_QUEUE_NOT_FOUND")
    await create_queue(client, ORDERS, transactional=True)
    response = await client.post(messages_url(DEADLETTER, "/resend"), json=chosen)
    assert_problem(response, 409, "MQ_ERROR_TRANSACTION_USAGE")
    assert await bodies(client, DEADLETTER) == ["x", "y"]
    response = await client.post(messages_url(ORDERS, "/resend"), json={"all": True})
    assert_problem(response, 400, "MQ_ERROR_INVALID_PARAMETER")
    both = {"all": True, "lookup_ids": chosen["lookup_ids"]}
    assert_problem(
        await client.post(messages_url(DEADLETTER, "/resend"), json=both), 400, "MQ_ERROR_INVALID_PARAMETER"
    )


# -- export and import ----------------------------------------------------------------


def lines_of(response: httpx.Response) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("application/x-ndjson")
    return [json.loads(line) for line in response.text.splitlines()]


async def test_export_writes_json_lines_with_base64_bodies_and_import_restores_them(
    client: httpx.AsyncClient,
) -> None:
    await create_queue(client, ORDERS)
    binary = base64.b64encode(bytes(range(256))).decode()
    await send(client, ORDERS, "a", label="first", priority=5)
    await client.post(messages_url(ORDERS), json={"body_base64": binary, "label": "binary"})
    exported = lines_of(await client.get(messages_url(ORDERS, "/export")))
    assert [line["label"] for line in exported] == ["first", "binary"]
    assert exported[1]["body_base64"] == binary
    assert "body" not in exported[0]  # base64 only: one copy of each body
    await create_queue(client, TARGET)
    payload = "".join(json.dumps(line) + "\n" for line in exported).encode()
    answer = json_of(
        await client.post(messages_url(TARGET, "/import"), content=payload, headers=NDJSON),
        201,
    )
    assert answer == {"queue": TARGET, "imported": 2}
    imported = lines_of(await client.get(messages_url(TARGET, "/export")))
    for before, after in zip(exported, imported, strict=True):
        for field in ("message_id", "label", "body_base64", "priority", "sent_time", "source_machine"):
            assert after[field] == before[field], field
    assert await totals(client, TARGET) == await totals(client, ORDERS)


async def test_export_of_a_selection_and_of_more_than_a_page(client: httpx.AsyncClient) -> None:
    await create_queue(client, ORDERS)
    sent = [await send(client, ORDERS, f"m{number}") for number in range(130)]
    everything = lines_of(await client.get(messages_url(ORDERS, "/export")))
    assert [line["lookup_id"] for line in everything] == [item["lookup_id"] for item in sent]
    chosen = [sent[7]["lookup_id"], sent[3]["lookup_id"]]
    selection = lines_of(await client.get(messages_url(ORDERS, "/export"), params={"lookup_id": chosen}))
    assert [line["lookup_id"] for line in selection] == chosen
    missing = await client.get(messages_url(ORDERS, "/export"), params={"lookup_id": ["5"]})
    assert_problem(missing, 404, "MQ_ERROR_MESSAGE_NOT_FOUND")
    assert_problem(
        await client.get(messages_url("private$/nope", "/export")), 404, "MQ_ERROR_QUEUE_NOT_FOUND"
    )


async def test_an_import_with_one_bad_line_stores_nothing(client: httpx.AsyncClient) -> None:
    await create_queue(client, ORDERS)
    good = json.dumps({"body_base64": base64.b64encode(b"ok").decode(), "label": "good"})
    cases = {
        "not json": (f"{good}\n{{oops\n{good}\n", "line 2"),
        "bad base64": (f'{good}\n{good}\n{{"body_base64": "***"}}\n', "line 3"),
        "bad priority": (f'{{"body_base64": "", "priority": 9}}\n{good}\n', "line 1"),
        "a list": (f"{good}\n[1, 2]\n", "line 2"),
        "bad message ID": ('{"body_base64": "", "message_id": "x"}\n', "line 1"),
        "no lines": ("\n\n", "no message"),
    }
    for name, (payload, where) in cases.items():
        response = await client.post(
            messages_url(ORDERS, "/import"), content=payload.encode(), headers=NDJSON
        )
        problem = assert_problem(response, 400, problem_code(name))
        assert where in problem["detail"], (name, problem)
    assert await totals(client, ORDERS) == (0, 0)


def problem_code(name: str) -> str:
    return "MQ_ERROR_ILLEGAL_PROPERTY_VALUE" if name == "bad priority" else "MQ_ERROR_INVALID_PARAMETER"


async def test_an_import_is_bounded_and_goes_to_writable_queues_only(client: httpx.AsyncClient) -> None:
    await create_queue(client, ORDERS)
    limit = MAX_IMPORT_BYTES
    line = json.dumps({"body_base64": base64.b64encode(b"z" * (MAX_BODY_BYTES // 2)).decode()}) + "\n"
    payload = (line * (limit // len(line) + 2)).encode()
    response = await client.post(messages_url(ORDERS, "/import"), content=payload, headers=NDJSON)
    assert_problem(response, 413, "MQ_ERROR_INSUFFICIENT_RESOURCES")
    response = await client.post(messages_url(DEADLETTER, "/import"), content=line.encode(), headers=NDJSON)
    assert_problem(response, 403, "MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION")
    await create_queue(client, "private$/small", quota_kb=1)
    response = await client.post(
        messages_url("private$/small", "/import"), content=(line * 4).encode(), headers=NDJSON
    )
    assert_problem(response, 507, "MQ_ERROR_INSUFFICIENT_RESOURCES")
    assert await totals(client, ORDERS) == (0, 0)
    assert await totals(client, "private$/small") == (0, 0)


# -- list filters -----------------------------------------------------------------------


async def test_the_message_list_filters_by_label_class_priority_time_and_correlation_id(
    client: httpx.AsyncClient, clock: SettableClock
) -> None:
    await create_queue(client, ORDERS)
    correlation = base64.b64encode(bytes(range(20))).decode()
    await send(client, ORDERS, "a", label="Invoice 1", priority=5)
    clock.advance(60)
    middle = clock.now().isoformat()
    await send(client, ORDERS, "b", label="order 2", message_class=1, correlation_id=correlation)
    clock.advance(60)
    await send(client, ORDERS, "c", label="invoice_3 100%", priority=5)

    async def listed(**params: Any) -> list[str]:
        page = json_of(await client.get(messages_url(ORDERS), params=params))
        return [message["body"] for message in page["messages"]]

    assert await listed(label="INVOICE") == ["a", "c"]
    assert await listed(label="_3 100%") == ["c"]  # LIKE's wildcards are matched as themselves
    assert await listed(label="%") == ["c"]
    assert await listed(message_class=1) == ["b"]
    assert await listed(priority=5) == ["a", "c"]
    assert await listed(arrived_after=middle) == ["c", "b"]  # queue order: priority first
    assert await listed(arrived_before=middle) == ["a"]
    assert await listed(correlation_id=correlation) == ["b"]
    assert await listed(priority=5, label="invoice", limit=1) == ["a"]
    page = json_of(await client.get(messages_url(ORDERS), params={"priority": 5, "limit": 1}))
    after = page["next_after"]
    assert await listed(priority=5, after=after) == ["c"]
    bad = await client.get(messages_url(ORDERS), params={"correlation_id": "abc"})
    assert_problem(bad, 400, "MQ_ERROR_INVALID_PARAMETER")
    bad = await client.get(messages_url(ORDERS), params={"arrived_after": "2026-01-01T00:00:00"})
    assert_problem(bad, 400, "MQ_ERROR_INVALID_PARAMETER")  # a time without its zone is ambiguous
