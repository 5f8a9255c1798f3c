"""msmqgw_trigger_invocations_total counts what the invocation log holds, by result."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from app.settings import Settings
from tests.integration.test_metrics import scrape, value
from tests.webhook_server import WebhookServer

pytestmark = pytest.mark.anyio
QUEUE = "private$/watched"


@pytest.fixture
async def server() -> AsyncIterator[WebhookServer]:
    async with WebhookServer() as running:
        yield running


@pytest.fixture
def settings(settings: Settings, server: WebhookServer) -> Settings:
    return settings.model_copy(
        update={
            "triggers_enabled": True,
            "trigger_allowed_urls": f"{server.url}/hooks/",
            "trigger_refresh_interval_s": 0.05,
            "trigger_action_retries": 0,
        }
    )


async def invocations(client: httpx.AsyncClient) -> int:
    log = (await client.get("/api/triggers/Watcher/invocations", params={"limit": 100})).json()
    assert {entry["outcome"] for entry in log["invocations"]} <= {"success"}
    return len(log["invocations"])


async def test_trigger_invocations_are_counted_as_the_log_has_them(
    client: httpx.AsyncClient, server: WebhookServer
) -> None:
    assert (await client.post("/api/queues", json={"path": QUEUE})).status_code == 201
    rule = {"name": "Hook", "conditions": [], "action": {"kind": "webhook", "url": f"{server.url}/hooks/x"}}
    assert (await client.post("/api/rules", json=rule)).status_code == 201
    trigger = {"name": "Watcher", "queue": QUEUE, "serialized": True, "rules": ["Hook"]}
    assert (await client.post("/api/triggers", json=trigger)).status_code == 201
    for label in ("one", "two", "three"):
        assert (await client.post(f"/api/queues/{QUEUE}/messages", json={"label": label})).status_code == 201
    await server.until(3)  # serialized: the first two are in the log once the third has run

    before = await invocations(client)
    counted = value(await scrape(client), "msmqgw_trigger_invocations_total", result="success")
    after = await invocations(client)
    assert 2 <= before <= counted <= after
