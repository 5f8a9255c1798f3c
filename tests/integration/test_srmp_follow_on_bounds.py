"""Acknowledgments and final receipts that anonymous SRMP senders ask for (issue 18 item 7):
a sender-supplied address the outbound allow-list refuses creates nothing, and the outgoing
queues made for one source address, and for all anonymous senders together, are limited."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from fastapi import FastAPI

from app.main import create_app
from app.settings import Settings
from qm.clock import SettableClock
from tests.integration.support import create_queue, gateway_of, json_of, send
from tests.integration.test_metrics import scrape, value
from tests.srmp_messages import new_stream_id, plain_request, stream_request

pytestmark = pytest.mark.anyio
QUEUE = "private$/orders"
TO = "http://localhost/msmq/private$/orders"
DAY_S = 86400
DROPPED = "msmqgw_remote_acknowledgments_dropped_total"


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(
        update={
            "srmp_outbound_hosts": "remote.example",
            "srmp_max_outgoing_queues_per_source": 2,
            "srmp_max_outgoing_queues": 5,
            "srmp_outgoing_idle_s": DAY_S,
        }
    )


@pytest.fixture(autouse=True)
def quiet_senders(app: FastAPI) -> None:
    """No background delivery pass: the outgoing queues keep their messages."""
    gateway_of(app).manager.outbound_work = asyncio.Event()


@asynccontextmanager
async def sender_at(app: FastAPI, address: str) -> AsyncIterator[httpx.AsyncClient]:
    """A client whose requests come from `address` (an SRMP sender on the network)."""
    transport = httpx.ASGITransport(app=app, client=(address, 40000))
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
        yield http


async def post_acked(
    sender: httpx.AsyncClient, sequence: int, admin_url: str, delivery_receipt: bool = True
) -> int:
    """A message asking for acknowledgments at `admin_url`; the status answered."""
    content_type, body = plain_request(TO, sequence, admin_url=admin_url, delivery_receipt=delivery_receipt)
    response = await sender.post(
        "/msmq/private$/orders", content=body, headers={"Content-Type": content_type}
    )
    return response.status_code


async def outgoing_names(client: httpx.AsyncClient) -> list[str]:
    names: list[str] = []
    after: str | None = None
    while True:
        params: dict[str, Any] = {"limit": 1000} | ({} if after is None else {"after": after})
        page = json_of(await client.get("/api/outgoing-queues", params=params))
        names += [queue["url"] for queue in page["outgoing_queues"]]
        after = page["next_after"]
        if after is None:
            return names


def refused_addresses(count: int) -> list[str]:
    """Admin queue URLs the allow-list (`remote.example`, default port) refuses, in the forms
    an attacker would try: other hosts, other ports, other schemes, the allowed name with a
    trailing dot, user information in front of another host, IPv6 and IPv4 literals, an
    internationalised name and its punycode."""
    forms = (
        "http://host{i}.example/msmq/private$/acks",
        "http://remote.example:{port}/msmq/private$/acks",
        "https://REMOTE.example:{port}/msmq/private$/acks",
        "http://remote.example./msmq/private$/a{i}",
        "http://remote.example@10.0.{hi}.{lo}/msmq/private$/acks",
        "http://[0:0:0:0:0:ffff:a01:{i:x}]:8080/msmq/private$/acks",
        "http://[::ffff:127.0.{hi}.{lo}]/msmq/private$/acks",
        "http://[fd00::{i:x}]:80/msmq/private$/acks",
        "http://xn--bcher-kva{i}.example/msmq/private$/acks",
        "http://bücher{i}.example/msmq/private$/acks",
    )
    return [forms[i % len(forms)].format(i=i, port=1024 + i, hi=i // 256, lo=i % 256) for i in range(count)]


REFUSED_COUNT = 60
"""Each refused form six times, with different hosts, ports and paths, from one source: a form
let through makes outgoing queues up to that source's limit (2 here), which is seen. (It was
1,000 messages, 10 s per store, and showed nothing more.)"""


async def test_acknowledgments_to_refused_addresses_create_no_outgoing_queue(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    await create_queue(client, QUEUE)
    addresses = refused_addresses(REFUSED_COUNT)
    async with sender_at(app, "192.0.2.10") as sender:
        statuses = [await post_acked(sender, i + 1, address) for i, address in enumerate(addresses)]
    assert set(statuses) == {200}  # the messages themselves are stored
    assert await outgoing_names(client) == []
    assert json_of(await client.get(f"/api/queues/{QUEUE}"))["message_count"] == REFUSED_COUNT
    samples = await scrape(client)
    assert value(samples, DROPPED, kind="acknowledgment", reason="not_allowed") == REFUSED_COUNT


async def test_negative_acknowledgments_to_refused_addresses_create_nothing_either(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    """Receive and purge earn their acknowledgments later, outside the sender's request."""
    await create_queue(client, QUEUE)
    async with sender_at(app, "192.0.2.10") as sender:
        for sequence, address in enumerate(refused_addresses(4), start=1):
            assert await post_acked(sender, sequence, address) == 200
    assert (await client.post(f"/api/queues/{QUEUE}/receive")).status_code == 200
    assert (await client.post(f"/api/queues/{QUEUE}/purge")).status_code == 200
    assert await outgoing_names(client) == []
    samples = await scrape(client)
    dropped = value(samples, DROPPED, kind="acknowledgment", reason="not_allowed")
    assert dropped == 4 + 1 + 3  # on arrival, on the receive, on the purge


