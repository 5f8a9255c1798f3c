"""GET /livez and GET /readyz: liveness touches nothing; readiness checks the store, its schema
revision and the background tasks, and says which failed (problem+json 503)."""

from __future__ import annotations

import asyncio
import contextlib

import anyio
import httpx
import pytest
from fastapi import FastAPI

from app.main import create_app
from app.settings import Settings
from storage.migrate import head_revision
from tests.integration.support import assert_problem, json_of
from tests.integration.test_errors import execute, store_outage_off_the_loop, sync_url

pytestmark = pytest.mark.anyio


async def test_a_working_gateway_is_alive_and_ready(client: httpx.AsyncClient) -> None:
    assert json_of(await client.get("/livez")) == {"status": "alive"}
    ready = json_of(await client.get("/readyz"))
    assert ready == {"status": "ready", "checks": {"store": "ok", "schema": "ok", "background_tasks": "ok"}}


async def test_a_store_behind_the_code_is_not_ready(client: httpx.AsyncClient, database_url: str) -> None:
    head = head_revision()
    behind = f"{int(head) - 1:04d}"
    await anyio.to_thread.run_sync(
        execute, sync_url(database_url), f"UPDATE alembic_version SET version_num = '{behind}'"
    )
    try:
        problem = assert_problem(await client.get("/readyz"), 503, "MQ_ERROR_SERVICE_NOT_AVAILABLE")
    finally:
        await anyio.to_thread.run_sync(
            execute, sync_url(database_url), f"UPDATE alembic_version SET version_num = '{head}'"
        )
    assert problem["checks"]["schema"] == f"at {behind}, this code needs {head}"
    assert problem["checks"]["store"] == "ok"
    assert problem["detail"] == "not ready: schema"
    assert (await client.get("/livez")).status_code == 200
    assert (await client.get("/readyz")).status_code == 200


async def test_a_stopped_background_task_makes_the_gateway_not_ready(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    sweeper = next(task for task in app.state.operations.tasks if task.get_name() == "sweeper")
    sweeper.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await sweeper

    problem = assert_problem(await client.get("/readyz"), 503, "MQ_ERROR_SERVICE_NOT_AVAILABLE")
    assert problem["checks"]["background_tasks"] == "stopped: sweeper"
    assert (await client.get("/livez")).status_code == 200


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_a_stopped_trigger_service_makes_the_gateway_not_ready(settings: Settings) -> None:
    application = create_app(settings.model_copy(update={"triggers_enabled": True}))
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            assert (await client.get("/readyz")).status_code == 200
            triggers = application.state.triggers.task
            triggers.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await triggers
            problem = assert_problem(await client.get("/readyz"), 503, "MQ_ERROR_SERVICE_NOT_AVAILABLE")
    assert problem["checks"]["background_tasks"] == "stopped: triggers"


@pytest.mark.parametrize("database_url", ["postgresql"], indirect=True)
async def test_an_unreachable_store_is_not_ready_and_ready_again_after(
    client: httpx.AsyncClient, database_url: str
) -> None:
    async with store_outage_off_the_loop(database_url):
        problem = assert_problem(await client.get("/readyz"), 503, "MQ_ERROR_SERVICE_NOT_AVAILABLE")
        assert problem["checks"]["store"].startswith("unreachable")
        assert (await client.get("/livez")).status_code == 200
    assert (await client.get("/readyz")).status_code == 200
