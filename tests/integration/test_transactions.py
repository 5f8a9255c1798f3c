"""/api/transactions and `?transaction=` on sends and receives (reference §7.8)."""

from __future__ import annotations

from datetime import datetime, timedelta

import httpx
import pytest

from qm.clock import SettableClock
from tests.integration.support import (
    assert_problem,
    bodies,
    create_queue,
    json_of,
    peek,
    receive,
    send,
)

pytestmark = pytest.mark.anyio

QUEUE = "private$/billing"
PLAIN = "private$/plain"


@pytest.fixture
async def queues(client: httpx.AsyncClient) -> tuple[str, str]:
    await create_queue(client, QUEUE, transactional=True)
    await create_queue(client, PLAIN)
    return QUEUE, PLAIN


async def begin(client: httpx.AsyncClient) -> str:
    transaction_id: str = json_of(await client.post("/api/transactions"), 201)["id"]
    return transaction_id


async def test_begin_show_commit(client: httpx.AsyncClient, clock: SettableClock) -> None:
    created = json_of(await client.post("/api/transactions"), 201)
    assert datetime.fromisoformat(created["created_at"]) == clock.now()
    assert datetime.fromisoformat(created["expires_at"]) == clock.now() + timedelta(seconds=60)
    shown = json_of(await client.get(f"/api/transactions/{created['id']}"))
    assert shown == created
    response = await client.post(f"/api/transactions/{created['id']}/commit")
    assert (response.status_code, response.content) == (204, b"")
    assert_problem(
        await client.get(f"/api/transactions/{created['id']}"), 409, "MQ_ERROR_TRANSACTION_SEQUENCE"
    )


async def test_ending_an_unknown_or_finished_transaction_is_409(client: httpx.AsyncClient) -> None:
    for end in ("commit", "abort"):
        response = await client.post(f"/api/transactions/nope/{end}")
        assert_problem(response, 409, "MQ_ERROR_TRANSACTION_SEQUENCE")
    committed, aborted = await begin(client), await begin(client)
    assert (await client.post(f"/api/transactions/{committed}/commit")).status_code == 204
    assert (await client.post(f"/api/transactions/{aborted}/abort")).status_code == 204
    for transaction_id in (committed, aborted):
        for end in ("commit", "abort"):
            response = await client.post(f"/api/transactions/{transaction_id}/{end}")
            assert_problem(response, 409, "MQ_ERROR_TRANSACTION_SEQUENCE")


async def test_sends_are_invisible_until_commit(client: httpx.AsyncClient, queues: tuple[str, str]) -> None:
    transaction_id = await begin(client)
    sent = [
        await send(client, QUEUE, body, transaction=transaction_id, priority=6) for body in ("t1", "t2", "t3")
    ]
    assert all(item["transaction"] == transaction_id and item["priority"] == 0 for item in sent)
    assert await peek(client, QUEUE) is None
    assert await receive(client, QUEUE) is None
    assert await bodies(client, QUEUE) == []
    assert (await client.post(f"/api/transactions/{transaction_id}/commit")).status_code == 204
    received = [await receive(client, QUEUE) for _ in range(3)]
    assert [message["body"] for message in received if message] == ["t1", "t2", "t3"]
    flags = [(m["first_in_transaction"], m["last_in_transaction"], m["priority"]) for m in received if m]
    assert flags == [(True, False, 0), (False, False, 0), (False, True, 0)]


async def test_abort_drops_the_sends(client: httpx.AsyncClient, queues: tuple[str, str]) -> None:
    transaction_id = await begin(client)
    await send(client, QUEUE, "never", transaction=transaction_id)
    assert (await client.post(f"/api/transactions/{transaction_id}/abort")).status_code == 204
    assert await receive(client, QUEUE) is None
    assert json_of(await client.get(f"/api/queues/{QUEUE}"))["message_count"] == 0


