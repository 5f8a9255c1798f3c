"""/api/queues: create, list, show, update, delete, purge; path forms and their errors."""

from __future__ import annotations

import httpx
import pytest

from tests.integration.support import (
    assert_problem,
    create_queue,
    json_of,
    message_count,
    receive,
    send,
)

pytestmark = pytest.mark.anyio


async def test_create_answers_201_with_location_and_the_queue(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/api/queues", json={"path": "private$\\Orders", "label": "Orders", "journal": True, "quota_kb": 64}
    )
    queue = json_of(response, 201)
    assert response.headers["location"] == "/api/queues/private$/Orders"
    assert queue["path"] == "private$/Orders"
    assert queue["pathname"] == "private$\\Orders"
    assert (queue["kind"], queue["is_journal"], queue["label"]) == ("private", False, "Orders")
    assert (queue["journal"], queue["quota_kb"], queue["transactional"]) == (True, 64, False)
    assert (queue["message_count"], queue["byte_count"]) == (0, 0)


async def test_the_location_of_a_name_with_url_characters_leads_back_to_the_queue(
    client: httpx.AsyncClient,
) -> None:
    response = await client.post("/api/queues", json={"path": "private$/a#b?c%d"})
    assert json_of(response, 201)["path"] == "private$/a#b?c%d"
    assert response.headers["location"] == "/api/queues/private$/a%23b%3Fc%25d"
    assert json_of(await client.get(response.headers["location"]))["path"] == "private$/a#b?c%d"


async def test_list_holds_the_queue_its_journal_and_the_system_queues(client: httpx.AsyncClient) -> None:
    await create_queue(client, "private$/orders")
    await create_queue(client, "inventory")
    listed = {queue["path"]: queue for queue in json_of(await client.get("/api/queues"))}
    assert {
        "private$/orders",
        "private$/orders;journal",
        "inventory",
        "inventory;journal",
        "system$;deadletter",
        "system$;deadxact",
        "system$;journal",
    } <= listed.keys()
    assert listed["private$/orders;journal"]["is_journal"] is True
    assert listed["inventory"]["kind"] == "public"
    assert listed["system$;deadletter"]["kind"] == "system"


async def test_creating_an_existing_queue_is_409_in_any_case_or_separator(client: httpx.AsyncClient) -> None:
    await create_queue(client, "private$/orders")
    for same in ("private$/orders", "PRIVATE$\\ORDERS", "private$/Orders"):
        assert_problem(await client.post("/api/queues", json={"path": same}), 409, "MQ_ERROR_QUEUE_EXISTS")
    assert [queue["path"] for queue in json_of(await client.get("/api/queues"))].count("private$/orders") == 1


ILLEGAL_PATHS = [
    "private$/a;b",
    "private$/a+b",
    'private$/a"b',
    "private$/a,b",
    "private$/",
    "private$/a..b",
    "private$/a b",
    "",
    "x" * 125,
    "system$;deadletter",
    "system$;nonsense",
    "private$/orders;journal",
]


async def test_an_illegal_path_name_is_400(client: httpx.AsyncClient) -> None:
    for path in ILLEGAL_PATHS:
        response = await client.post("/api/queues", json={"path": path})
        assert_problem(response, 400, "MQ_ERROR_ILLEGAL_QUEUE_PATHNAME")
    assert not [queue for queue in json_of(await client.get("/api/queues")) if queue["kind"] != "system"]


async def test_a_longest_legal_name_is_accepted(client: httpx.AsyncClient) -> None:
    queue = await create_queue(client, "private$/" + "n" * 124)
    assert queue["path"] == "private$/" + "n" * 124


INVALID_CREATE_BODIES: list[dict[str, object]] = [
    {"path": "private$/a", "label": "l" * 125},
    {"path": "private$/a", "colour": "blue"},
    {"path": "private$/a", "quota_kb": -1},
    {"path": "private$/a", "quota_kb": 1 << 32},
    {"path": "private$/a", "base_priority": 40000},
    {"path": "private$/a", "transactional": "maybe"},
    {"label": "no path"},
]


