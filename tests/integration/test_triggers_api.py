"""/api/rules and /api/triggers through the whole app: the seed example end to end with a
real webhook server, the invocation log over REST, command actions, and refused definitions."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from app.settings import Settings
from tests.integration.support import assert_problem
from tests.webhook_server import WebhookServer

pytestmark = pytest.mark.anyio
QUEUE = "private$/MyQueue"
POSTER = "import sys, urllib.request; urllib.request.urlopen(sys.argv[1], data=sys.argv[2].encode())"


@pytest.fixture
async def server() -> AsyncIterator[WebhookServer]:
    async with WebhookServer() as running:
        yield running


@pytest.fixture
def settings(settings: Settings, server: WebhookServer) -> Settings:
    """The integration settings (conftest.py), with the webhook server allowed."""
    return settings.model_copy(
        update={
            "triggers_enabled": True,
            "trigger_allowed_urls": f"{server.url}/hooks/",
            "trigger_commands_enabled": True,
            "trigger_allowed_commands": sys.executable,
            "trigger_refresh_interval_s": 0.05,
            "trigger_action_retries": 0,
        }
    )


def webhook(server: WebhookServer, name: str) -> dict[str, Any]:
    return {"kind": "webhook", "url": f"{server.url}/hooks/{name}", "body_template": "$RULE_NAME $MSG_LABEL"}


async def test_seed_example_end_to_end(client: httpx.AsyncClient, server: WebhookServer) -> None:
    assert (await client.post("/api/queues", json={"path": QUEUE})).status_code == 201
    rule1 = {
        "name": "MyRule1",
        "conditions": ["$MSG_LABEL_CONTAINS=marketing"],
        "action": webhook(server, "1"),
    }
    condition = {"property": "priority", "operator": "greater_than", "value": 5}
    rule2 = {"name": "MyRule2", "conditions": [condition], "action": webhook(server, "2")}
    for rule in (rule1, rule2):
        assert (await client.post("/api/rules", json=rule)).status_code == 201
    for label, priority in (("marketing plan", 3), ("urgent", 6), ("marketing blitz", 7), ("other", 1)):
        sent = await client.post(f"/api/queues/{QUEUE}/messages", json={"label": label, "priority": priority})
        assert sent.status_code == 201
    trigger = {
        "name": "PrivateTrigger",
        "queue": "private$\\MyQueue",
        "serialized": True,
        "rules": ["MyRule1", "MyRule2"],
    }
    created = await client.post("/api/triggers", json=trigger)
    assert created.status_code == 201, created.text
    assert [rule["name"] for rule in created.json()["rules"]] == ["MyRule1", "MyRule2"]
    hits = await server.until(4)
    # from the head in queue order (priority 7, 6, 3, 1); rules in attached order
    assert [hit.body.decode() for hit in hits] == [
        "MyRule1 marketing blitz",
        "MyRule2 marketing blitz",
        "MyRule2 urgent",
        "MyRule1 marketing plan",
    ]
    # serialized: once a later message's action runs, the earlier ones are in the log
    await client.post(f"/api/queues/{QUEUE}/messages", json={"label": "marketing end", "priority": 0})
    await server.until(5)
    log = (await client.get("/api/triggers/PrivateTrigger/invocations", params={"limit": 4})).json()
    assert [(entry["rule_name"], entry["outcome"]) for entry in log["invocations"]].count(
        ("MyRule1", "success")
    ) >= 1
    assert {entry["outcome"] for entry in log["invocations"]} == {"success"}
    assert len(log["invocations"]) == 4
    assert log["next_after"] == log["invocations"][-1]["id"]
    after = await client.get("/api/triggers/PrivateTrigger/invocations", params={"after": log["next_after"]})
    assert [entry["id"] for entry in after.json()["invocations"]] in ([], [log["next_after"] + 1])


async def test_command_action_runs_without_a_shell(client: httpx.AsyncClient, server: WebhookServer) -> None:
    assert (await client.post("/api/queues", json={"path": QUEUE})).status_code == 201
    action = {
        "kind": "command",
        "command": [sys.executable, "-c", POSTER, f"{server.url}/cmd", "$MSG_LABEL"],
        "substitute_arguments": [4],  # the label, opted in
    }
    assert (await client.post("/api/rules", json={"name": "Run", "action": action})).status_code == 201
    trigger = {"name": "T", "queue": QUEUE, "rules": ["Run"], "processing": "retrieval"}
    assert (await client.post("/api/triggers", json=trigger)).status_code == 201
    await client.post(f"/api/queues/{QUEUE}/messages", json={"label": "a; rm -rf / `x`"})
    [hit] = await server.until(1)
    assert hit.body == b"a; rm -rf / `x`"  # one argument, never interpreted by a shell


async def test_refused_definitions_change_nothing(client: httpx.AsyncClient, server: WebhookServer) -> None:
    await client.post("/api/queues", json={"path": QUEUE})
    await client.post("/api/queues", json={"path": "private$/tx", "transactional": True})
    good = webhook(server, "a")
    bad_rules = [
        (
            {"property": "colour", "operator": "equals", "value": "1"},
            good,
            "unknown message property 'colour'",
        ),
        ({"property": "label", "operator": "like", "value": "x"}, good, "unknown operator 'like'"),
        ("$MSG_LABEL_MATCHES=x", good, "unknown condition token"),
        (
            {"property": "label", "operator": "contains", "value": "x"},
            {**good, "url": "http://10.1.1.1/"},
            "allow-list",
        ),
    ]
    for condition, action, complaint in bad_rules:
        response = await client.post(
            "/api/rules", json={"name": "R", "conditions": [condition], "action": action}
        )
        assert complaint in assert_problem(response, 400, "MQ_ERROR_INVALID_PARAMETER")["detail"]
    assert (await client.get("/api/rules")).json() == []
    assert (await client.post("/api/rules", json={"name": "R", "action": good})).status_code == 201
    missing = await client.post("/api/triggers", json={"name": "T", "queue": "private$/nope", "rules": ["R"]})
    assert_problem(missing, 404, "MQ_ERROR_QUEUE_NOT_FOUND")
    not_tx = {"name": "T", "queue": QUEUE, "processing": "transactional-retrieval"}
    assert_problem(await client.post("/api/triggers", json=not_tx), 409, "MQ_ERROR_TRANSACTION_USAGE")
    unknown_rule = {"name": "T", "queue": QUEUE, "rules": ["Nope"]}
    assert_problem(await client.post("/api/triggers", json=unknown_rule), 400, "MQ_ERROR_INVALID_PARAMETER")
    assert (await client.get("/api/triggers")).json() == []
    first = {"name": "T1", "queue": "private$/tx", "processing": "transactional-retrieval"}
    assert (await client.post("/api/triggers", json=first)).status_code == 201
    second = {"name": "T2", "queue": "private$/tx"}
    assert_problem(await client.post("/api/triggers", json=second), 409, "MQ_ERROR_ILLEGAL_OPERATION")
    assert_problem(await client.post("/api/triggers", json=first), 409, "MQ_ERROR_ILLEGAL_OPERATION")
    assert_problem(await client.get("/api/triggers/T9"), 404, "MQ_ERROR_INVALID_HANDLE")
    assert [trigger["name"] for trigger in (await client.get("/api/triggers")).json()] == ["T1"]


async def test_attach_detach_and_delete(client: httpx.AsyncClient, server: WebhookServer) -> None:
    await client.post("/api/queues", json={"path": QUEUE})
    for name in ("A", "B"):
        await client.post("/api/rules", json={"name": name, "action": webhook(server, name)})
    await client.post("/api/triggers", json={"name": "T", "queue": QUEUE, "enabled": False})
    await client.post("/api/triggers/T/rules/B")
    attached = await client.post("/api/triggers/T/rules/A", params={"position": 0})
    assert [rule["name"] for rule in attached.json()["rules"]] == ["A", "B"]
    detached = await client.delete("/api/triggers/T/rules/A")
    assert [rule["name"] for rule in detached.json()["rules"]] == ["B"]
    assert (await client.delete("/api/rules/B")).status_code == 204
    assert (await client.get("/api/triggers/T")).json()["rules"] == []
    assert (await client.delete("/api/triggers/T")).status_code == 204
    assert_problem(await client.delete("/api/triggers/T"), 404, "MQ_ERROR_INVALID_HANDLE")
