"""Receipts the gateway originates as an SRMP receiver: stream receipts (reference §4.3) and
final receipts of transactional messages (§4.4), and what it does as the sender when a final
receipt comes back. Background sending is off in the integration app: each test runs the
sending steps itself, through a client that records what would be POSTed."""

from __future__ import annotations

import asyncio
import dataclasses
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from fastapi import FastAPI

from app.outbound.client import PostResult, SrmpClient
from app.outbound.delivery import OutgoingDelivery
from app.outbound.receipts import StreamReceiptSender
from app.settings import Settings
from qm.clock import SettableClock
from qm.outbound import Verdict
from soap import SrmpEnvelope, TimerMapping, build_request, parse_request
from soap.envelope import CommitmentReceipt, Msmq, Path, Properties, StreamReceipt
from soap.ids import MessageId, StreamId
from soap.times import SrmpTime
from tests.integration.support import create_queue, gateway_of, send
from tests.integration.test_metrics import scrape, value
from tests.srmp_messages import HOUR_S, new_stream_id, stream_request

QUEUE = "private$/orders_tx"
TO = "http://localhost/msmq/private$/orders_tx"
RECEIPTS = "http://sender.example/msmq/private$/order_queue$"
DEADLETTER = 1

pytestmark = pytest.mark.anyio
Outcome = Callable[[httpx.AsyncClient, FastAPI, SettableClock], Awaitable[None]]


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


@pytest.fixture(autouse=True)
def quiet_senders(app: FastAPI) -> None:
    """The background senders start a pass whenever `outbound_work` is set, and a pass of
    theirs would race the test's own: they keep waiting on an event nobody sets any more."""
    gateway_of(app).manager.outbound_work = asyncio.Event()


async def post_stream_message(
    client: httpx.AsyncClient,
    stream: StreamId,
    current: int,
    receipts_to: str | None = None,
    dead_letter: bool = False,
) -> None:
    content_type, body = stream_request(TO, stream, current, receipts_to=receipts_to, dead_letter=dead_letter)
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


# -- final receipts, receiving side (reference §4.4) ----------------------------------------


async def receive_one(client: httpx.AsyncClient, app: FastAPI, clock: SettableClock) -> None:
    response = await client.post(f"/api/queues/{QUEUE}/receive")
    assert response.status_code == 200, response.text


async def purge(client: httpx.AsyncClient, app: FastAPI, clock: SettableClock) -> None:
    assert (await client.post(f"/api/queues/{QUEUE}/purge")).status_code == 200


async def expire(client: httpx.AsyncClient, app: FastAPI, clock: SettableClock) -> None:
    clock.advance(3 * HOUR_S)  # past the TTBR (2 h: `<TTrq>` under the default mapping)
    assert await gateway_of(app).manager.expire_due() == 1


async def delete_queue(client: httpx.AsyncClient, app: FastAPI, clock: SettableClock) -> None:
    assert (await client.delete(f"/api/queues/{QUEUE}")).status_code == 200


OUTCOMES = [
    pytest.param(receive_one, 0x4000, True, id="received"),
    pytest.param(purge, 0xC001, False, id="purged"),
    pytest.param(expire, 0xC002, False, id="expired"),
    pytest.param(delete_queue, 0xC000, False, id="queue-deleted"),
]


async def deliver_outgoing(app: FastAPI, recording: RecordingClient) -> list[tuple[str, SrmpEnvelope]]:
    """One pass of the outgoing queues' delivery loop; what it POSTed, as the receiver parses it."""
    already = len(recording.posted)
    await OutgoingDelivery(gateway_of(app).outgoing, recording, TimerMapping.SDK).send_due()
    return [(url, round_trip(envelope)) for url, envelope in recording.posted[already:]]


def round_trip(envelope: SrmpEnvelope) -> SrmpEnvelope:
    content_type, body = build_request(envelope)
    return parse_request(body, content_type)


