"""Peek and receive by lookup ID (first/last/{id}/next/previous), message ID, correlation ID."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest

from tests.integration.support import (
    assert_problem,
    bodies,
    create_queue,
    json_of,
    send,
)

pytestmark = pytest.mark.anyio

QUEUE = "private$/orders"
BASE = f"/api/queues/{QUEUE}/messages"


@pytest.fixture
async def sent(client: httpx.AsyncClient) -> dict[str, dict[str, Any]]:
    """Four messages in queue order: high (p5), a, b, c (p3)."""
    await create_queue(client, QUEUE)
    result = {}
    for body, priority in (("a", 3), ("high", 5), ("b", 3), ("c", 3)):
        result[body] = await send(client, QUEUE, body, priority=priority)
    return result


async def body_at(client: httpx.AsyncClient, method: str, url: str, **params: Any) -> str:
    message: dict[str, Any] = json_of(await client.request(method, url, params=params))
    body: str = message["body"]
    return body


async def test_peek_first_last_current_next_previous(
    client: httpx.AsyncClient, sent: dict[str, dict[str, Any]]
) -> None:
    b = sent["b"]["lookup_id"]
    assert await body_at(client, "GET", f"{BASE}/first") == "high"
    assert await body_at(client, "GET", f"{BASE}/last") == "c"
    assert await body_at(client, "GET", f"{BASE}/{b}") == "b"
    assert await body_at(client, "GET", f"{BASE}/{b}/next") == "c"
    assert await body_at(client, "GET", f"{BASE}/{b}/previous") == "a"
    a = sent["a"]["lookup_id"]
    assert await body_at(client, "GET", f"{BASE}/{a}/previous") == "high"
    assert await bodies(client, QUEUE) == ["high", "a", "b", "c"]


async def test_lookup_ids_are_decimal_strings_in_queue_order(
    client: httpx.AsyncClient, sent: dict[str, dict[str, Any]]
) -> None:
    ids = [int(sent[body]["lookup_id"]) for body in ("high", "a", "b", "c")]
    assert ids == sorted(ids)
    assert all(isinstance(sent[body]["lookup_id"], str) for body in sent)
    assert ids[-1] > 2**53  # beyond JavaScript's safe integers: hence strings


async def test_nothing_beyond_the_ends_is_404_message_not_found(
    client: httpx.AsyncClient, sent: dict[str, dict[str, Any]]
) -> None:
    high, c = sent["high"]["lookup_id"], sent["c"]["lookup_id"]
    assert_problem(await client.get(f"{BASE}/{high}/previous"), 404, "MQ_ERROR_MESSAGE_NOT_FOUND")
    assert_problem(await client.get(f"{BASE}/{c}/next"), 404, "MQ_ERROR_MESSAGE_NOT_FOUND")
    assert_problem(await client.post(f"{BASE}/{c}/next/receive"), 404, "MQ_ERROR_MESSAGE_NOT_FOUND")
    assert_problem(await client.get(f"{BASE}/12345"), 404, "MQ_ERROR_MESSAGE_NOT_FOUND")
    assert_problem(await client.post(f"{BASE}/12345/receive"), 404, "MQ_ERROR_MESSAGE_NOT_FOUND")
    assert_problem(await client.get(f"{BASE}/12345/next"), 404, "MQ_ERROR_MESSAGE_NOT_FOUND")
    assert await bodies(client, QUEUE) == ["high", "a", "b", "c"]


async def test_first_and_last_of_an_empty_queue_are_404(client: httpx.AsyncClient) -> None:
    await create_queue(client, QUEUE)
    for method, suffix in (
        ("GET", "first"),
        ("GET", "last"),
        ("POST", "first/receive"),
        ("POST", "last/receive"),
    ):
        response = await client.request(method, f"{BASE}/{suffix}")
        assert_problem(response, 404, "MQ_ERROR_MESSAGE_NOT_FOUND")


async def test_receive_by_lookup_id_removes_exactly_that_message(
    client: httpx.AsyncClient, sent: dict[str, dict[str, Any]]
) -> None:
    b = sent["b"]["lookup_id"]
    assert await body_at(client, "POST", f"{BASE}/{b}/receive") == "b"
    assert await bodies(client, QUEUE) == ["high", "a", "c"]
    assert_problem(await client.get(f"{BASE}/{b}"), 404, "MQ_ERROR_MESSAGE_NOT_FOUND")
    assert_problem(await client.post(f"{BASE}/{b}/receive"), 404, "MQ_ERROR_MESSAGE_NOT_FOUND")
    # A removed reference has no neighbours any more (the reference position must exist).
    assert_problem(await client.get(f"{BASE}/{b}/next"), 404, "MQ_ERROR_MESSAGE_NOT_FOUND")


async def test_receive_first_last_next_previous(
    client: httpx.AsyncClient, sent: dict[str, dict[str, Any]]
) -> None:
    a, c = sent["a"]["lookup_id"], sent["c"]["lookup_id"]
    assert await body_at(client, "POST", f"{BASE}/{a}/next/receive") == "b"
    assert await body_at(client, "POST", f"{BASE}/{c}/previous/receive") == "a"
    assert await body_at(client, "POST", f"{BASE}/last/receive") == "c"
    assert await body_at(client, "POST", f"{BASE}/first/receive") == "high"
    assert await bodies(client, QUEUE) == []


async def test_a_bad_lookup_id_is_400(client: httpx.AsyncClient, sent: dict[str, dict[str, Any]]) -> None:
    for text in ("abc", "-1", "1.5", str(1 << 64), "0x10"):
        for method, suffix in (("GET", ""), ("GET", "/next"), ("GET", "/previous"), ("POST", "/receive")):
            response = await client.request(method, f"{BASE}/{text}{suffix}")
            assert_problem(response, 400, "MQ_ERROR_INVALID_PARAMETER")
    assert await bodies(client, QUEUE) == ["high", "a", "b", "c"]


async def test_lookup_on_an_unknown_queue_is_404_queue_not_found(client: httpx.AsyncClient) -> None:
    for method, suffix in (("GET", "first"), ("GET", "5/next"), ("POST", "5/receive"), ("GET", "by-id")):
        response = await client.request(
            method, f"/api/queues/private$/missing/messages/{suffix}", params={"message_id": "{x}\\1"}
        )
        assert_problem(response, 404, "MQ_ERROR_QUEUE_NOT_FOUND")


async def test_lookup_answers_raw_bodies_on_request(
    client: httpx.AsyncClient, sent: dict[str, dict[str, Any]]
) -> None:
    response = await client.get(f"{BASE}/last", headers={"accept": "application/octet-stream"})
    assert (response.status_code, response.content) == (200, b"c")
    assert response.headers["x-msmq-lookup-id"] == sent["c"]["lookup_id"]


async def test_peek_and_receive_by_message_id(
    client: httpx.AsyncClient, sent: dict[str, dict[str, Any]]
) -> None:
    message_id = sent["b"]["message_id"]
    peeked = json_of(await client.get(f"{BASE}/by-id", params={"message_id": message_id}))
    assert (peeked["body"], peeked["message_id"]) == ("b", message_id)
    received = json_of(await client.post(f"{BASE}/by-id/receive", params={"message_id": message_id}))
    assert received["lookup_id"] == sent["b"]["lookup_id"]
    assert await bodies(client, QUEUE) == ["high", "a", "c"]
    for method, url in (("GET", f"{BASE}/by-id"), ("POST", f"{BASE}/by-id/receive")):
        response = await client.request(method, url, params={"message_id": message_id})
        assert_problem(response, 404, "MQ_ERROR_MESSAGE_NOT_FOUND")
    assert_problem(await client.get(f"{BASE}/by-id"), 400, "MQ_ERROR_INVALID_PARAMETER")


async def test_peek_and_receive_by_correlation_id(client: httpx.AsyncClient) -> None:
    await create_queue(client, QUEUE)
    wanted = base64.b64encode(b"w" * 20).decode()
    other = base64.b64encode(b"o" * 20).decode()
    await send(client, QUEUE, "unrelated", correlation_id=other)
    await send(client, QUEUE, "reply 1", correlation_id=wanted)
    await send(client, QUEUE, "reply 2", correlation_id=wanted)
    peeked = json_of(await client.get(f"{BASE}/by-correlation-id", params={"correlation_id": wanted}))
    assert (peeked["body"], peeked["correlation_id"]) == ("reply 1", wanted)
    for expected in ("reply 1", "reply 2"):
        received = await client.post(f"{BASE}/by-correlation-id/receive", params={"correlation_id": wanted})
        assert json_of(received)["body"] == expected
    for method, url in (("GET", f"{BASE}/by-correlation-id"), ("POST", f"{BASE}/by-correlation-id/receive")):
        response = await client.request(method, url, params={"correlation_id": wanted})
        assert_problem(response, 404, "MQ_ERROR_MESSAGE_NOT_FOUND")
        bad = await client.request(method, url, params={"correlation_id": "not base64!"})
        assert_problem(bad, 400, "MQ_ERROR_INVALID_PARAMETER")
    assert await bodies(client, QUEUE) == ["unrelated"]
