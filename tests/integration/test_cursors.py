"""/api/cursors: open, show, peek current/next, receive, close (reference §7.5)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.integration.support import (
    assert_problem,
    bodies,
    create_queue,
    json_of,
    receive,
    send,
)

pytestmark = pytest.mark.anyio

QUEUE = "private$/orders"


@pytest.fixture
async def queue(client: httpx.AsyncClient) -> str:
    await create_queue(client, QUEUE)
    for body in ("a", "b", "c"):
        await send(client, QUEUE, body)
    return QUEUE


async def open_cursor(client: httpx.AsyncClient, queue: str = QUEUE) -> dict[str, Any]:
    cursor: dict[str, Any] = json_of(await client.post("/api/cursors", json={"queue": queue}), 201)
    return cursor


async def body_of(response: httpx.Response) -> str:
    body: str = json_of(response)["body"]
    return body


async def test_open_gives_an_unpositioned_cursor(client: httpx.AsyncClient, queue: str) -> None:
    cursor = await open_cursor(client, "PRIVATE$\\Orders")
    assert (cursor["state"], cursor["lookup_id"]) == ("unpositioned", None)
    assert json_of(await client.get(f"/api/cursors/{cursor['id']}")) == cursor


async def test_current_then_next_walk_the_queue_without_removing(
    client: httpx.AsyncClient, queue: str
) -> None:
    cursor = (await open_cursor(client))["id"]
    current = json_of(await client.get(f"/api/cursors/{cursor}/current"))
    assert current["body"] == "a"
    shown = json_of(await client.get(f"/api/cursors/{cursor}"))
    assert (shown["state"], shown["lookup_id"]) == ("on-message", current["lookup_id"])
    assert await body_of(await client.get(f"/api/cursors/{cursor}/current")) == "a"
    assert await body_of(await client.get(f"/api/cursors/{cursor}/next")) == "b"
    assert await body_of(await client.get(f"/api/cursors/{cursor}/next")) == "c"
    at_end = await client.get(f"/api/cursors/{cursor}/next")
    assert (at_end.status_code, at_end.content) == (204, b"")
    assert await bodies(client, QUEUE) == ["a", "b", "c"]


async def test_receive_takes_the_current_message_and_moves_on(client: httpx.AsyncClient, queue: str) -> None:
    cursor = (await open_cursor(client))["id"]
    assert await body_of(await client.get(f"/api/cursors/{cursor}/current")) == "a"
    assert await body_of(await client.get(f"/api/cursors/{cursor}/next")) == "b"
    assert await body_of(await client.post(f"/api/cursors/{cursor}/receive")) == "b"
    assert await body_of(await client.get(f"/api/cursors/{cursor}/current")) == "c"
    assert await bodies(client, QUEUE) == ["a", "c"]


async def test_receive_on_an_unpositioned_cursor_takes_the_first(
    client: httpx.AsyncClient, queue: str
) -> None:
    cursor = (await open_cursor(client))["id"]
    assert await body_of(await client.post(f"/api/cursors/{cursor}/receive")) == "a"
    assert await bodies(client, QUEUE) == ["b", "c"]


async def test_cursor_reads_answer_raw_bodies_on_request(client: httpx.AsyncClient, queue: str) -> None:
    cursor = (await open_cursor(client))["id"]
    raw = {"accept": "application/octet-stream"}
    response = await client.get(f"/api/cursors/{cursor}/current", headers=raw)
    assert (response.status_code, response.content) == (200, b"a")
    assert response.headers["x-msmq-queue"] == QUEUE


async def test_next_on_an_unpositioned_cursor_is_409_illegal_cursor_action(
    client: httpx.AsyncClient, queue: str
) -> None:
    cursor = (await open_cursor(client))["id"]
    assert_problem(await client.get(f"/api/cursors/{cursor}/next"), 409, "MQ_ERROR_ILLEGAL_CURSOR_ACTION")


async def test_a_message_received_elsewhere_is_410_under_the_cursor(
    client: httpx.AsyncClient, queue: str
) -> None:
    cursor = (await open_cursor(client))["id"]
    assert await body_of(await client.get(f"/api/cursors/{cursor}/current")) == "a"
    taken = await receive(client, QUEUE)
    assert taken is not None and taken["body"] == "a"
    assert_problem(
        await client.get(f"/api/cursors/{cursor}/current"), 410, "MQ_ERROR_MESSAGE_ALREADY_RECEIVED"
    )
    assert_problem(
        await client.post(f"/api/cursors/{cursor}/receive"), 410, "MQ_ERROR_MESSAGE_ALREADY_RECEIVED"
    )
    assert await body_of(await client.get(f"/api/cursors/{cursor}/next")) == "b"


async def test_an_empty_queue_answers_204_through_a_cursor(client: httpx.AsyncClient) -> None:
    await create_queue(client, "private$/empty")
    cursor = (await open_cursor(client, "private$/empty"))["id"]
    for method, action in (("GET", "current"), ("POST", "receive")):
        response = await client.request(method, f"/api/cursors/{cursor}/{action}", params={"timeout_ms": 10})
        assert (response.status_code, response.content) == (204, b"")


async def test_close_then_every_use_is_404_invalid_handle(client: httpx.AsyncClient, queue: str) -> None:
    cursor = (await open_cursor(client))["id"]
    response = await client.delete(f"/api/cursors/{cursor}")
    assert (response.status_code, response.content) == (204, b"")
    for method, suffix in (
        ("GET", ""),
        ("DELETE", ""),
        ("GET", "/current"),
        ("GET", "/next"),
        ("POST", "/receive"),
    ):
        gone = await client.request(method, f"/api/cursors/{cursor}{suffix}")
        assert_problem(gone, 404, "MQ_ERROR_INVALID_HANDLE")
    assert await bodies(client, QUEUE) == ["a", "b", "c"]


async def test_an_unknown_cursor_is_404_invalid_handle(client: httpx.AsyncClient) -> None:
    for method, suffix in (("GET", ""), ("DELETE", ""), ("GET", "/current"), ("POST", "/receive")):
        response = await client.request(method, f"/api/cursors/nope{suffix}")
        assert_problem(response, 404, "MQ_ERROR_INVALID_HANDLE")


async def test_opening_a_cursor_needs_an_existing_queue(client: httpx.AsyncClient) -> None:
    response = await client.post("/api/cursors", json={"queue": "private$/missing"})
    assert_problem(response, 404, "MQ_ERROR_QUEUE_NOT_FOUND")
    assert_problem(await client.post("/api/cursors", json={}), 400, "MQ_ERROR_INVALID_PARAMETER")
    illegal = await client.post("/api/cursors", json={"queue": "private$/a;b"})
    assert_problem(illegal, 400, "MQ_ERROR_ILLEGAL_QUEUE_PATHNAME")


async def test_a_cursor_wait_is_capped_like_a_receive(client: httpx.AsyncClient, queue: str) -> None:
    cursor = (await open_cursor(client))["id"]
    response = await client.get(f"/api/cursors/{cursor}/current", params={"timeout_ms": 10**9})
    assert_problem(response, 400, "MQ_ERROR_INVALID_PARAMETER")