@pytest.mark.parametrize(("outcome", "message_class", "positive"), OUTCOMES)
async def test_a_transactional_message_with_deadletter_reports_its_outcome_to_the_stream_sender(
    app: FastAPI,
    client: httpx.AsyncClient,
    clock: SettableClock,
    recording: RecordingClient,
    outcome: Outcome,
    message_class: int,
    positive: bool,
) -> None:
    gateway = gateway_of(app)
    await create_queue(client, QUEUE, transactional=True)
    stream = new_stream_id()
    await post_stream_message(client, stream, 1, receipts_to=RECEIPTS, dead_letter=True)
    [stored] = (await client.get(f"/api/queues/{QUEUE}/messages")).json()["messages"]
    assert await deliver_outgoing(app, recording) == []  # nothing to report yet
    await outcome(client, app, clock)
    [(url, receipt)] = await deliver_outgoing(app, recording)
    assert (
        url.casefold() == receipt.path.to.casefold() == RECEIPTS.casefold()
    )  # scheme as format names write it
    assert receipt.path.rev_via == TO
    assert receipt.msmq is not None and receipt.msmq.message_class == message_class
    assert receipt.msmq.source_qm_guid == gateway.manager.guid
    assert receipt.stream_receipt is not None
    assert (receipt.stream_receipt.stream_id, receipt.stream_receipt.last_ordinal) == (stream, 1)
    assert receipt.commitment_receipt is not None
    assert receipt.commitment_receipt.positive is positive
    assert receipt.commitment_receipt.id.text == stored["message_id"]
    assert receipt.body is None
    assert await deliver_outgoing(app, recording) == []  # sent once: it left its outgoing queue


async def test_no_final_receipt_without_deadletter(
    app: FastAPI, client: httpx.AsyncClient, clock: SettableClock, recording: RecordingClient
) -> None:
    await create_queue(client, QUEUE, transactional=True)
    await post_stream_message(client, new_stream_id(), 1, receipts_to=RECEIPTS)
    await post_stream_message(client, new_stream_id(), 1, receipts_to=RECEIPTS)
    await receive_one(client, app, clock)
    await purge(client, app, clock)
    assert await deliver_outgoing(app, recording) == []
    assert await gateway_of(app).outgoing.all() == []


async def test_a_final_receipt_goes_only_to_an_allowed_host(
    app: FastAPI, client: httpx.AsyncClient, clock: SettableClock, recording: RecordingClient
) -> None:
    """`sendReceiptsTo` comes from the sender: outside MSMQGW_SRMP_OUTBOUND_HOSTS the receipt
    makes no outgoing queue and is dropped where it is made, counted (issue 18 item 7)."""
    await create_queue(client, QUEUE, transactional=True)
    elsewhere = "http://internal.example/msmq/private$/order_queue$"
    await post_stream_message(client, new_stream_id(), 1, receipts_to=elsewhere, dead_letter=True)
    await receive_one(client, app, clock)
    assert await deliver_outgoing(app, recording) == []
    assert await gateway_of(app).outgoing.all() == []
    samples = await scrape(client)
    dropped = "msmqgw_remote_acknowledgments_dropped_total"
    assert value(samples, dropped, kind="final-receipt", reason="not_allowed") == 1


# -- final receipts, sending side ------------------------------------------------------------

REMOTE = "DIRECT=HTTP://remote.example/msmq/private$/orders_tx"
REMOTE_QM = uuid.UUID("7e57ab1e-0000-4000-8000-00000000b0b0")
DEADXACT = "system$;deadxact"


async def send_to_remote(
    app: FastAPI, client: httpx.AsyncClient, recording: RecordingClient, journal: int
) -> tuple[dict[str, Any], SrmpEnvelope]:
    """A single-message transaction to a remote transactional queue, sent once by the delivery
    loop: what the API answered and the envelope that went out (a stream message)."""
    sent = await send(client, quote(REMOTE, safe=""), "tx body", "single", label="tx", journal=journal)
    [(_, posted)] = await deliver_outgoing(app, recording)
    assert posted.stream is not None and posted.path.id is not None
    assert posted.path.id.text == sent["message_id"]
    return sent, posted


