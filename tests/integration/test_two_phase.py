"""Two-phase receive (`?two_phase=true`) and its end under /api/locks/{tag}/commit|abort."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import httpx
import pytest

from qm.clock import SettableClock
from tests.integration.support import (
    assert_problem,
    bodies,
    create_queue,
    json_of,
    message_count,
    receive,
    send,
)

pytestmark = pytest.mark.anyio

QUEUE = "private$/orders"


@pytest.fixture
async def queue(client: httpx.AsyncClient) -> str:
    await create_queue(client, QUEUE)
    await send(client, QUEUE, "first")
    await send(client, QUEUE, "second")
    return QUEUE


async def lock_first(client: httpx.AsyncClient, **params: Any) -> dict[str, Any]:
    response = await client.post(f"/api/queues/{QUEUE}/receive", params={"two_phase": "true", **params})
    message: dict[str, Any] = json_of(response)
    return message


async def test_a_two_phase_receive_locks_the_message_under_a_tag(
    client: httpx.AsyncClient, clock: SettableClock, queue: str
) -> None:
    locked = await lock_first(client, lock_timeout_ms=5000)
    assert locked["body"] == "first"
    assert locked["lock_tag"].startswith(locked["lookup_id"])
    expires = datetime.fromisoformat(locked["lock_expires_at"])
    assert expires == clock.now() + timedelta(seconds=5)
    # Locked: neither received nor peeked by others, nor browsed.
    assert await bodies(client, queue) == ["second"]
    other = await receive(client, queue)
    assert other is not None and other["body"] == "second"
    assert await receive(client, queue) is None


async def test_commit_removes_the_message_and_a_second_end_is_410(
    client: httpx.AsyncClient, queue: str
) -> None:
    locked = await lock_first(client)
    commit = await client.post(f"/api/locks/{locked['lock_tag']}/commit")
    assert (commit.status_code, commit.content) == (204, b"")
    assert await bodies(client, queue) == ["second"]
    assert await message_count(client, queue) == 1
    for end in ("commit", "abort"):
        again = await client.post(f"/api/locks/{locked['lock_tag']}/{end}")
        assert_problem(again, 410, "MQ_ERROR_MESSAGE_ALREADY_RECEIVED")


async def test_abort_puts_the_message_back_in_its_place_and_a_second_end_is_409(
    client: httpx.AsyncClient, queue: str
) -> None:
    locked = await lock_first(client)
    abort = await client.post(f"/api/locks/{locked['lock_tag']}/abort")
    assert (abort.status_code, abort.content) == (204, b"")
    assert await bodies(client, queue) == ["first", "second"]
    for end in ("abort", "commit"):
        again = await client.post(f"/api/locks/{locked['lock_tag']}/{end}")
        assert_problem(again, 409, "MQ_ERROR_TRANSACTION_SEQUENCE")
    assert await message_count(client, queue) == 2
    message = await receive(client, queue)
    assert message is not None and message["body"] == "first" and message["lookup_id"] == locked["lookup_id"]


async def test_an_expired_lock_cannot_be_committed_and_the_message_is_back(
    client: httpx.AsyncClient, clock: SettableClock, queue: str
) -> None:
    locked = await lock_first(client, lock_timeout_ms=1000)
    clock.advance(1.5)
    assert_problem(
        await client.post(f"/api/locks/{locked['lock_tag']}/commit"), 409, "MQ_ERROR_TRANSACTION_SEQUENCE"
    )
    assert await bodies(client, queue) == ["first", "second"]


async def test_a_wrong_token_for_the_locked_message_does_not_end_the_lock(
    client: httpx.AsyncClient, queue: str
) -> None:
    locked = await lock_first(client)
    lookup_id, separator, token = locked["lock_tag"].partition("-")
    assert (lookup_id, separator) == (locked["lookup_id"], "-") and token
    forged = f"{lookup_id}-{'0' * len(token)}"
    for end in ("commit", "abort"):
        assert_problem(await client.post(f"/api/locks/{forged}/{end}"), 409, "MQ_ERROR_TRANSACTION_SEQUENCE")
    assert await bodies(client, queue) == ["second"]
    assert (await client.post(f"/api/locks/{locked['lock_tag']}/commit")).status_code == 204
    assert await bodies(client, queue) == ["second"]


async def test_a_malformed_lock_tag_is_404_invalid_handle(client: httpx.AsyncClient, queue: str) -> None:
    for tag in ("garbage", "12", "x-y", "-abc"):
        for end in ("commit", "abort"):
            assert_problem(await client.post(f"/api/locks/{tag}/{end}"), 404, "MQ_ERROR_INVALID_HANDLE")


async def test_a_two_phase_receive_of_an_empty_queue_is_204(client: httpx.AsyncClient) -> None:
    await create_queue(client, "private$/empty")
    response = await client.post("/api/queues/private$/empty/receive", params={"two_phase": "true"})
    assert (response.status_code, response.content) == (204, b"")


async def test_bad_two_phase_parameters_are_400(client: httpx.AsyncClient, queue: str) -> None:
    params: dict[str, str]
    for params in (
        {"two_phase": "true", "lock_timeout_ms": "0"},
        {"two_phase": "true", "lock_timeout_ms": "3600001"},
        {"two_phase": "true", "transaction": "single"},
        {"two_phase": "perhaps"},
    ):
        response = await client.post(f"/api/queues/{queue}/receive", params=params)
        assert_problem(response, 400, "MQ_ERROR_INVALID_PARAMETER")
    assert await bodies(client, queue) == ["first", "second"]


async def test_a_raw_two_phase_receive_carries_the_lock_tag_header(
    client: httpx.AsyncClient, queue: str
) -> None:
    response = await client.post(
        f"/api/queues/{queue}/receive",
        params={"two_phase": "true"},
        headers={"accept": "application/octet-stream"},
    )
    assert response.status_code == 200 and response.content == b"first"
    tag = response.headers["x-msmq-lock-tag"]
    assert response.headers["x-msmq-lock-expires-at"]
    assert (await client.post(f"/api/locks/{tag}/commit")).status_code == 204
    assert await bodies(client, queue) == ["second"]
