"""Several gateway processes on one database send each outgoing queue one at a time.

Two senders, each with its own store and engine on the same database (as two processes
have), deliver to a real HTTP receiver on loopback. Time is the shared settable clock: a
lease runs out when a test advances it, never by waiting. A sender that would POST while the
other holds the lease blocks on the receiver's `hold`, which the `asyncio.timeout` turns into a
failure."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import timedelta

import pytest

from app.outbound.client import SrmpClient
from app.outbound.delivery import OutgoingDelivery
from qm.clock import SettableClock
from qm.config import ManagerConfig
from qm.manager import QueueManager
from qm.model import MessageProperties
from qm.outbound import OutgoingQueue
from qm.outgoing import OutgoingQueues
from soap import TimerMapping, parse_request
from storage.engine import make_engine
from storage.store import SqlStore
from storage.wakeups import LocalWakeUps
from tests.webhook_server import Hit, WebhookServer

pytestmark = pytest.mark.anyio
LEASE_S = 90.0
WITHIN_S = 10.0
"""Bounds each pass of a sender; only reached on failure (e.g. it POSTs into a held receiver)."""


@dataclass
class Sender:
    """One gateway process as a sender: its store, queue manager and delivery loop."""

    manager: QueueManager
    outgoing: OutgoingQueues
    delivery: OutgoingDelivery

    async def send_due(self) -> int:
        async with asyncio.timeout(WITHIN_S):
            return await self.delivery.send_due()


@dataclass
class Rig:
    one: Sender
    two: Sender
    receiver: WebhookServer
    clock: SettableClock

    @property
    def destination(self) -> str:
        return f"DIRECT=HTTP://127.0.0.1:{self.receiver.port}/msmq/private$/orders"

    async def send(self, count: int) -> None:
        for number in range(count):
            await self.one.manager.send(self.destination, MessageProperties(body=f"m{number}".encode()))

    async def queue(self) -> OutgoingQueue:
        [found] = await self.one.outgoing.all()
        return found


def labels(hits: list[Hit]) -> list[str]:
    """What each POST carried, in arrival order (the body names the message)."""
    found = []
    for hit in hits:
        envelope = parse_request(hit.body, hit.headers["content-type"])
        assert envelope.body is not None
        found.append(envelope.body.decode())
    return found


@pytest.fixture
async def rig(database_url: str, clock: SettableClock) -> AsyncIterator[Rig]:
    config = ManagerConfig(
        local_host_names=frozenset({"sender.example.net"}),
        outbound_hosts=("127.0.0.1:*",),  # the receiver listens on a port of its own
        outgoing_lease_s=LEASE_S,
    )
    async with AsyncExitStack() as stack:
        receiver = await stack.enter_async_context(WebhookServer())
        senders = []
        for owner in ("one", "two"):
            store = SqlStore(make_engine(database_url))
            stack.push_async_callback(store.close)
            manager = QueueManager(store, LocalWakeUps(poll_interval=60), clock, config)
            await manager.start()
            client = SrmpClient(timeout_s=LEASE_S / 2)
            stack.push_async_callback(client.close)
            outgoing = OutgoingQueues(manager, owner)
            senders.append(Sender(manager, outgoing, OutgoingDelivery(outgoing, client, TimerMapping.SDK)))
        yield Rig(senders[0], senders[1], receiver, clock)


async def test_one_process_sends_while_it_holds_the_lease_and_renews_it(rig: Rig) -> None:
    await rig.send(3)
    rig.receiver.hold.clear()
    one = asyncio.create_task(rig.one.delivery.send_due())
    await rig.receiver.until(1)  # one is POSTing m0; its answer is held back
    assert (await rig.queue()).owner == "one"
    rig.clock.advance(LEASE_S * 0.9)
    assert await rig.two.send_due() == 0  # the lease is still one's
    rig.receiver.hold.set()  # m0 answered, m1 held again: one renews its lease before m1
    rig.receiver.hold.clear()
    await rig.receiver.until(2)
    rig.clock.advance(LEASE_S * 0.5)  # past the first lease, within the renewed one
    queue = await rig.queue()
    renewed_until = rig.clock.now() + timedelta(seconds=LEASE_S * 0.5)
    assert (queue.owner, queue.lease_expires_at) == ("one", renewed_until)
    assert await rig.two.send_due() == 0
    rig.receiver.hold.set()
    assert await asyncio.wait_for(one, WITHIN_S) == 3
    assert labels(rig.receiver.hits) == ["m0", "m1", "m2"]
    queue = await rig.queue()
    assert (queue.owner, queue.lease_expires_at, queue.queue.message_count) == (None, None, 0)


async def test_a_crashed_owners_queue_is_taken_over_when_its_lease_runs_out(rig: Rig) -> None:
    await rig.send(3)
    assert await rig.one.outgoing.hold(await rig.queue())  # one takes the lease, then dies
    assert await rig.two.send_due() == 0
    rig.clock.advance(LEASE_S - 1)
    assert await rig.two.send_due() == 0
    assert rig.receiver.hits == []
    rig.clock.advance(1)
    assert await rig.two.send_due() == 3
    assert labels(rig.receiver.hits) == ["m0", "m1", "m2"]  # each exactly once, in order
    assert (await rig.queue()).owner is None


async def test_a_stopping_process_lets_go_at_once(rig: Rig) -> None:
    """Cancelled mid-POST (the service stops): the lease is released, and the other process
    sends without waiting it out. m0 was never answered, so it is sent again (at least once,
    as MSMQ: a receiver drops the copy by its message ID)."""
    await rig.send(2)
    rig.receiver.hold.clear()
    one = asyncio.create_task(rig.one.delivery.send_due())
    await rig.receiver.until(1)
    one.cancel()
    with pytest.raises(asyncio.CancelledError):
        await one
    assert (await rig.queue()).owner is None
    rig.receiver.hold.set()
    assert await rig.two.send_due() == 2
    assert labels(rig.receiver.hits) == ["m0", "m0", "m1"]


async def test_the_lease_is_taken_by_one_of_two_at_once(rig: Rig) -> None:
    """Both race for a free queue: the conditional UPDATE lets exactly one win."""
    await rig.send(1)
    queue = await rig.queue()
    won = await asyncio.gather(rig.one.outgoing.hold(queue), rig.two.outgoing.hold(queue))
    assert sorted(won) == [False, True]
    assert (await rig.queue()).owner == ("one" if won[0] else "two")
