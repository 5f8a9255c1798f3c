"""Receive, peek and browse on /api/queues/{path}: order, waits, raw responses, timers."""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import unquote

import anyio
import httpx
import pytest
from fastapi import FastAPI

from qm.clock import SettableClock
from tests.integration.support import (
    MAX_WAIT_MS,
    WAIT_LIMIT_S,
    assert_problem,
    bodies,
    create_queue,
    json_of,
    message_count,
    observe_wakeups,
    peek,
    receive,
    send,
)

pytestmark = pytest.mark.anyio

QUEUE = "private$/orders"


@pytest.fixture
async def queue(client: httpx.AsyncClient) -> str:
    await create_queue(client, QUEUE)
    return QUEUE


async def test_receive_takes_messages_in_priority_then_arrival_order(
    client: httpx.AsyncClient, queue: str
) -> None:
    for body, priority in (("low", 1), ("high-1", 6), ("mid", 3), ("high-2", 6), ("top", 7), ("bottom", 0)):
        await send(client, queue, body, priority=priority)
    received = []
    while (message := await receive(client, queue)) is not None:
        received.append(message["body"])
    assert received == ["top", "high-1", "high-2", "mid", "low", "bottom"]
    assert await message_count(client, queue) == 0


async def test_peek_returns_the_first_message_and_leaves_it(client: httpx.AsyncClient, queue: str) -> None:
    await send(client, queue, "first", priority=3)
    await send(client, queue, "urgent", priority=5)
    peeked = await peek(client, queue)
    assert peeked is not None and peeked["body"] == "urgent"
    again = await peek(client, queue)
    assert again is not None and again["lookup_id"] == peeked["lookup_id"]
    assert await message_count(client, queue) == 2
    received = await receive(client, queue)
    assert received is not None and received["lookup_id"] == peeked["lookup_id"]


async def test_an_empty_queue_answers_204_at_once_or_after_the_timeout(
    client: httpx.AsyncClient, queue: str
) -> None:
    for params in ({}, {"timeout_ms": 0}, {"timeout_ms": 20}):
        receive_response = await client.post(f"/api/queues/{queue}/receive", params=params)
        assert (receive_response.status_code, receive_response.content) == (204, b"")
        peek_response = await client.get(f"/api/queues/{queue}/peek", params=params)
        assert (peek_response.status_code, peek_response.content) == (204, b"")


async def test_a_timeout_above_max_wait_ms_is_400(client: httpx.AsyncClient, queue: str) -> None:
    too_long = {"timeout_ms": MAX_WAIT_MS + 1}
    problem = assert_problem(
        await client.post(f"/api/queues/{queue}/receive", params=too_long), 400, "MQ_ERROR_INVALID_PARAMETER"
    )
    assert "MSMQGW_MAX_WAIT_MS" in problem["detail"]
    assert_problem(
        await client.get(f"/api/queues/{queue}/peek", params=too_long), 400, "MQ_ERROR_INVALID_PARAMETER"
    )
    for bad in ("-1", "soon"):
        response = await client.post(f"/api/queues/{queue}/receive", params={"timeout_ms": bad})
        assert_problem(response, 400, "MQ_ERROR_INVALID_PARAMETER")


async def test_the_timeout_is_checked_before_anything_is_taken(client: httpx.AsyncClient, queue: str) -> None:
    await send(client, queue, "kept")
    response = await client.post(f"/api/queues/{queue}/receive", params={"timeout_ms": MAX_WAIT_MS + 1})
    assert_problem(response, 400, "MQ_ERROR_INVALID_PARAMETER")
    assert await bodies(client, queue) == ["kept"]


async def test_receive_and_peek_on_an_unknown_queue_are_404(client: httpx.AsyncClient) -> None:
    assert_problem(await client.post("/api/queues/private$/missing/receive"), 404, "MQ_ERROR_QUEUE_NOT_FOUND")
    assert_problem(await client.get("/api/queues/private$/missing/peek"), 404, "MQ_ERROR_QUEUE_NOT_FOUND")