async def test_a_received_message_returns_to_its_place_on_abort(
    client: httpx.AsyncClient, queues: tuple[str, str]
) -> None:
    for body in ("first", "second"):
        await send(client, QUEUE, body, transaction="single")
    transaction_id = await begin(client)
    taken = await receive(client, QUEUE, transaction=transaction_id)
    assert taken is not None and taken["body"] == "first" and taken["abort_count"] == 0
    assert await bodies(client, QUEUE) == ["second"]
    assert (await client.post(f"/api/transactions/{transaction_id}/abort")).status_code == 204
    assert await bodies(client, QUEUE) == ["first", "second"]
    back = await receive(client, QUEUE)
    assert back is not None
    assert (back["body"], back["lookup_id"], back["abort_count"]) == ("first", taken["lookup_id"], 1)


async def test_a_received_message_is_gone_on_commit(
    client: httpx.AsyncClient, queues: tuple[str, str]
) -> None:
    await send(client, QUEUE, "paid", transaction="single")
    transaction_id = await begin(client)
    taken = await receive(client, QUEUE, transaction=transaction_id)
    assert taken is not None and taken["body"] == "paid"
    assert (await client.post(f"/api/transactions/{transaction_id}/commit")).status_code == 204
    assert await receive(client, QUEUE) is None
    assert json_of(await client.get(f"/api/queues/{QUEUE}"))["message_count"] == 0


async def test_a_single_message_transaction_is_visible_at_once(
    client: httpx.AsyncClient, queues: tuple[str, str]
) -> None:
    sent = await send(client, QUEUE, "single", transaction="single", priority=7)
    assert (sent["transaction"], sent["priority"]) == ("single", 0)
    message = await peek(client, QUEUE)
    assert message is not None and message["body"] == "single" and message["priority"] == 0


async def test_lookup_and_cursor_receives_take_part_in_a_transaction(
    client: httpx.AsyncClient, queues: tuple[str, str]
) -> None:
    sent = [await send(client, QUEUE, body, transaction="single") for body in ("x", "y")]
    transaction_id = await begin(client)
    by_lookup = await client.post(
        f"/api/queues/{QUEUE}/messages/{sent[0]['lookup_id']}/receive", params={"transaction": transaction_id}
    )
    assert json_of(by_lookup)["body"] == "x"
    cursor = json_of(await client.post("/api/cursors", json={"queue": QUEUE}), 201)["id"]
    by_cursor = await client.post(f"/api/cursors/{cursor}/receive", params={"transaction": transaction_id})
    assert json_of(by_cursor)["body"] == "y"
    assert await bodies(client, QUEUE) == []
    assert (await client.post(f"/api/transactions/{transaction_id}/abort")).status_code == 204
    assert await bodies(client, QUEUE) == ["x", "y"]


async def test_transaction_usage_pairings_are_409(client: httpx.AsyncClient, queues: tuple[str, str]) -> None:
    transaction_id = await begin(client)
    await send(client, PLAIN, "plain message")
    refused = [
        await client.post(f"/api/queues/{QUEUE}/messages", json={"body": "no transaction"}),
        await client.post(
            f"/api/queues/{PLAIN}/messages", json={"body": "x"}, params={"transaction": "single"}
        ),
        await client.post(
            f"/api/queues/{PLAIN}/messages", json={"body": "x"}, params={"transaction": transaction_id}
        ),
        await client.post(f"/api/queues/{PLAIN}/receive", params={"transaction": transaction_id}),
        await client.post(
            f"/api/queues/{PLAIN}/messages/first/receive", params={"transaction": transaction_id}
        ),
    ]
    for response in refused:
        assert_problem(response, 409, "MQ_ERROR_TRANSACTION_USAGE")
    assert await bodies(client, QUEUE) == []
    assert await bodies(client, PLAIN) == ["plain message"]


async def test_a_plain_receive_from_a_transactional_queue_is_allowed(
    client: httpx.AsyncClient, queues: tuple[str, str]
) -> None:
    await send(client, QUEUE, "anyone", transaction="single")
    message = await receive(client, QUEUE)
    assert message is not None and message["body"] == "anyone"