async def post_receipt(
    client: httpx.AsyncClient, posted: SrmpEnvelope, message_class: int | None = None, positive: bool = False
) -> None:
    """What the receiver POSTs back: a stream receipt covering `posted`; with `message_class`
    a final receipt (reference §4.4), `<commitmentReceipt>` included."""
    assert posted.stream is not None and posted.stream.send_receipts_to is not None
    assert posted.path.id is not None
    now = int(time.time())
    commitment = None
    if message_class is not None:
        commitment = CommitmentReceipt(SrmpTime.from_epoch(now), positive, posted.path.id)
    envelope = SrmpEnvelope(
        path=Path(action="MSMQ:tx", to=posted.stream.send_receipts_to, id=MessageId(REMOTE_QM, 77)),
        properties=Properties(SrmpTime.from_epoch(now + HOUR_S), SrmpTime.from_epoch(now)),
        stream_receipt=StreamReceipt(posted.stream.stream_id, posted.stream.current),
        commitment_receipt=commitment,
        msmq=Msmq(
            message_class=0xFF if message_class is None else message_class,
            priority=0,
            body_type=0,
            source_qm_guid=REMOTE_QM,
            ttrq=SrmpTime.from_epoch(now + HOUR_S),
        ),
    )
    content_type, body = build_request(envelope)
    response = await client.post(
        "/msmq/private$/order_queue$", content=body, headers={"Content-Type": content_type}
    )
    assert response.status_code == 200


async def outgoing_count(app: FastAPI) -> int:
    [outgoing] = await gateway_of(app).outgoing.all()
    return outgoing.queue.message_count


async def dead_xact(client: httpx.AsyncClient) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = (await client.get(f"/api/queues/{DEADXACT}/messages")).json()["messages"]
    return messages


@pytest.mark.parametrize("message_class", [0xC001, 0xC002, 0xC000, 0x8001])
async def test_a_negative_final_receipt_moves_the_message_to_the_transactional_dead_letter_queue(
    app: FastAPI,
    client: httpx.AsyncClient,
    clock: SettableClock,
    recording: RecordingClient,
    message_class: int,
) -> None:
    sent, posted = await send_to_remote(app, client, recording, journal=DEADLETTER)
    await post_receipt(client, posted)  # the stream receipt: it reached the queue
    assert await outgoing_count(app) == 1  # kept for its final receipt...
    clock.advance(gateway_of(app).settings.srmp_stream_resend_s + 1)
    assert await deliver_outgoing(app, recording) == []  # ...and never resent
    await post_receipt(client, posted, message_class)
    assert await outgoing_count(app) == 0
    [dead] = await dead_xact(client)
    assert (dead["message_id"], dead["message_class"], dead["body"]) == (
        sent["message_id"],
        message_class,
        "tx body",
    )
    await post_receipt(client, posted, message_class)  # a resent receipt settles nothing more
    assert len(await dead_xact(client)) == 1


async def test_a_positive_final_receipt_settles_the_message(
    app: FastAPI, client: httpx.AsyncClient, recording: RecordingClient
) -> None:
    _, posted = await send_to_remote(app, client, recording, journal=DEADLETTER)
    await post_receipt(client, posted, 0x4000, positive=True)
    assert await outgoing_count(app) == 0
    assert await dead_xact(client) == []


async def test_without_deadletter_the_stream_receipt_settles_and_a_final_receipt_is_dropped(
    app: FastAPI, client: httpx.AsyncClient, recording: RecordingClient
) -> None:
    _, posted = await send_to_remote(app, client, recording, journal=0)
    await post_receipt(client, posted)
    assert await outgoing_count(app) == 0
    await post_receipt(client, posted, 0xC001)  # unknown original: accepted, nothing happens
    assert await dead_xact(client) == []


# -- stream receipts for streams this gateway does not send (reference §4.3, §4.7) -----------


async def post_stray_receipt(client: httpx.AsyncClient, stream: StreamId, last_ordinal: int = 2) -> int:
    """A stream receipt (class ORDER_ACK) for `stream`, addressed as vector 09 is."""
    now = int(time.time())
    envelope = SrmpEnvelope(
        path=Path(action="MSMQ:QM Ordering Ack", to=RECEIPTS_HERE, id=MessageId(REMOTE_QM, 31337)),
        properties=Properties(SrmpTime.from_epoch(now + HOUR_S), SrmpTime.from_epoch(now)),
        stream_receipt=StreamReceipt(stream, last_ordinal),
        msmq=Msmq(
            message_class=0xFF,
            priority=0,
            body_type=0,
            source_qm_guid=REMOTE_QM,
            ttrq=SrmpTime.from_epoch(now + HOUR_S),
        ),
    )
    content_type, body = build_request(envelope)
    response = await client.post(
        "/msmq/private$/order_queue$", content=body, headers={"Content-Type": content_type}
    )
    return response.status_code


