"""Stream receipts in the metrics: those owed (from the store) and those sent (by result)."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI

from app.outbound.receipts import StreamReceiptSender
from qm.clock import SettableClock
from soap import TimerMapping
from tests.integration.support import create_queue, gateway_of
from tests.integration.test_metrics import scrape, value
from tests.integration.test_srmp_receipts import (
    QUEUE,
    RECEIPTS,
    RecordingClient,
    post_stream_message,
    quiet_senders,
    recording,
    settings,
)
from tests.srmp_messages import new_stream_id

pytestmark = pytest.mark.anyio
__all__ = ["quiet_senders", "recording", "settings"]  # the fixtures of test_srmp_receipts.py


async def test_receipts_owed_and_sent(
    app: FastAPI, client: httpx.AsyncClient, clock: SettableClock, recording: RecordingClient
) -> None:
    gateway = gateway_of(app)
    await create_queue(client, QUEUE, transactional=True)
    sender = StreamReceiptSender(gateway.manager, recording, TimerMapping.SDK, gateway.metrics.stream_receipt)
    await post_stream_message(client, new_stream_id(), 1, receipts_to=RECEIPTS)
    await post_stream_message(client, new_stream_id(), 1, receipts_to="http://elsewhere.example/msmq/x")
    clock.advance(1)

    owed = await scrape(client)
    assert await sender.send_due() == 1
    after = await scrape(client)

    assert value(owed, "msmqgw_stream_receipts_owed") == 2
    assert value(after, "msmqgw_stream_receipts_owed") == 0
    assert value(after, "msmqgw_stream_receipts_sent_total", result="sent") == 1
    assert value(after, "msmqgw_stream_receipts_sent_total", result="not_allowed") == 1
    assert value(after, "msmqgw_srmp_requests_total", status="200", outcome="stored") == 2
