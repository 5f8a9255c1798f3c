"""Administrative JSON bodies are capped (MSMQGW_MAX_ADMIN_BODY_BYTES) and refused with 413
before they are read: from Content-Length, or counted while a chunked body streams in."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.integration.support import assert_problem, create_queue, json_of

pytestmark = pytest.mark.anyio

QUEUE = "private$/orders"
LIMIT = 1024 * 1024
"""The default cap: the integration settings leave it alone."""
ENDPOINTS = [
    ("POST", "/api/queues"),
    ("PATCH", f"/api/queues/{QUEUE}"),
    ("POST", "/api/cursors"),
    ("POST", "/api/rules"),
    ("POST", "/api/triggers"),
    ("PATCH", "/api/queue-manager"),
    ("POST", "/api/transactions"),
]


def oversized() -> bytes:
    """A JSON document one byte over the cap: every endpoint would read it as a bad request."""
    prefix, suffix = b'{"label": "', b'"}'
    return prefix + b"x" * (LIMIT + 1 - len(prefix) - len(suffix)) + suffix


async def chunks(total: int, size: int = 64 * 1024) -> AsyncIterator[bytes]:
    yield b'{"label": "'
    for _ in range(total // size):
        yield b"x" * size


async def unchanged(client: httpx.AsyncClient) -> None:
    queues = [queue["path"] for queue in json_of(await client.get("/api/queues"))]
    assert QUEUE in queues and not any(path.endswith("x" * 10) for path in queues)
    assert json_of(await client.get(f"/api/queues/{QUEUE}"))["label"] == ""
    assert json_of(await client.get("/api/rules")) == []
    assert json_of(await client.get("/api/triggers")) == []


@pytest.mark.parametrize(("method", "url"), ENDPOINTS)
async def test_a_declared_length_over_the_cap_is_refused_unread(
    client: httpx.AsyncClient, method: str, url: str
) -> None:
    await create_queue(client, QUEUE)
    headers = {"content-type": "application/json", "content-length": str(LIMIT + 1)}
    response = await client.request(method, url, content=b"{}", headers=headers)
    problem = assert_problem(response, 413, "MQ_ERROR_INSUFFICIENT_RESOURCES")
    assert str(LIMIT) in problem["detail"]
    assert response.headers["connection"] == "close"
    await unchanged(client)


@pytest.mark.parametrize(("method", "url"), ENDPOINTS)
async def test_a_body_over_the_cap_is_refused(client: httpx.AsyncClient, method: str, url: str) -> None:
    await create_queue(client, QUEUE)
    response = await client.request(
        method, url, content=oversized(), headers={"content-type": "application/json"}
    )
    assert_problem(response, 413, "MQ_ERROR_INSUFFICIENT_RESOURCES")
    await unchanged(client)


@pytest.mark.parametrize(("method", "url"), ENDPOINTS)
async def test_a_chunked_body_over_the_cap_is_refused_while_it_streams(
    client: httpx.AsyncClient, method: str, url: str
) -> None:
    await create_queue(client, QUEUE)
    response = await client.request(
        method, url, content=chunks(4 * LIMIT), headers={"content-type": "application/json"}
    )
    assert_problem(response, 413, "MQ_ERROR_INSUFFICIENT_RESOURCES")
    assert response.headers["connection"] == "close"
    await unchanged(client)


async def test_a_chunked_body_under_the_cap_is_read(client: httpx.AsyncClient) -> None:
    async def body() -> AsyncIterator[bytes]:
        yield b'{"path": "private$/'
        yield b'chunked"}'

    created = await client.post("/api/queues", content=body(), headers={"content-type": "application/json"})
    assert json_of(created, 201)["path"] == "private$/chunked"
