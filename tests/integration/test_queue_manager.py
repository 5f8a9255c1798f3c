"""/api/queue-manager (identity, quota, throttling) and /healthz."""

from __future__ import annotations

import uuid

import httpx
import pytest

from tests.integration.support import assert_problem, create_queue, json_of, message_count, send

pytestmark = pytest.mark.anyio

QUEUE = "private$/orders"


async def test_show_gives_identity_and_machine_totals(client: httpx.AsyncClient) -> None:
    await create_queue(client, QUEUE)
    await send(client, QUEUE, "12345")
    await send(client, QUEUE, "678")
    manager = json_of(await client.get("/api/queue-manager"))
    assert uuid.UUID(manager["guid"])
    assert (manager["quota_kb"], manager["throttled"]) == (4294967295, False)
    assert (manager["message_count"], manager["byte_count"]) == (2, 8)
    sent = await send(client, QUEUE, "x")
    assert sent["message_id"].startswith("{" + manager["guid"] + "}\\")


async def test_healthz_does_not_publish_the_queue_manager_guid(client: httpx.AsyncClient) -> None:
    """/healthz answers anyone (load balancers); the GUID is for administrators only."""
    guid = json_of(await client.get("/api/queue-manager"))["guid"]
    health = await client.get("/healthz")
    assert json_of(health) == {"status": "ok"}
    assert guid not in health.text


async def test_a_throttled_queue_manager_refuses_sends_with_507(client: httpx.AsyncClient) -> None:
    await create_queue(client, QUEUE)
    await send(client, QUEUE, "before")
    throttled = json_of(await client.patch("/api/queue-manager", json={"throttled": True}))
    assert throttled["throttled"] is True
    assert json_of(await client.get("/api/queue-manager"))["throttled"] is True
    for request in (
        client.post(f"/api/queues/{QUEUE}/messages", json={"body": "refused"}),
        client.post(f"/api/queues/{QUEUE}/messages", content=b"raw refused"),
    ):
        assert_problem(await request, 507, "MQ_ERROR_INSUFFICIENT_RESOURCES")
    assert await message_count(client, QUEUE) == 1
    # Reading goes on while throttled.
    assert json_of(await client.post(f"/api/queues/{QUEUE}/receive"))["body"] == "before"
    assert json_of(await client.patch("/api/queue-manager", json={"throttled": False}))["throttled"] is False
    await send(client, QUEUE, "after")
    assert await message_count(client, QUEUE) == 1


async def test_the_machine_quota_refuses_what_does_not_fit(client: httpx.AsyncClient) -> None:
    await create_queue(client, QUEUE)
    manager = json_of(await client.patch("/api/queue-manager", json={"quota_kb": 1}))
    assert manager["quota_kb"] == 1
    await send(client, QUEUE, "q" * 1000)
    refused = await client.post(f"/api/queues/{QUEUE}/messages", json={"body": "q" * 100})
    assert_problem(refused, 507, "MQ_ERROR_INSUFFICIENT_RESOURCES")
    assert await message_count(client, QUEUE) == 1
    await send(client, QUEUE, "q" * 24)  # exactly 1024 bytes in all
    assert json_of(await client.get("/api/queue-manager"))["byte_count"] == 1024


async def test_an_invalid_update_is_400_and_changes_nothing(client: httpx.AsyncClient) -> None:
    for body in ({"quota_kb": -1}, {"quota_kb": 1 << 32}, {"throttled": "very"}, {"guid": "new"}):
        assert_problem(await client.patch("/api/queue-manager", json=body), 400, "MQ_ERROR_INVALID_PARAMETER")
    manager = json_of(await client.get("/api/queue-manager"))
    assert (manager["quota_kb"], manager["throttled"]) == (4294967295, False)


async def test_an_empty_update_changes_nothing(client: httpx.AsyncClient) -> None:
    before = json_of(await client.get("/api/queue-manager"))
    assert json_of(await client.patch("/api/queue-manager", json={})) == before
