"""What an adversarial review of the security work (issue 18) found, as a hostile network
client: each test failed before its fix, on SQLite and on PostgreSQL."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI

pytestmark = pytest.mark.anyio


def _client(app: FastAPI, headers: dict[str, str] | None = None) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=("10.1.2.3", 50000))
    return httpx.AsyncClient(transport=transport, base_url="http://localhost", headers=headers)


def _local(app: FastAPI) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 50000))
    return httpx.AsyncClient(transport=transport, base_url="http://localhost")


async def _key(admin: httpx.AsyncClient, principal: str, *grants: tuple[str | None, list[str]]) -> str:
    for queue, rights in grants:
        granted = await admin.post(
            "/api/grants", json={"principal": principal, "queue": queue, "rights": rights}
        )
        assert granted.status_code == 200, granted.text
    created = await admin.post("/api/keys", json={"principal": principal})
    assert created.status_code == 201, created.text
    key: str = created.json()["key"]
    return key


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def _new_queue(client: httpx.AsyncClient, path: str) -> None:
    response = await client.post("/api/queues", json={"path": path})
    assert response.status_code == 201, response.text


@pytest.mark.parametrize("name", ["private$/s*", "*", "private$/*", "a*b"])
async def test_a_queue_name_with_a_star_is_refused_so_its_owner_grant_is_no_pattern(
    app: FastAPI, name: str
) -> None:
    """A creator owns its queue by a grant on the queue's path, and `*` in a grant's path
    stands for any characters: creating `private$/s*` gave GENERIC_ALL on every private queue
    starting with `s` (a principal with only CREATE_QUEUE received `private$/secret`)."""
    async with _local(app) as admin:
        await _new_queue(admin, "private$/secret")
        sent = await admin.post("/api/queues/private$/secret/messages", json={"body": "top secret"})
        assert sent.status_code == 201
        key = await _key(admin, "creator", (None, ["CREATE_QUEUE"]))
    async with _client(app, _bearer(key)) as creator:
        created = await creator.post("/api/queues", json={"path": name})
        assert created.status_code == 400, created.text
        assert created.json()["mq_error"] == "MQ_ERROR_ILLEGAL_QUEUE_PATHNAME"
        taken = await creator.post("/api/queues/private$/secret/receive")
        assert taken.status_code == 403
    async with _local(app) as admin:
        grants = (await admin.get("/api/grants", params={"principal": "creator"})).json()
        assert [grant["queue"] for grant in grants] == [None]
        assert (await admin.get("/api/queues/private$/secret")).json()["message_count"] == 1