RECEIPTS_HERE = "http://localhost/msmq/private$/order_queue$"


async def stray_receipts(client: httpx.AsyncClient) -> int:
    counted: int = (await client.get("/api/srmp/statistics")).json()["stray_stream_receipts"]
    return counted


async def test_a_receipt_for_a_stream_not_sent_here_is_answered_200_and_dropped(
    client: httpx.AsyncClient,
) -> None:
    """No `private$/order_queue$` here: a stray or late ORDER_ACK is still 200, creates
    nothing and is counted."""
    assert await post_stray_receipt(client, new_stream_id()) == 200
    assert (await client.get("/api/queues/private$/order_queue$")).status_code == 404
    assert await stray_receipts(client) == 1


async def test_a_stray_receipt_is_dropped_even_where_its_queue_exists(client: httpx.AsyncClient) -> None:
    await create_queue(client, "private$/order_queue$")
    assert await post_stray_receipt(client, new_stream_id()) == 200
    listed = (await client.get("/api/queues/private$/order_queue$/messages")).json()["messages"]
    assert listed == []
    assert await stray_receipts(client) == 1


# -- forged stream receipts (issue 18 item 7) -------------------------------------------------


class FailingClient(RecordingClient):
    """The destination is down: every POST is answered 503 (the message is not delivered)."""

    async def post(self, url: str, envelope: SrmpEnvelope) -> PostResult:
        self.posted.append((url, envelope))
        return PostResult(Verdict.RETRY, 503)


async def test_a_receipt_settles_no_ordinal_that_was_not_answered_2xx(
    app: FastAPI, client: httpx.AsyncClient, recording: RecordingClient
) -> None:
    """The message got its ordinal and went out, but the receiver never took it (503): a
    receipt naming the stream and that ordinal is forged, and must not remove the message."""
    failing = FailingClient()
    await send(client, quote(REMOTE, safe=""), "tx body", "single", label="tx")
    await OutgoingDelivery(gateway_of(app).outgoing, failing, TimerMapping.SDK).send_due()
    [(_, posted)] = failing.posted
    assert posted.stream is not None
    await post_receipt(client, round_trip(posted))
    assert await outgoing_count(app) == 1
    await failing.close()


async def test_a_receipt_beyond_the_last_ordinal_sent_does_not_move_the_stream(
    app: FastAPI, client: httpx.AsyncClient, clock: SettableClock, recording: RecordingClient
) -> None:
    """A receipt claiming ordinals never sent acknowledges only those that were: the next
    message continues the stream with no gap declared."""
    _, posted = await send_to_remote(app, client, recording, journal=0)
    assert posted.stream is not None
    forged = dataclasses.replace(posted, stream=dataclasses.replace(posted.stream, current=1000))
    await post_receipt(client, forged)
    assert await outgoing_count(app) == 0  # ordinal 1 was sent and answered 200: settled
    await send(client, quote(REMOTE, safe=""), "second", "single", label="tx")
    [(_, second)] = await deliver_outgoing(app, recording)
    assert second.stream is not None
    assert (second.stream.current, second.stream.previous) == (2, None)


async def test_a_final_receipt_settles_no_message_the_receiver_never_took(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    failing = FailingClient()
    await send(client, quote(REMOTE, safe=""), "tx body", "single", label="tx", journal=DEADLETTER)
    await OutgoingDelivery(gateway_of(app).outgoing, failing, TimerMapping.SDK).send_due()
    [(_, posted)] = failing.posted
    await post_receipt(client, round_trip(posted), 0xC001)
    assert await outgoing_count(app) == 1
    assert await dead_xact(client) == []
    await failing.close()