async def test_invalid_create_bodies_are_400_and_create_nothing(client: httpx.AsyncClient) -> None:
    for body in INVALID_CREATE_BODIES:
        assert_problem(await client.post("/api/queues", json=body), 400, "MQ_ERROR_INVALID_PARAMETER")
    response = await client.post(
        "/api/queues", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert_problem(response, 400, "MQ_ERROR_INVALID_PARAMETER")
    assert_problem(await client.get("/api/queues/private$/a"), 404, "MQ_ERROR_QUEUE_NOT_FOUND")


async def test_a_queue_is_found_with_either_separator_in_any_case(client: httpx.AsyncClient) -> None:
    await create_queue(client, "private$/orders")
    for url_path in (
        "private$/orders",
        "private$%5Corders",
        "private$%5corders",
        "PRIVATE$/ORDERS",
        "Private$%5COrders",
    ):
        queue = json_of(await client.get(f"/api/queues/{url_path}"))
        assert queue["path"] == "private$/orders", url_path


async def test_a_raw_backslash_in_the_url_finds_the_queue(client: httpx.AsyncClient) -> None:
    await create_queue(client, "private$/orders")
    await send(client, "private$\\orders", "via backslash")
    assert json_of(await client.get("/api/queues/private$\\orders"))["message_count"] == 1
    message = await receive(client, "PRIVATE$%5CORDERS")
    assert message is not None and message["body"] == "via backslash"


async def test_an_unknown_queue_is_404(client: httpx.AsyncClient) -> None:
    for method, suffix, body in (
        ("GET", "", None),
        ("PATCH", "", {"label": "x"}),
        ("DELETE", "", None),
        ("POST", "/purge", None),
        ("GET", "/messages", None),
    ):
        response = await client.request(method, f"/api/queues/private$/missing{suffix}", json=body)
        assert_problem(response, 404, "MQ_ERROR_QUEUE_NOT_FOUND")


async def test_show_reports_totals(client: httpx.AsyncClient) -> None:
    await create_queue(client, "private$/orders")
    await send(client, "private$/orders", "12345")
    await send(client, "private$/orders", "123")
    queue = json_of(await client.get("/api/queues/private$/orders"))
    assert (queue["message_count"], queue["byte_count"]) == (2, 8)


async def test_update_changes_label_quota_journal_and_base_priority(client: httpx.AsyncClient) -> None:
    created = await create_queue(client, "private$/orders", label="old")
    response = await client.patch(
        "/api/queues/PRIVATE$%5Corders",
        json={"label": "new", "quota_kb": 10, "journal": True, "base_priority": -5, "journal_quota_kb": 20},
    )
    queue = json_of(response)
    assert (queue["label"], queue["quota_kb"], queue["journal"], queue["base_priority"]) == (
        "new",
        10,
        True,
        -5,
    )
    assert queue["journal_quota_kb"] == 20
    assert queue["created_at"] == created["created_at"]
    shown = json_of(await client.get("/api/queues/private$/orders"))
    assert shown["label"] == "new"
    journal = json_of(await client.get("/api/queues/private$/orders;journal"))
    assert journal["quota_kb"] == 20


async def test_an_invalid_update_is_400_and_changes_nothing(client: httpx.AsyncClient) -> None:
    await create_queue(client, "private$/orders", label="kept")
    for body in ({"label": "l" * 125}, {"transactional": True}, {"quota_kb": -1}):
        response = await client.patch("/api/queues/private$/orders", json=body)
        assert_problem(response, 400, "MQ_ERROR_INVALID_PARAMETER")
    queue = json_of(await client.get("/api/queues/private$/orders"))
    assert (queue["label"], queue["transactional"], queue["quota_kb"]) == ("kept", False, 4294967295)


@pytest.mark.parametrize("path", ["system$;deadletter", "private$/orders;journal"])
async def test_queues_of_the_queue_manager_cannot_be_updated_or_deleted(
    client: httpx.AsyncClient, path: str
) -> None:
    await create_queue(client, "private$/orders")
    assert_problem(
        await client.patch(f"/api/queues/{path}", json={"label": "x"}), 403, "MQ_ERROR_ACCESS_DENIED"
    )
    assert_problem(await client.delete(f"/api/queues/{path}"), 403, "MQ_ERROR_ACCESS_DENIED")
    json_of(await client.get(f"/api/queues/{path}"))


async def test_delete_drops_the_queue_its_journal_and_its_messages(client: httpx.AsyncClient) -> None:
    await create_queue(client, "private$/orders")
    await send(client, "private$/orders", "a")
    await send(client, "private$/orders", "b")
    deleted = json_of(await client.delete("/api/queues/private$%5CORDERS"))
    assert deleted["messages_dropped"] == 2
    assert_problem(await client.get("/api/queues/private$/orders"), 404, "MQ_ERROR_QUEUE_NOT_FOUND")
    assert_problem(await client.get("/api/queues/private$/orders;journal"), 404, "MQ_ERROR_QUEUE_NOT_FOUND")
    assert_problem(await client.delete("/api/queues/private$/orders"), 404, "MQ_ERROR_QUEUE_NOT_FOUND")
    manager = json_of(await client.get("/api/queue-manager"))
    assert manager["message_count"] == 0
    await create_queue(client, "private$/orders")
    assert await receive(client, "private$/orders") is None


async def test_purge_removes_every_available_message(client: httpx.AsyncClient) -> None:
    await create_queue(client, "private$/orders")
    await create_queue(client, "private$/other")
    for body in ("a", "b", "c"):
        await send(client, "private$/orders", body)
    await send(client, "private$/other", "kept")
    assert json_of(await client.post("/api/queues/private$/orders/purge")) == {"purged": 3}
    assert await message_count(client, "private$/orders") == 0
    assert await receive(client, "private$/orders") is None
    assert await message_count(client, "private$/other") == 1
    assert json_of(await client.post("/api/queues/private$/orders/purge")) == {"purged": 0}


async def test_system_queues_can_be_purged(client: httpx.AsyncClient) -> None:
    assert json_of(await client.post("/api/queues/system$;deadletter/purge")) == {"purged": 0}
