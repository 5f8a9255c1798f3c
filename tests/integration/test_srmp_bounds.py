"""What anonymous SRMP senders can make the gateway keep (issue 18 item 7): incoming streams
per sender are limited and idle stream state is forgotten; outgoing queues are listed page by
page, can be deleted, and are removed by housekeeping once empty and idle."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from fastapi import FastAPI

from app.settings import Settings
from qm.clock import SettableClock
from soap.ids import StreamId
from tests.integration.support import assert_problem, create_queue, gateway_of, json_of, send
from tests.srmp_messages import new_stream_id, stream_request

pytestmark = pytest.mark.anyio
QUEUE = "private$/orders_tx"
TO = "http://localhost/msmq/private$/orders_tx"
RECEIPTS = "http://sender.example/msmq/private$/order_queue$"
DAY_S = 86400


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(
        update={
            "srmp_outbound_hosts": "remote.example",
            "srmp_max_streams_per_sender": 2,
            "srmp_max_streams": 3,
            "srmp_stream_idle_s": 7 * DAY_S,
            "srmp_outgoing_idle_s": DAY_S,
        }
    )


@pytest.fixture(autouse=True)
def quiet_senders(app: FastAPI) -> None:
    """No background delivery pass: the outgoing queues keep their messages."""
    gateway_of(app).manager.outbound_work = asyncio.Event()


async def post_stream(client: httpx.AsyncClient, stream: StreamId, current: int = 1) -> int:
    content_type, body = stream_request(TO, stream, current, receipts_to=RECEIPTS if current == 1 else None)
    response = await client.post(
        "/msmq/private$/orders_tx", content=body, headers={"Content-Type": content_type}
    )
    return response.status_code


def other_sender(index: int = 0) -> StreamId:
    return StreamId(uuid.UUID(int=0x5B0C7E1A_2F3D_4C8E_9A61_0D4F2B7C8E93 + index), new_stream_id().sequence)


async def test_a_sender_opens_at_most_the_configured_number_of_streams(client: httpx.AsyncClient) -> None:
    await create_queue(client, QUEUE, transactional=True)
    first, second = new_stream_id(), new_stream_id()
    assert [await post_stream(client, first), await post_stream(client, second)] == [200, 200]
    assert await post_stream(client, new_stream_id()) == 503  # retried later, nothing stored
    assert await post_stream(client, first, 2) == 200  # its open streams go on
    assert await post_stream(client, other_sender()) == 200  # other senders are not limited by it
    listed = json_of(await client.get(f"/api/queues/{QUEUE}/messages"))["messages"]
    assert len(listed) == 4


async def test_all_senders_together_open_at_most_the_configured_number_of_streams(
    client: httpx.AsyncClient,
) -> None:
    """Sender GUIDs cost nothing to make up: a total bounds them all."""
    await create_queue(client, QUEUE, transactional=True)
    assert [await post_stream(client, other_sender(index)) for index in range(3)] == [200, 200, 200]
    assert await post_stream(client, other_sender(3)) == 503


async def test_idle_stream_state_is_forgotten(
    app: FastAPI, client: httpx.AsyncClient, clock: SettableClock
) -> None:
    await create_queue(client, QUEUE, transactional=True)
    for _ in range(2):
        assert await post_stream(client, new_stream_id()) == 200
    gateway = gateway_of(app)
    clock.advance(1)  # the receipts are due
    for due in await gateway.manager.due_stream_receipts():
        await gateway.manager.stream_receipt_sent(due)  # nothing owed to the sender any more
    clock.advance(7 * DAY_S + 1)
    await gateway.manager.release_expired()
    assert await post_stream(client, new_stream_id()) == 200  # room again


async def outgoing_page(client: httpx.AsyncClient, **params: Any) -> dict[str, Any]:
    page: dict[str, Any] = json_of(await client.get("/api/outgoing-queues", params=params))
    return page


async def send_remote(client: httpx.AsyncClient, number: int) -> None:
    remote = f"DIRECT=HTTP://remote.example/msmq/private$/q{number}"
    await send(client, quote(remote, safe=""), f"to {number}")


async def test_outgoing_queues_are_listed_page_by_page(client: httpx.AsyncClient) -> None:
    for number in range(3):
        await send_remote(client, number)
    first = await outgoing_page(client, limit=2)
    assert len(first["outgoing_queues"]) == 2 and first["next_after"] is not None
    rest = await outgoing_page(client, limit=2, after=first["next_after"])
    assert len(rest["outgoing_queues"]) == 1 and rest["next_after"] is None
    ids = [queue["id"] for queue in first["outgoing_queues"] + rest["outgoing_queues"]]
    assert ids == sorted(set(ids))


async def test_an_outgoing_queue_with_messages_is_deleted_only_with_purge(client: httpx.AsyncClient) -> None:
    await send_remote(client, 1)
    [queue] = (await outgoing_page(client))["outgoing_queues"]
    refused = await client.delete(f"/api/outgoing-queues/{queue['id']}")
    assert_problem(refused, 409, "MQ_ERROR_ILLEGAL_OPERATION")
    assert (await outgoing_page(client))["outgoing_queues"][0]["message_count"] == 1
    deleted = json_of(await client.delete(f"/api/outgoing-queues/{queue['id']}", params={"purge": "true"}))
    assert deleted == {"deleted": queue["id"], "purged": 1}
    assert (await outgoing_page(client))["outgoing_queues"] == []
    assert_problem(
        await client.delete(f"/api/outgoing-queues/{queue['id']}"), 404, "MQ_ERROR_QUEUE_NOT_FOUND"
    )


async def test_housekeeping_removes_empty_idle_outgoing_queues_only(
    app: FastAPI, client: httpx.AsyncClient, clock: SettableClock
) -> None:
    await send_remote(client, 1)
    await send_remote(client, 2)
    [emptied, waiting] = (await outgoing_page(client))["outgoing_queues"]
    assert (await client.post(f"/api/outgoing-queues/{emptied['id']}/purge")).status_code == 200
    await gateway_of(app).manager.release_expired()
    assert len((await outgoing_page(client))["outgoing_queues"]) == 2  # not idle long enough
    clock.advance(DAY_S + 1)
    await gateway_of(app).manager.release_expired()
    assert [queue["id"] for queue in (await outgoing_page(client))["outgoing_queues"]] == [waiting["id"]]
    await send_remote(client, 1)  # used again: made again
    assert len((await outgoing_page(client))["outgoing_queues"]) == 2
