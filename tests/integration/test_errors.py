"""Every error of every endpoint is application/problem+json with mq_error and mq_error_code."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import anyio
import httpx
import pytest
import sqlalchemy as sa

from app.main import create_app
from app.settings import Settings
from tests.databases import POSTGRES_ADMIN_URL
from tests.integration.support import PROBLEM_JSON, assert_problem

pytestmark = pytest.mark.anyio

IDS = {
    "{path}": "private$/missing",
    "{lookup_id}": "72057594037927937",
    "{cursor_id}": "no-such-cursor",
    "{tag}": "72057594037927937-0000",
    "{transaction_id}": "no-such-transaction",
    "{queue_id}": "999999",
    "{trigger}": "NoSuchTrigger",
    "{rule}": "NoSuchRule",
    "{name}": "nobody",
    "{key_id}": "0000000000000000",
    "{batch_id}": "NoSuchBatch",
    "{mapping_id}": "999999",
}

_RULE: dict[str, Any] = {"json": {"name": "R", "action": {"url": "http://127.0.0.1/"}}}
_TRIGGER: dict[str, Any] = {"json": {"name": "T", "queue": "private$/missing"}}

# (method, OpenAPI path) -> (request extras, expected status, expected MQ_ERROR) for one failing call.
FAILURES: dict[tuple[str, str], tuple[dict[str, Any], int, str]] = {
    ("GET", "/api/queues"): ({"params": {}}, 0, ""),  # no error path: listing always works
    ("POST", "/api/queues"): ({"json": {"path": "private$/a;b"}}, 400, "MQ_ERROR_ILLEGAL_QUEUE_PATHNAME"),
    ("GET", "/api/queues/{path}"): ({}, 404, "MQ_ERROR_QUEUE_NOT_FOUND"),
    ("PATCH", "/api/queues/{path}"): ({"json": {"label": "x"}}, 404, "MQ_ERROR_QUEUE_NOT_FOUND"),
    ("DELETE", "/api/queues/{path}"): ({}, 404, "MQ_ERROR_QUEUE_NOT_FOUND"),
    ("POST", "/api/queues/{path}/purge"): ({}, 404, "MQ_ERROR_QUEUE_NOT_FOUND"),
    ("GET", "/api/queues/{path}/messages"): ({}, 404, "MQ_ERROR_QUEUE_NOT_FOUND"),
    ("POST", "/api/queues/{path}/messages"): ({"json": {"body": "x"}}, 404, "MQ_ERROR_QUEUE_NOT_FOUND"),
    ("POST", "/api/queues/{path}/receive"): ({}, 404, "MQ_ERROR_QUEUE_NOT_FOUND"),
    ("GET", "/api/queues/{path}/peek"): ({}, 404, "MQ_ERROR_QUEUE_NOT_FOUND"),
    ("GET", "/api/queues/{path}/messages/first"): ({}, 404, "MQ_ERROR_QUEUE_NOT_FOUND"),
    ("POST", "/api/queues/{path}/messages/first/receive"): ({}, 404, "MQ_ERROR_QUEUE_NOT_FOUND"),
    ("GET", "/api/queues/{path}/messages/last"): ({}, 404, "MQ_ERROR_QUEUE_NOT_FOUND"),
    ("POST", "/api/queues/{path}/messages/last/receive"): ({}, 404, "MQ_ERROR_QUEUE_NOT_FOUND"),
    ("GET", "/api/queues/{path}/messages/{lookup_id}"): ({}, 404, "MQ_ERROR_QUEUE_NOT_FOUND"),
    ("POST", "/api/queues/{path}/messages/{lookup_id}/receive"): ({}, 404, "MQ_ERROR_QUEUE_NOT_FOUND"),
    ("GET", "/api/queues/{path}/messages/{lookup_id}/next"): ({}, 404, "MQ_ERROR_QUEUE_NOT_FOUND"),
    ("POST", "/api/queues/{path}/messages/{lookup_id}/next/receive"): ({}, 404, "MQ_ERROR_QUEUE_NOT_FOUND"),
    ("GET", "/api/queues/{path}/messages/{lookup_id}/previous"): ({}, 404, "MQ_ERROR_QUEUE_NOT_FOUND"),
    ("POST", "/api/queues/{path}/messages/{lookup_id}/previous/receive"): (
        {},
        404,
        "MQ_ERROR_QUEUE_NOT_FOUND",
    ),
    ("GET", "/api/queues/{path}/messages/by-id"): (
        {"params": {"message_id": "{0}\\1"}},
        404,
        "MQ_ERROR_QUEUE_NOT_FOUND",
    ),
    ("POST", "/api/queues/{path}/messages/by-id/receive"): ({}, 400, "MQ_ERROR_INVALID_PARAMETER"),
    ("GET", "/api/queues/{path}/messages/by-correlation-id"): ({}, 400, "MQ_ERROR_INVALID_PARAMETER"),
    ("POST", "/api/queues/{path}/messages/by-correlation-id/receive"): (
        {"params": {"correlation_id": "AAAA"}},
        404,
        "MQ_ERROR_QUEUE_NOT_FOUND",
    ),
    ("DELETE", "/api/queues/{path}/messages/{lookup_id}"): ({}, 404, "MQ_ERROR_QUEUE_NOT_FOUND"),
    ("POST", "/api/queues/{path}/messages/move"): (
        {"json": {"lookup_ids": ["1"], "to": "private$/other"}},
        404,
        "MQ_ERROR_QUEUE_NOT_FOUND",
    ),
    ("POST", "/api/queues/{path}/messages/resend"): (
        {"json": {"all": True}},
        404,
        "MQ_ERROR_QUEUE_NOT_FOUND",
    ),
    ("GET", "/api/queues/{path}/messages/export"): ({}, 404, "MQ_ERROR_QUEUE_NOT_FOUND"),
    ("POST", "/api/queues/{path}/messages/import"): (
        {"content": b'{"body_base64": ""}\n', "headers": {"content-type": "application/x-ndjson"}},
        404,
        "MQ_ERROR_QUEUE_NOT_FOUND",
    ),
    ("POST", "/api/locks/{tag}/commit"): ({}, 410, "MQ_ERROR_MESSAGE_ALREADY_RECEIVED"),
    ("POST", "/api/locks/{tag}/abort"): ({}, 410, "MQ_ERROR_MESSAGE_ALREADY_RECEIVED"),
    ("POST", "/api/transactions"): ({}, 0, ""),  # no error path: beginning always works
    ("GET", "/api/transactions/{transaction_id}"): ({}, 409, "MQ_ERROR_TRANSACTION_SEQUENCE"),
    ("POST", "/api/transactions/{transaction_id}/commit"): ({}, 409, "MQ_ERROR_TRANSACTION_SEQUENCE"),
    ("POST", "/api/transactions/{transaction_id}/abort"): ({}, 409, "MQ_ERROR_TRANSACTION_SEQUENCE"),
    ("POST", "/api/cursors"): ({"json": {"queue": "private$/missing"}}, 404, "MQ_ERROR_QUEUE_NOT_FOUND"),
    ("GET", "/api/cursors/{cursor_id}"): ({}, 404, "MQ_ERROR_INVALID_HANDLE"),
    ("DELETE", "/api/cursors/{cursor_id}"): ({}, 404, "MQ_ERROR_INVALID_HANDLE"),
    ("GET", "/api/cursors/{cursor_id}/current"): ({}, 404, "MQ_ERROR_INVALID_HANDLE"),
    ("GET", "/api/cursors/{cursor_id}/next"): ({}, 404, "MQ_ERROR_INVALID_HANDLE"),
    ("POST", "/api/cursors/{cursor_id}/receive"): ({}, 404, "MQ_ERROR_INVALID_HANDLE"),
    ("GET", "/api/queue-manager"): ({}, 0, ""),  # no error path
    ("PATCH", "/api/queue-manager"): ({"json": {"quota_kb": -1}}, 400, "MQ_ERROR_INVALID_PARAMETER"),
    ("GET", "/healthz"): ({}, 0, ""),  # no error path while the store is up
    ("GET", "/api/outgoing-queues"): ({"params": {"limit": 0}}, 400, "MQ_ERROR_INVALID_PARAMETER"),
    ("GET", "/api/outgoing-queues/{queue_id}"): ({}, 404, "MQ_ERROR_QUEUE_NOT_FOUND"),
    ("DELETE", "/api/outgoing-queues/{queue_id}"): ({}, 404, "MQ_ERROR_QUEUE_NOT_FOUND"),
    ("POST", "/api/outgoing-queues/{queue_id}/pause"): ({}, 404, "MQ_ERROR_QUEUE_NOT_FOUND"),
    ("POST", "/api/outgoing-queues/{queue_id}/resume"): ({}, 404, "MQ_ERROR_QUEUE_NOT_FOUND"),
    ("POST", "/api/outgoing-queues/{queue_id}/purge"): ({}, 404, "MQ_ERROR_QUEUE_NOT_FOUND"),
    ("GET", "/api/srmp/statistics"): ({}, 0, ""),  # no error path: counters of this process
    ("GET", "/metrics"): ({}, 0, ""),  # no error path while the store is up
    ("GET", "/livez"): ({}, 0, ""),  # never fails while the process answers
    ("GET", "/readyz"): ({}, 0, ""),  # its 503 is tested in test_probes.py
    ("GET", "/api/rules"): ({}, 0, ""),  # no error path: listing always works
    ("POST", "/api/rules"): (_RULE, 400, "MQ_ERROR_INVALID_PARAMETER"),  # outside the (empty) allow-list
    ("GET", "/api/rules/{rule}"): ({}, 404, "MQ_ERROR_INVALID_HANDLE"),
    ("PUT", "/api/rules/{rule}"): (_RULE, 404, "MQ_ERROR_INVALID_HANDLE"),
    ("DELETE", "/api/rules/{rule}"): ({}, 404, "MQ_ERROR_INVALID_HANDLE"),
    ("GET", "/api/triggers"): ({}, 0, ""),  # no error path: listing always works
    ("POST", "/api/triggers"): (_TRIGGER, 404, "MQ_ERROR_QUEUE_NOT_FOUND"),
    ("GET", "/api/triggers/{trigger}"): ({}, 404, "MQ_ERROR_INVALID_HANDLE"),
    ("PUT", "/api/triggers/{trigger}"): (_TRIGGER, 404, "MQ_ERROR_INVALID_HANDLE"),
    ("DELETE", "/api/triggers/{trigger}"): ({}, 404, "MQ_ERROR_INVALID_HANDLE"),
    ("PUT", "/api/triggers/{trigger}/rules"): ({"json": {"rules": []}}, 404, "MQ_ERROR_INVALID_HANDLE"),
    ("POST", "/api/triggers/{trigger}/rules/{rule}"): ({}, 404, "MQ_ERROR_INVALID_HANDLE"),
    ("DELETE", "/api/triggers/{trigger}/rules/{rule}"): ({}, 404, "MQ_ERROR_INVALID_HANDLE"),
    ("GET", "/api/triggers/{trigger}/invocations"): ({}, 404, "MQ_ERROR_INVALID_HANDLE"),
    ("GET", "/api/principals"): ({}, 0, ""),  # no error path: listing always works
    ("DELETE", "/api/principals/{name}"): ({}, 404, "MQ_ERROR_INVALID_HANDLE"),
    ("GET", "/api/keys"): ({}, 0, ""),  # no error path: listing always works
    ("POST", "/api/keys"): ({"json": {"principal": "a:b"}}, 400, "MQ_ERROR_INVALID_PARAMETER"),
    ("DELETE", "/api/keys/{key_id}"): ({}, 404, "MQ_ERROR_INVALID_HANDLE"),
    ("GET", "/api/grants"): ({}, 0, ""),  # no error path: listing always works
    ("POST", "/api/grants"): (
        {"json": {"principal": "app", "queue": "q", "rights": ["SEND"]}},
        400,
        "MQ_ERROR_INVALID_PARAMETER",
    ),
    ("GET", "/api/client-certificates"): ({}, 0, ""),  # no error path: listing always works
    ("POST", "/api/client-certificates"): (
        {"json": {"subject": "", "issuer": "CN=ca", "principal": "app"}},
        400,
        "MQ_ERROR_INVALID_PARAMETER",
    ),
    ("DELETE", "/api/client-certificates/{mapping_id}"): ({}, 404, "MQ_ERROR_INVALID_HANDLE"),
    ("GET", "/api/queues/{path}/permissions"): ({}, 404, "MQ_ERROR_QUEUE_NOT_FOUND"),
    ("POST", "/api/queues/{path}/permissions"): (
        {"json": {"principal": "app", "rights": ["RECEIVE_MESSAGE"]}},
        404,
        "MQ_ERROR_QUEUE_NOT_FOUND",
    ),
    # A caller without a key (as here) owns nothing, whatever the queue.
    ("POST", "/api/queues/{path}/owner"): ({}, 403, "MQ_ERROR_ACCESS_DENIED"),
    ("GET", "/api/me"): ({}, 0, ""),  # no error path: every caller is someone
    ("GET", "/api/me/rights"): ({"params": {"queue": "private$/"}}, 400, "MQ_ERROR_ILLEGAL_QUEUE_PATHNAME"),
    ("GET", "/api/audit"): ({"params": {"limit": 0}}, 400, "MQ_ERROR_INVALID_PARAMETER"),
    ("GET", "/api/redrives/{batch_id}"): ({}, 404, "MQ_ERROR_INVALID_HANDLE"),
    ("POST", "/api/redrives/{batch_id}/apply"): ({}, 404, "MQ_ERROR_INVALID_HANDLE"),
    # SRMP answers carry only a status, never a body (reference §2): tested in tests/compat.
    ("POST", "/msmq/{path}"): ({}, 0, ""),
    # The SOAP API answers SOAP faults, not problem+json: tested in tests/compat/test_soap_api.py.
    ("GET", "/soap"): ({}, 0, ""),
    ("POST", "/soap"): ({}, 0, ""),
}


def operations() -> set[tuple[str, str]]:
    document = create_app(Settings(database_url="sqlite+aiosqlite:///:memory:")).openapi()
    return {(method.upper(), path) for path, item in document["paths"].items() for method in item}


def concrete(path: str) -> str:
    for placeholder, value in IDS.items():
        path = path.replace(placeholder, value)
    return path


def test_the_failure_table_covers_every_operation() -> None:
    assert operations() == set(FAILURES)


async def test_every_endpoint_answers_its_errors_as_problem_json(client: httpx.AsyncClient) -> None:
    for (method, path), (extras, status, mq_error) in sorted(FAILURES.items()):
        if not status:
            continue
        response = await client.request(method, concrete(path), **extras)
        try:
            assert_problem(response, status, mq_error)
        except AssertionError as error:
            raise AssertionError(f"{method} {path}: {error}") from None


async def test_an_unknown_route_is_a_problem_too(client: httpx.AsyncClient) -> None:
    for url in ("/nope", "/api/nope", "/api/queue-manager/extra"):
        assert_problem(await client.get(url), 404, "MQ_ERROR_UNSUPPORTED_OPERATION")


async def test_a_wrong_method_is_405_problem_with_allow(client: httpx.AsyncClient) -> None:
    response = await client.get("/api/locks/1-ab/commit")
    assert_problem(response, 405, "MQ_ERROR_UNSUPPORTED_OPERATION")
    assert response.headers["allow"] == "POST"
    assert_problem(await client.put("/api/queue-manager", json={}), 405, "MQ_ERROR_UNSUPPORTED_OPERATION")


async def test_validation_errors_name_the_parameter(client: httpx.AsyncClient) -> None:
    response = await client.post("/api/queues/private$/missing/receive", params={"timeout_ms": "soon"})
    problem = assert_problem(response, 400, "MQ_ERROR_INVALID_PARAMETER")
    assert "timeout_ms" in problem["detail"]
    assert response.headers["content-type"] == PROBLEM_JSON


def sync_url(database_url: str) -> str:
    url = sa.engine.make_url(database_url)
    driver = "sqlite" if url.get_backend_name() == "sqlite" else "postgresql+psycopg"
    return url.set(drivername=driver).render_as_string(hide_password=False)


def execute(url: str, statement: str, autocommit: bool = False) -> None:
    engine = sa.create_engine(
        url, poolclass=sa.pool.NullPool, isolation_level="AUTOCOMMIT" if autocommit else None
    )
    try:
        with engine.begin() as connection:
            connection.exec_driver_sql(statement)
    finally:
        engine.dispose()


@contextmanager
def store_outage(database_url: str) -> Iterator[None]:
    """Make the real database fail the gateway's statements, then repair it."""
    url = sa.engine.make_url(database_url)
    if url.get_backend_name() == "sqlite":
        execute(sync_url(database_url), "ALTER TABLE queues RENAME TO queues_away")
        try:
            yield
        finally:
            execute(sync_url(database_url), "ALTER TABLE queues_away RENAME TO queues")
        return
    admin = (
        sa.engine.make_url(POSTGRES_ADMIN_URL).set(drivername="postgresql+psycopg").render_as_string(False)
    )
    execute(admin, f'ALTER DATABASE "{url.database}" ALLOW_CONNECTIONS false', autocommit=True)
    execute(admin, f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{url.database}'")
    try:
        yield
    finally:
        execute(admin, f'ALTER DATABASE "{url.database}" ALLOW_CONNECTIONS true', autocommit=True)


@asynccontextmanager
async def store_outage_off_the_loop(database_url: str) -> AsyncIterator[None]:
    """`store_outage` for a gateway on this event loop: the statements run in a thread, since
    blocking the loop would stall a background pass in the middle of its SQLite transaction,
    and the ALTER would then wait for a lock that is never released."""
    outage = store_outage(database_url)
    await anyio.to_thread.run_sync(outage.__enter__)
    try:
        yield
    finally:
        await anyio.to_thread.run_sync(outage.__exit__, None, None, None)


async def test_a_store_failure_is_503_and_the_gateway_serves_again_after_it(
    client: httpx.AsyncClient, database_url: str
) -> None:
    assert (await client.post("/api/queues", json={"path": "private$/orders"})).status_code == 201
    async with store_outage_off_the_loop(database_url):
        response = await client.get("/api/queues/private$/orders")
        problem = assert_problem(response, 503, "MQ_ERROR_SERVICE_NOT_AVAILABLE")
        assert problem["detail"] == "the message store is unavailable"
    again = await client.post("/api/queues/private$/orders/messages", json={"body": "after the outage"})
    assert again.status_code == 201, again.text


async def test_sessions_the_server_ended_cost_at_most_the_request_that_meets_them(
    client: httpx.AsyncClient, database_url: str
) -> None:
    """The server ended the gateway's pooled sessions (a restart, an administrator) while the
    gateway was busy. A connection in steady use is not pinged (storage/engine.py): the
    request that meets a dropped session may be answered 503, with nothing of it stored; that
    failure replaces the whole pool, and the request after it is served."""
    if not database_url.startswith("postgresql"):
        pytest.skip("SQLite has no server sessions")
    assert (await client.post("/api/queues", json={"path": "private$/orders"})).status_code == 201
    admin = (
        sa.engine.make_url(POSTGRES_ADMIN_URL).set(drivername="postgresql+psycopg").render_as_string(False)
    )
    database = sa.engine.make_url(database_url).database
    ended = f"SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE datname = '{database}'"
    await anyio.to_thread.run_sync(execute, admin, ended)
    first = await client.post("/api/queues/private$/orders/messages", json={"body": "during the restart"})
    if first.status_code != 201:  # a pooled connection idle for a second or more is pinged first
        assert_problem(first, 503, "MQ_ERROR_SERVICE_NOT_AVAILABLE")
    again = await client.post("/api/queues/private$/orders/messages", json={"body": "after the restart"})
    assert again.status_code == 201, again.text
    listed = (await client.get("/api/queues/private$/orders/messages")).json()["messages"]
    stored = [message["body"] for message in listed]
    expected = (
        ["after the restart"] if first.status_code == 503 else ["during the restart", "after the restart"]
    )
    assert stored == expected