async def test_a_waiting_receive_is_woken_by_a_concurrent_send(
    app: FastAPI, client: httpx.AsyncClient, queue: str
) -> None:
    wakeups = observe_wakeups(app)
    responses: list[httpx.Response] = []

    async def receive_waiting() -> None:
        responses.append(
            await client.post(f"/api/queues/{queue}/receive", params={"timeout_ms": MAX_WAIT_MS})
        )

    # The wake-up poll is an hour and the wait 30 s: only the send's signal ends it in time.
    with anyio.fail_after(WAIT_LIMIT_S):
        async with anyio.create_task_group() as group:
            group.start_soon(receive_waiting)
            await wakeups.until_waiting(1)
            sent = await send(client, queue, "wake up")
    [response] = responses
    message = json_of(response)
    assert (message["body"], message["lookup_id"]) == ("wake up", sent["lookup_id"])
    assert await message_count(client, queue) == 0


async def test_one_send_wakes_one_of_two_waiting_receives_and_the_other_keeps_waiting(
    app: FastAPI, client: httpx.AsyncClient, queue: str
) -> None:
    wakeups = observe_wakeups(app)
    received: list[str] = []
    first_done = anyio.Event()

    async def receive_waiting() -> None:
        response = await client.post(f"/api/queues/{queue}/receive", params={"timeout_ms": MAX_WAIT_MS})
        received.append(json_of(response)["body"])
        first_done.set()

    with anyio.fail_after(WAIT_LIMIT_S):
        async with anyio.create_task_group() as group:
            group.start_soon(receive_waiting)
            group.start_soon(receive_waiting)
            await wakeups.until_waiting(2)
            await send(client, queue, "one")
            await first_done.wait()
            assert received == ["one"]
            await wakeups.until_waiting(1)  # the other one waits on
            await send(client, queue, "two")
    assert received == ["one", "two"]
    assert await message_count(client, queue) == 0


async def test_a_waiting_peek_is_woken_by_a_send_and_leaves_the_message(
    app: FastAPI, client: httpx.AsyncClient, queue: str
) -> None:
    wakeups = observe_wakeups(app)
    responses: list[httpx.Response] = []

    async def peek_waiting() -> None:
        responses.append(await client.get(f"/api/queues/{queue}/peek", params={"timeout_ms": MAX_WAIT_MS}))

    with anyio.fail_after(WAIT_LIMIT_S):
        async with anyio.create_task_group() as group:
            group.start_soon(peek_waiting)
            await wakeups.until_waiting(1)
            await send(client, queue, "seen")
    assert json_of(responses[0])["body"] == "seen"
    assert await message_count(client, queue) == 1


def _header_values(response: httpx.Response) -> dict[str, str]:
    return {
        name.lower(): unquote(value)
        for name, value in response.headers.items()
        if name.lower().startswith("x-msmq-")
    }


async def test_accept_octet_stream_returns_the_raw_body_with_x_msmq_headers(
    client: httpx.AsyncClient, queue: str
) -> None:
    payload = b"\x00raw\xff body"
    correlation = base64.b64encode(b"c" * 20).decode()
    sent = json_of(
        await client.post(
            f"/api/queues/{queue}/messages",
            json={
                "body_base64": base64.b64encode(payload).decode(),
                "label": "café / 50% off",
                "priority": 4,
                "correlation_id": correlation,
                "app_specific": 9,
            },
        ),
        201,
    )
    raw = {"accept": "application/octet-stream"}
    peeked = await client.get(f"/api/queues/{queue}/peek", headers=raw)
    response = await client.post(f"/api/queues/{queue}/receive", headers=raw)
    for answer in (peeked, response):
        assert answer.status_code == 200
        assert answer.headers["content-type"] == "application/octet-stream"
        assert answer.content == payload
    headers = _header_values(response)
    assert headers["x-msmq-lookup-id"] == sent["lookup_id"]
    assert headers["x-msmq-message-id"] == sent["message_id"]
    assert headers["x-msmq-label"] == "café / 50% off"
    assert headers["x-msmq-priority"] == "4"
    assert headers["x-msmq-correlation-id"] == correlation
    assert headers["x-msmq-app-specific"] == "9"
    assert headers["x-msmq-body-size"] == str(len(payload))
    assert headers["x-msmq-queue"] == queue
    assert headers["x-msmq-first-in-transaction"] == "false"
    assert "x-msmq-body" not in headers and "x-msmq-lock-tag" not in headers
    assert await message_count(client, queue) == 0


