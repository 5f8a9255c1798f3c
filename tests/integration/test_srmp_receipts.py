"""Receipts the gateway originates as an SRMP receiver: stream receipts (reference §4.3) and
final receipts of transactional messages (§4.4), and what it does as the sender when a final
receipt comes back. Background sending is off in the integration app: each test runs the
sending steps itself, through a client that records what would be POSTed."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from app.gateway import Gateway
from app.outbound.client import PostResult, SrmpClient
from app.outbound.receipts import StreamReceiptSender
from app.settings import Settings
from qm.clock import SettableClock
from qm.outbound import Verdict
from soap import SrmpEnvelope, TimerMapping
from soap.ids import MessageId, StreamId
from tests.integration.support import create_queue, send
from tests.srmp_messages import new_stream_id, stream_request

QUEUE = "private$/orders_tx"
TO = "http://localhost/msmq/private$/orders_tx"
RECEIPTS = "http://sender.example/msmq/private$/order_queue$"

pytestmark = pytest.mark.anyio


class RecordingClient(SrmpClient):
    """Answers every POST 200 and keeps what was POSTed (the HTTP side only; the store is real)."""

    def __init__(self) -> None:
        super().__init__(timeout_s=1.0)
        self.posted: list[tuple[str, SrmpEnvelope]] = []

    async def post(self, url: str, envelope: SrmpEnvelope) -> PostResult:
        self.posted.append((url, envelope))
        return PostResult(Verdict.DELIVERED, 200)


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"srmp_outbound_hosts": "sender.example,remote.example"})


@pytest.fixture
async def recording() -> AsyncIterator[RecordingClient]:
    client = RecordingClient()
    yield client
    await client.close()


def gateway_of(app: FastAPI) -> Gateway:
    """The running app's objects, its background senders quiet: they start a pass whenever
    `outbound_work` is set, and a pass of theirs would race the test's own."""
    gateway: Gateway = app.state.gateway
    gateway.manager.outbound_work = asyncio.Event()
    return gateway


async def post_stream_message(
    client: httpx.AsyncClient, stream: StreamId, current: int, receipts_to: str | None = None
) -> None:
    content_type, body = stream_request(TO, stream, current, receipts_to=receipts_to)
    response = await client.post(
        "/msmq/private$/orders_tx", content=body, headers={"Content-Type": content_type}
    )
    assert response.status_code == 200


async def test_stream_receipts_take_their_ids_from_the_message_counter(
    app: FastAPI, client: httpx.AsyncClient, clock: SettableClock, recording: RecordingClient
) -> None:
    """Receipt IDs are `{our guid}\\n` with n from the counter that numbers stored messages:
    unique and growing, so a receiver's duplicate check never drops a later receipt."""
    gateway = gateway_of(app)
    await create_queue(client, QUEUE, transactional=True)
    await create_queue(client, "private$/plain")
    sender = StreamReceiptSender(gateway.manager, recording, TimerMapping.SDK)
    sequences = []
    for _ in range(3):
        stream = new_stream_id()
        await post_stream_message(client, stream, 1, receipts_to=RECEIPTS)
        clock.advance(1)
        assert await sender.send_due() == 1
        before = MessageId.from_text((await send(client, "private$/plain", "x"))["message_id"])
        receipt_id = recording.posted[-1][1].path.id
        assert receipt_id is not None and receipt_id.guid == gateway.manager.guid
        sequences.append(receipt_id.sequence)
        assert receipt_id.sequence < before.sequence
    assert sequences == sorted(set(sequences))
