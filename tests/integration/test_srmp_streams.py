"""Transactional SRMP streams (reference §4.2): each ordinal accepted once and in order, with the
stream's state committed with its message, so it survives a restart."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI

from app.main import create_app
from app.settings import Settings
from qm.clock import SettableClock
from soap.ids import StreamId
from tests.integration.support import bodies, create_queue
from tests.srmp_messages import new_stream_id, stream_request

QUEUE = "private$/orders_tx"
TO = "http://localhost/msmq/private$/orders_tx"
RECEIPTS = "http://sender.example/msmq/private$/order_queue$"

pytestmark = pytest.mark.anyio


async def post(
    client: httpx.AsyncClient,
    stream: StreamId,
    current: int,
    *,
    previous: int | None = None,
    start: bool = False,
) -> int:
    content_type, body = stream_request(
        TO, stream, current, previous=previous, receipts_to=RECEIPTS if start else None
    )
    response = await client.post(
        "/msmq/private$/orders_tx", content=body, headers={"Content-Type": content_type}
    )
    assert response.content == b""
    return response.status_code


@pytest.fixture
async def tx_queue(client: httpx.AsyncClient) -> None:
    await create_queue(client, QUEUE, transactional=True)


@pytest.mark.usefixtures("tx_queue")
async def test_stream_messages_are_accepted_once_and_in_order(client: httpx.AsyncClient) -> None:
    stream = new_stream_id()
    assert await post(client, stream, 1, start=True) == 200
    assert await post(client, stream, 3) == 200  # out of order: discarded, the sender resends
    assert await post(client, stream, 2) == 200
    assert await post(client, stream, 2) == 200  # duplicate
    assert await post(client, stream, 3) == 200
    assert await bodies(client, QUEUE) == ["body-1", "body-2", "body-3"]


@pytest.mark.usefixtures("tx_queue")
async def test_a_stream_starts_only_with_its_first_message(client: httpx.AsyncClient) -> None:
    stream = new_stream_id()
    assert await post(client, stream, 2) == 200
    assert await post(client, stream, 1) == 200  # no <start>: not a stream the receiver knows
    assert await bodies(client, QUEUE) == []
    assert await post(client, stream, 1, start=True) == 200
    assert await bodies(client, QUEUE) == ["body-1"]


@pytest.mark.usefixtures("tx_queue")
async def test_a_declared_gap_is_accepted(client: httpx.AsyncClient) -> None:
    stream = new_stream_id()
    assert await post(client, stream, 1, start=True) == 200
    assert await post(client, stream, 4, previous=2) == 200  # previous above the last accepted
    assert await post(client, stream, 4, previous=1) == 200
    assert await post(client, stream, 5) == 200
    assert await bodies(client, QUEUE) == ["body-1", "body-4", "body-5"]


@pytest.mark.usefixtures("tx_queue")
async def test_streams_are_independent(client: httpx.AsyncClient) -> None:
    first, second = new_stream_id(), new_stream_id()
    assert await post(client, first, 1, start=True) == 200
    assert await post(client, second, 1, start=True) == 200
    assert await post(client, second, 2) == 200
    assert await post(client, first, 2) == 200
    assert len(await bodies(client, QUEUE)) == 4


async def test_stream_state_survives_a_restart(settings: Settings, clock: SettableClock) -> None:
    stream = new_stream_id()

    async def session(steps: list[tuple[int, bool]]) -> list[str]:
        application: FastAPI = create_app(settings, clock)
        async with application.router.lifespan_context(application):
            transport = httpx.ASGITransport(app=application)
            async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
                if steps[0][1]:  # the first session creates the queue
                    await create_queue(client, QUEUE, transactional=True)
                for current, start in steps:
                    assert await post(client, stream, current, start=start) == 200
                return await bodies(client, QUEUE)

    assert await session([(1, True), (2, False)]) == ["body-1", "body-2"]
    assert await session([(2, False), (3, False)]) == ["body-1", "body-2", "body-3"]


@pytest.mark.usefixtures("tx_queue")
async def test_statistics_count_what_the_srmp_route_did(client: httpx.AsyncClient) -> None:
    stream = new_stream_id()
    assert await post(client, stream, 1, start=True) == 200
    assert await post(client, stream, 1, start=True) == 200  # duplicate
    # <expiresAt> (read as the TTRQ deadline) later than <TTrq> (the TTBR deadline): the other layout
    content_type, body = stream_request(TO, stream, 2, expires_after_s=7200, ttrq_after_s=3600)
    answer = await client.post(
        "/msmq/private$/orders_tx", content=body, headers={"Content-Type": content_type}
    )
    assert answer.status_code == 200
    refused = await client.post(
        "/msmq/private$/orders_tx", content=b"<x/>", headers={"Content-Type": "text/xml"}
    )
    assert refused.status_code == 400
    response = await client.get("/api/srmp/statistics")
    assert response.status_code == 200
    assert response.json() == {
        "stored": 2,
        "duplicates": 1,
        "stream_receipts": 0,
        "stray_stream_receipts": 0,
        "refused": 1,
        "retry_later": 0,
        "timer_layout_mismatches": 1,
        "access_denied": 0,
    }
