"""POST /api/queues/{path}/receive?max_messages=N: many messages in one answer."""

from __future__ import annotations

import httpx
import pytest

from tests.integration.support import assert_problem, create_queue, json_of, message_count, send

pytestmark = pytest.mark.anyio
PATH = "private$/batched"


async def test_max_messages_takes_up_to_n_in_queue_order(client: httpx.AsyncClient) -> None:
    await create_queue(client, PATH)
    for number in range(5):
        await send(client, PATH, f"m{number}", priority=3 if number != 3 else 6)
    answer = json_of(await client.post(f"/api/queues/{PATH}/receive", params={"max_messages": 3}))
    assert [message["body"] for message in answer["messages"]] == ["m3", "m0", "m1"]
    assert answer["messages"][0]["queue"] == PATH
    assert await message_count(client, PATH) == 2
    rest = json_of(await client.post(f"/api/queues/{PATH}/receive", params={"max_messages": 100}))
    assert [message["body"] for message in rest["messages"]] == ["m2", "m4"]
    empty = await client.post(f"/api/queues/{PATH}/receive", params={"max_messages": 100})
    assert empty.status_code == 204


@pytest.mark.parametrize("extra", [{"two_phase": "true"}, {"transaction": "single"}])
async def test_max_messages_is_refused_with_two_phase_or_a_transaction(
    client: httpx.AsyncClient, extra: dict[str, str]
) -> None:
    await create_queue(client, PATH)
    await send(client, PATH, "kept")
    response = await client.post(f"/api/queues/{PATH}/receive", params={"max_messages": 2, **extra})
    assert_problem(response, 400, "MQ_ERROR_INVALID_PARAMETER")
    assert await message_count(client, PATH) == 1


async def test_max_messages_out_of_range_is_a_bad_request(client: httpx.AsyncClient) -> None:
    await create_queue(client, PATH)
    response = await client.post(f"/api/queues/{PATH}/receive", params={"max_messages": 0})
    assert response.status_code == 400