async def test_a_raw_response_round_trips_into_a_raw_send(client: httpx.AsyncClient, queue: str) -> None:
    await send(client, queue, "forward me", label="a;b=c d", priority=2, app_specific=5)
    first = await client.post(f"/api/queues/{queue}/receive", headers={"accept": "application/octet-stream"})
    forwarded = {
        name: first.headers[name] for name in ("x-msmq-label", "x-msmq-priority", "x-msmq-app-specific")
    }
    json_of(await client.post(f"/api/queues/{queue}/messages", content=first.content, headers=forwarded), 201)
    message = await receive(client, queue)
    assert message is not None
    assert (message["body"], message["label"], message["priority"], message["app_specific"]) == (
        "forward me",
        "a;b=c d",
        2,
        5,
    )


async def test_json_wins_when_both_media_types_are_accepted(client: httpx.AsyncClient, queue: str) -> None:
    await send(client, queue, "json please")
    response = await client.post(
        f"/api/queues/{queue}/receive", headers={"accept": "application/json, application/octet-stream"}
    )
    assert json_of(response)["body"] == "json please"


async def test_an_empty_queue_answers_204_to_a_raw_receive_too(client: httpx.AsyncClient, queue: str) -> None:
    response = await client.post(
        f"/api/queues/{queue}/receive", headers={"accept": "application/octet-stream"}
    )
    assert (response.status_code, response.content) == (204, b"")


async def test_browse_pages_through_available_messages_by_lookup_id(
    client: httpx.AsyncClient, queue: str
) -> None:
    for index, priority in enumerate((3, 5, 3, 1, 5)):
        await send(client, queue, f"m{index}", priority=priority)
    first = json_of(await client.get(f"/api/queues/{queue}/messages", params={"limit": 2}))
    assert [message["body"] for message in first["messages"]] == ["m1", "m4"]
    assert first["next_after"] == first["messages"][-1]["lookup_id"]
    second = json_of(
        await client.get(f"/api/queues/{queue}/messages", params={"limit": 2, "after": first["next_after"]})
    )
    assert [message["body"] for message in second["messages"]] == ["m0", "m2"]
    third = json_of(
        await client.get(f"/api/queues/{queue}/messages", params={"limit": 2, "after": second["next_after"]})
    )
    assert [message["body"] for message in third["messages"]] == ["m3"]
    assert third["next_after"] is None
    assert await message_count(client, queue) == 5


async def test_browse_rejects_bad_parameters(client: httpx.AsyncClient, queue: str) -> None:
    for params in ({"after": "x"}, {"after": "-1"}, {"after": str(1 << 64)}, {"limit": 0}, {"limit": 1001}):
        response = await client.get(f"/api/queues/{queue}/messages", params=params)
        assert_problem(response, 400, "MQ_ERROR_INVALID_PARAMETER")


async def test_receive_reports_the_remaining_time_to_be_received_and_never_an_expired_message(
    client: httpx.AsyncClient, clock: SettableClock, queue: str
) -> None:
    await send(client, queue, "short-lived", time_to_be_received=10, priority=5)
    await send(client, queue, "long-lived")
    clock.advance(4)
    peeked = await peek(client, queue)
    assert peeked is not None and peeked["time_to_be_received"] == 6
    clock.advance(7)
    assert await bodies(client, queue) == ["long-lived"]
    message: dict[str, Any] | None = await receive(client, queue)
    assert message is not None and message["body"] == "long-lived"
    assert message["time_to_be_received"] == 4294967295
    assert await receive(client, queue) is None
