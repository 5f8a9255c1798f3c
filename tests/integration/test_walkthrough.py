"""The README's "Ten minutes with curl", step by step, on each store."""

from __future__ import annotations

import httpx
import pytest

from tests.integration.support import assert_problem, json_of

pytestmark = pytest.mark.anyio

ORDERS = "/api/queues/private$/orders"
PAYMENTS = "/api/queues/private$/payments"
RAW = {"accept": "application/octet-stream"}


async def test_readme_walkthrough(client: httpx.AsyncClient) -> None:
    created = await client.post(
        "/api/queues", json={"path": "private$/orders", "label": "Orders", "journal": True}
    )
    assert json_of(created, 201)["journal"] is True

    sent = {}
    for body, label, priority in (
        ("order 1", "routine", 1),
        ("order 2", "urgent", 6),
        ("order 3", "normal", 3),
    ):
        answer = await client.post(
            f"{ORDERS}/messages", json={"body": body, "label": label, "priority": priority}
        )
        sent[body] = json_of(answer, 201)

    peeked = json_of(await client.get(f"{ORDERS}/peek"))
    assert (peeked["body"], peeked["label"], peeked["priority"]) == ("order 2", "urgent", 6)

    first = json_of(await client.get(f"{ORDERS}/messages/first"))
    assert first["lookup_id"] == sent["order 2"]["lookup_id"]
    after_first = json_of(await client.get(f"{ORDERS}/messages/{first['lookup_id']}/next"))
    assert after_first["body"] == "order 3"
    last = json_of(await client.get(f"{ORDERS}/messages/last"))
    before_last = json_of(await client.get(f"{ORDERS}/messages/{last['lookup_id']}/previous"))
    assert (last["body"], before_last["body"]) == ("order 1", "order 3")

    received = []
    for _ in range(3):
        response = await client.post(f"{ORDERS}/receive", headers=RAW)
        assert response.status_code == 200 and response.headers["content-type"] == "application/octet-stream"
        received.append((response.content, response.headers["x-msmq-priority"]))
    assert received == [(b"order 2", "6"), (b"order 3", "3"), (b"order 1", "1")]

    empty = await client.post(f"{ORDERS}/receive", params={"timeout_ms": 20})
    assert empty.status_code == 204

    journal = json_of(await client.get("/api/queues/private$/orders;journal/messages"))
    assert sorted(message["body"] for message in journal["messages"]) == ["order 1", "order 2", "order 3"]

    json_of(await client.post("/api/queues", json={"path": "private$/payments", "transactional": True}), 201)
    single = await client.post(
        f"{PAYMENTS}/messages", params={"transaction": "single"}, json={"body": "pay 42.00"}
    )
    json_of(single, 201)

    transaction = json_of(await client.post("/api/transactions"), 201)["id"]
    taken = json_of(await client.post(f"{PAYMENTS}/receive", params={"transaction": transaction}))
    assert taken["body"] == "pay 42.00"
    assert (await client.get(f"{PAYMENTS}/peek")).status_code == 204  # locked by the transaction
    assert (await client.post(f"/api/transactions/{transaction}/abort")).status_code == 204
    back = json_of(await client.get(f"{PAYMENTS}/peek"))
    assert (back["body"], back["lookup_id"], back["abort_count"]) == ("pay 42.00", taken["lookup_id"], 1)

    again = await client.post("/api/queues", json={"path": "private$/orders"})
    problem = assert_problem(again, 409, "MQ_ERROR_QUEUE_EXISTS")
    assert problem["mq_error_code"] == "0xC00E0005"
    assert problem["detail"] == "private$/orders already exists"