async def test_an_unknown_transaction_is_409_sequence_and_stores_nothing(
    client: httpx.AsyncClient, queues: tuple[str, str]
) -> None:
    response = await client.post(
        f"/api/queues/{QUEUE}/messages", json={"body": "x"}, params={"transaction": "nope"}
    )
    assert_problem(response, 409, "MQ_ERROR_TRANSACTION_SEQUENCE")
    await send(client, QUEUE, "there", transaction="single")
    response = await client.post(f"/api/queues/{QUEUE}/receive", params={"transaction": "nope"})
    assert_problem(response, 409, "MQ_ERROR_TRANSACTION_SEQUENCE")
    assert await bodies(client, QUEUE) == ["there"]


async def test_a_finished_transaction_takes_no_more_work(
    client: httpx.AsyncClient, queues: tuple[str, str]
) -> None:
    transaction_id = await begin(client)
    assert (await client.post(f"/api/transactions/{transaction_id}/commit")).status_code == 204
    response = await client.post(
        f"/api/queues/{QUEUE}/messages", json={"body": "late"}, params={"transaction": transaction_id}
    )
    assert_problem(response, 409, "MQ_ERROR_TRANSACTION_SEQUENCE")
    assert await bodies(client, QUEUE) == []


async def test_an_idle_transaction_is_no_longer_shown_or_usable(
    client: httpx.AsyncClient, clock: SettableClock, queues: tuple[str, str]
) -> None:
    transaction_id = await begin(client)
    await send(client, QUEUE, "in flight", transaction=transaction_id)
    clock.advance(61)
    assert_problem(
        await client.get(f"/api/transactions/{transaction_id}"), 409, "MQ_ERROR_TRANSACTION_SEQUENCE"
    )
    response = await client.post(
        f"/api/queues/{QUEUE}/messages", json={"body": "late"}, params={"transaction": transaction_id}
    )
    assert_problem(response, 409, "MQ_ERROR_TRANSACTION_SEQUENCE")


async def test_an_idle_transaction_cannot_be_committed_after_its_timeout(
    client: httpx.AsyncClient, clock: SettableClock, queues: tuple[str, str]
) -> None:
    transaction_id = await begin(client)
    await send(client, QUEUE, "in flight", transaction=transaction_id)
    clock.advance(61)
    response = await client.post(f"/api/transactions/{transaction_id}/commit")
    assert_problem(response, 409, "MQ_ERROR_TRANSACTION_SEQUENCE")
    assert await bodies(client, QUEUE) == []  # aborted, whatever was asked
    assert json_of(await client.get(f"/api/queues/{QUEUE}"))["message_count"] == 0


async def test_a_single_message_transaction_receive_takes_the_message(
    client: httpx.AsyncClient, queues: tuple[str, str]
) -> None:
    await send(client, QUEUE, "atomic", transaction="single")
    message = await receive(client, QUEUE, transaction="single")
    assert message is not None and message["body"] == "atomic"
    assert await bodies(client, QUEUE) == []


@pytest.mark.parametrize("raw", [False, True])
async def test_an_empty_transaction_parameter_means_none(
    client: httpx.AsyncClient, queues: tuple[str, str], raw: bool
) -> None:
    # Was: `?transaction=` was taken as the transaction ID "" (409 on a plain queue).
    url = f"/api/queues/{PLAIN}"
    if raw:
        sent = await client.post(f"{url}/messages?transaction=", content=b"outside")
    else:
        sent = await client.post(f"{url}/messages?transaction=", json={"body": "outside"})
    assert json_of(sent, 201)["transaction"] is None
    received = await client.post(f"{url}/receive?transaction=")
    assert json_of(received, 200)["body"] == "outside"
    peeked = await client.get(f"{url}/messages/first?transaction=")
    assert peeked.status_code == 404