def allowed_forms(prefix: str) -> list[str]:
    """Distinct outgoing queues for allowed destinations: names differing in case, port
    spelled out, path."""
    return [
        f"http://remote.example/msmq/private$/{prefix}1",
        f"http://remote.example:80/msmq/private$/{prefix}1",
        f"http://REMOTE.example/msmq/private$/{prefix}2",
        f"https://remote.example/msmq/private$/{prefix}3",
        f"http://remote.example/MSMQ/private$/{prefix}4",
        f"http://remote.example/msmq/private$/{prefix}5",
    ]


async def acked_from(app: FastAPI, address: str, admin_urls: Sequence[str], first: int) -> None:
    async with sender_at(app, address) as sender:
        for offset, admin_url in enumerate(admin_urls):
            assert await post_acked(sender, first + offset, admin_url) == 200


async def test_one_source_makes_at_most_its_limit_of_outgoing_queues(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    await create_queue(client, QUEUE)
    await acked_from(app, "192.0.2.10", allowed_forms("a"), 1)
    assert len(await outgoing_names(client)) == 2
    await acked_from(app, "2001:db8:1:2::1", allowed_forms("b"), 100)
    await acked_from(app, "2001:db8:1:2:ffff::1", allowed_forms("c"), 200)  # the same /64
    await acked_from(app, "::ffff:192.0.2.10", allowed_forms("d"), 300)  # the first one again
    assert len(await outgoing_names(client)) == 4
    await acked_from(app, "198.51.100.7", allowed_forms("e"), 400)
    assert len(await outgoing_names(client)) == 5  # all anonymous senders' limit
    samples = await scrape(client)
    assert value(samples, DROPPED, kind="acknowledgment", reason="source_limit") == 4 + 4 + 6 + 6
    assert value(samples, DROPPED, kind="acknowledgment", reason="total_limit") == 5


async def test_existing_outgoing_queues_take_acknowledgments_beyond_the_limit(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    """Only the making of a queue is limited: one already there takes what follows."""
    await create_queue(client, QUEUE)
    forms = allowed_forms("a")[:2]
    await acked_from(app, "192.0.2.10", forms, 1)
    await acked_from(app, "192.0.2.10", forms, 10)
    listed = json_of(await client.get("/api/outgoing-queues"))["outgoing_queues"]
    assert [queue["message_count"] for queue in listed] == [2, 2]


async def test_the_limit_holds_across_gateway_processes_and_restarts(
    app: FastAPI, client: httpx.AsyncClient, settings: Settings, clock: SettableClock
) -> None:
    await create_queue(client, QUEUE)
    await acked_from(app, "192.0.2.10", allowed_forms("a")[:2], 1)
    other = create_app(settings, clock)  # a second process on the same store
    async with other.router.lifespan_context(other):
        gateway_of(other).manager.outbound_work = asyncio.Event()
        await acked_from(other, "192.0.2.10", allowed_forms("b"), 100)
    assert len(await outgoing_names(client)) == 2


async def test_outgoing_queues_removed_when_idle_make_room_again(
    app: FastAPI, client: httpx.AsyncClient, clock: SettableClock
) -> None:
    await create_queue(client, QUEUE)
    await acked_from(app, "192.0.2.10", allowed_forms("a")[:2], 1)
    listed = json_of(await client.get("/api/outgoing-queues"))["outgoing_queues"]
    for queue in listed:
        assert (await client.post(f"/api/outgoing-queues/{queue['id']}/purge")).status_code == 200
    clock.advance(DAY_S + 1)
    await gateway_of(app).manager.release_expired()
    assert await outgoing_names(client) == []
    await acked_from(app, "192.0.2.10", allowed_forms("b")[:1], 100)
    assert len(await outgoing_names(client)) == 1


async def test_operators_sends_are_not_limited(app: FastAPI, client: httpx.AsyncClient) -> None:
    """A principal's REST send to a remote queue is not an anonymous sender's: the limits do
    not apply, and its queues leave the anonymous senders' room alone."""
    await create_queue(client, QUEUE)
    for number in range(6):
        await send(client, quote(f"DIRECT=HTTP://remote.example/msmq/private$/q{number}", safe=""), "x")
    await acked_from(app, "192.0.2.10", allowed_forms("a")[:2], 1)
    assert len(await outgoing_names(client)) == 8


async def test_final_receipts_count_against_the_source_of_their_stream(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    """A stream's `sendReceiptsTo` is the sender's choice too: each stream naming another one
    would need one more outgoing queue for its final receipt (reference §4.4)."""
    await create_queue(client, "private$/orders_tx", transactional=True)
    to = "http://localhost/msmq/private$/orders_tx"
    async with sender_at(app, "192.0.2.10") as sender:
        for number in range(3):
            receipts_to = f"http://remote.example/msmq/private$/order_queue{number}$"
            content_type, body = stream_request(
                to, new_stream_id(), 1, receipts_to=receipts_to, dead_letter=True
            )
            headers = {"Content-Type": content_type}
            assert (
                await sender.post("/msmq/private$/orders_tx", content=body, headers=headers)
            ).status_code == 200
    for _ in range(3):
        assert (await client.post("/api/queues/private$/orders_tx/receive")).status_code == 200
    assert len(await outgoing_names(client)) == 2
    samples = await scrape(client)
    assert value(samples, DROPPED, kind="final-receipt", reason="source_limit") == 1


async def test_acknowledgments_made_after_arrival_count_against_the_source(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    """Messages asking for commitment receipts only are stored without placing anything (on
    PostgreSQL in one statement); their source goes with them to the receive."""
    await create_queue(client, QUEUE)
    async with sender_at(app, "192.0.2.10") as sender:
        for sequence, admin_url in enumerate(allowed_forms("a")[:3], start=1):
            assert await post_acked(sender, sequence, admin_url, delivery_receipt=False) == 200
    assert await outgoing_names(client) == []
    for _ in range(3):
        assert (await client.post(f"/api/queues/{QUEUE}/receive")).status_code == 200
    assert len(await outgoing_names(client)) == 2
    samples = await scrape(client)
    assert value(samples, DROPPED, kind="acknowledgment", reason="source_limit") == 1


async def test_spellings_of_one_host_are_each_one_more_queue_within_the_limit(
    client: httpx.AsyncClient, settings: Settings, clock: SettableClock
) -> None:
    """With every host allowed, the spellings of one destination (IDN and punycode, a trailing
    dot, IPv6 forms, ports) are distinct outgoing queues: the limit counts them all."""
    anything = create_app(settings.model_copy(update={"srmp_outbound_hosts": "*"}), clock)
    spellings = [
        "http://bücher.example/msmq/private$/acks",
        "http://xn--bcher-kva.example/msmq/private$/acks",
        "http://bücher.example./msmq/private$/acks",
        "http://[2001:db8::7]/msmq/private$/acks",
        "http://[2001:db8:0:0:0:0:0:7]/msmq/private$/acks",
        "http://[2001:db8::7]:81/msmq/private$/acks",
    ]
    async with anything.router.lifespan_context(anything):
        gateway_of(anything).manager.outbound_work = asyncio.Event()
        await create_queue(client, QUEUE)
        await acked_from(anything, "192.0.2.10", spellings, 1)
        await acked_from(anything, "192.0.2.11", spellings, 100)
        await acked_from(anything, "192.0.2.12", spellings, 200)
    assert len(await outgoing_names(client)) == 5


async def test_a_moved_message_keeps_its_acknowledgments_on_its_senders_account(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    await create_queue(client, QUEUE)
    await create_queue(client, "private$/retry")
    async with sender_at(app, "192.0.2.10") as sender:
        for sequence, admin_url in enumerate(allowed_forms("a")[:3], start=1):
            assert await post_acked(sender, sequence, admin_url, delivery_receipt=False) == 200
    listed = json_of(await client.get(f"/api/queues/{QUEUE}/messages"))["messages"]
    move = {"lookup_ids": [message["lookup_id"] for message in listed], "to": "private$/retry"}
    assert (await client.post(f"/api/queues/{QUEUE}/messages/move", json=move)).status_code == 200
    for _ in range(3):
        assert (await client.post("/api/queues/private$/retry/receive")).status_code == 200
    assert len(await outgoing_names(client)) == 2
