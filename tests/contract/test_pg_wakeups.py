"""Wake-ups across gateway processes on PostgreSQL (LISTEN/NOTIFY): a receive waiting in one
process is woken by a send committed in another, well before the slow safety poll, and one
message wakes one waiting receiver there too."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Callable

import asyncpg
import pytest

from qm.clock import SettableClock
from qm.config import ManagerConfig
from qm.manager import QueueManager
from qm.reading import QueueReader
from storage import pg_wakeups
from storage.engine import make_engine
from storage.pg_wakeups import BYE, CHANNEL, HELLO, PostgresWakeUps, asyncpg_dsn
from storage.store import SqlStore
from tests.contract.support import WAIT_LIMIT_S, bodies_of, new_queue, send_bodies
from tests.observed_wakeups import ObservedWakeUps

pytestmark = pytest.mark.anyio

PATH = "private$/orders"
SAFETY_POLL_S = 300.0
"""Far above the test's limit: only a notification can wake a reader in time."""


class Process:
    """A queue manager with its own store, pool and listening connection, as a gateway
    process has."""

    def __init__(self, database_url: str, clock: SettableClock) -> None:
        self.channel = PostgresWakeUps(database_url, safety_poll_interval=SAFETY_POLL_S)
        self.wakeups = ObservedWakeUps(self.channel)
        self.store = SqlStore(make_engine(database_url))
        self.manager = QueueManager(self.store, self.wakeups, clock, ManagerConfig())
        self.reader = QueueReader(self.manager)

    async def start(self) -> None:
        await self.channel.start()
        await self.manager.start()

    async def close(self) -> None:
        await self.channel.close()
        await self.store.close()


@pytest.fixture
async def processes(database_url: str, clock: SettableClock) -> AsyncIterator[tuple[Process, Process]]:
    if not database_url.startswith("postgresql"):
        pytest.skip("LISTEN/NOTIFY wake-ups are PostgreSQL's; SQLite processes poll")
    pair = (Process(database_url, clock), Process(database_url, clock))
    for process in pair:
        await process.start()
    await _until_acquainted(pair[0].channel, pair[1].channel)
    yield pair
    for process in pair:
        await process.close()


async def test_a_receive_waiting_in_one_process_gets_a_message_sent_in_another(
    processes: tuple[Process, Process],
) -> None:
    sender, receiver = processes
    await new_queue(sender.manager, PATH)
    waiting = asyncio.create_task(receiver.reader.receive(PATH, 120_000))
    await receiver.wakeups.until_waiting()
    await send_bodies(sender.manager, PATH, [b"across"])
    assert bodies_of([await asyncio.wait_for(waiting, WAIT_LIMIT_S)]) == [b"across"]


async def test_one_message_from_another_process_wakes_one_waiting_receiver(
    processes: tuple[Process, Process],
) -> None:
    sender, receiver = processes
    await new_queue(sender.manager, PATH)
    waiting = [asyncio.create_task(receiver.reader.receive(PATH, 120_000)) for _ in range(4)]
    await receiver.wakeups.until_waiting(4)
    attempts_before = receiver.store.messages.receive_group.stats.requests
    await send_bodies(sender.manager, PATH, [b"one"])
    done, _ = await asyncio.wait(waiting, timeout=WAIT_LIMIT_S, return_when=asyncio.FIRST_COMPLETED)
    assert bodies_of([task.result() for task in done]) == [b"one"]
    await receiver.wakeups.until_waiting(3)
    assert receiver.store.messages.receive_group.stats.requests - attempts_before <= 2
    for task in waiting:
        task.cancel()


async def test_a_message_that_woke_a_receive_in_its_own_process_wakes_none_in_another(
    database_url: str,
) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("LISTEN/NOTIFY wake-ups are PostgreSQL's; SQLite processes poll")
    here, there = (PostgresWakeUps(database_url, safety_poll_interval=SAFETY_POLL_S) for _ in range(2))
    for channel in (here, there):
        await channel.start()
    try:
        await _until_acquainted(here, there)
        queue_id = 7
        taker_here = here.watch(queue_id, takes=True)
        taker_there, peeker_there = there.watch(queue_id, takes=True), there.watch(queue_id)
        here.signal([queue_id])
        assert await taker_here.wait(WAIT_LIMIT_S)
        # the peek there hears of the change; the same notification is all the taker there gets
        assert await peeker_there.wait(WAIT_LIMIT_S)
        assert not await taker_there.wait(0)
        next_taker_there = there.watch(queue_id, takes=True)
        here.pass_on(queue_id)  # no taker is left here: the wake-up goes to the other process
        assert await next_taker_there.wait(WAIT_LIMIT_S)
    finally:
        for channel in (here, there):
            await channel.close()


async def test_bursts_sent_through_one_process_reach_every_receive_waiting_in_another(
    processes: tuple[Process, Process],
) -> None:
    """No wake-up is lost between processes: the safety poll is far above the time limit, so a
    message announced to nobody would leave the receives waiting until the test fails."""
    sender, receiver = processes
    await new_queue(sender.manager, PATH)
    sent = [f"message {number}".encode() for number in range(60)]
    received: list[bytes] = []
    everything = asyncio.Event()

    async def keep_receiving() -> None:
        while True:
            message = await receiver.reader.receive(PATH, 120_000)
            received.extend(bodies_of([message]))
            if len(received) == len(sent):
                everything.set()

    receivers = [asyncio.create_task(keep_receiving()) for _ in range(6)]
    try:
        await receiver.wakeups.until_waiting(6)
        for start in range(0, len(sent), 10):  # concurrent sends: batches of several messages
            burst = sent[start : start + 10]
            await asyncio.gather(*(send_bodies(sender.manager, PATH, [body]) for body in burst))
        await asyncio.wait_for(everything.wait(), WAIT_LIMIT_S)
    finally:
        for task in receivers:
            task.cancel()
        await asyncio.gather(*receivers, return_exceptions=True)
    assert sorted(received) == sorted(sent)


async def _until(condition: Callable[[], bool]) -> None:
    """Poll: presence travels on the channel, and nothing here has an event to wait on."""
    async with asyncio.timeout(WAIT_LIMIT_S):
        for _ in itertools.count():
            if condition():
                return
            await asyncio.sleep(0.01)


async def _until_acquainted(*channels: PostgresWakeUps) -> None:
    """Until each process knows every other: from then on each publishes its changes."""
    await _until(lambda: all(len(channel.peers) == len(channels) - 1 for channel in channels))


def _channels(database_url: str, count: int) -> list[PostgresWakeUps]:
    return [PostgresWakeUps(database_url, safety_poll_interval=SAFETY_POLL_S) for _ in range(count)]


@pytest.fixture
async def overheard(database_url: str) -> AsyncIterator[list[str]]:
    """Every payload on the wake-up channel, as a listener that is no gateway hears it."""
    if not database_url.startswith("postgresql"):
        pytest.skip("LISTEN/NOTIFY wake-ups are PostgreSQL's; SQLite processes poll")
    payloads: list[str] = []
    connection = await asyncpg.connect(asyncpg_dsn(database_url))
    await connection.add_listener(CHANNEL, lambda *arguments: payloads.append(arguments[-1]))
    yield payloads
    await connection.close()


async def test_a_lone_process_publishes_no_wake_ups(
    database_url: str, clock: SettableClock, overheard: list[str]
) -> None:
    """A NOTIFY is a transaction with a flushed commit: nobody else listening, none is sent.
    The hello of a second process, which PostgreSQL delivers after anything the first sent
    before it, closes what is looked at."""
    alone = Process(database_url, clock)
    await alone.start()
    try:
        await new_queue(alone.manager, PATH)
        waiting = asyncio.create_task(alone.reader.receive(PATH, 120_000))
        await alone.wakeups.until_waiting()
        await send_bodies(alone.manager, PATH, [b"taken here", b"left in the queue"])
        assert bodies_of([await asyncio.wait_for(waiting, WAIT_LIMIT_S)]) == [b"taken here"]
        [later] = _channels(database_url, 1)
        await later.start()
        await later.close()
        await _until(lambda: any(payload.startswith(f"{BYE}:") for payload in overheard))
    finally:
        await alone.close()
    first_hello, second_hello, *rest = overheard
    assert first_hello.startswith(f"{HELLO}:") and second_hello.startswith(f"{HELLO}:"), overheard
    assert all(not payload[:1].isdigit() for payload in rest), overheard  # presence only


async def test_a_change_made_before_a_peer_was_known_wakes_every_watcher_there(database_url: str) -> None:
    """The change went unpublished (nobody listened as far as `first` knew); once it hears
    the newcomer it publishes `*`, and the newcomer's watchers look again."""
    if not database_url.startswith("postgresql"):
        pytest.skip("LISTEN/NOTIFY wake-ups are PostgreSQL's; SQLite processes poll")
    first, newcomer = _channels(database_url, 2)
    await first.start()
    try:
        first.signal([7])  # a commit here, published to nobody
        watching = newcomer.watch(7, takes=True)  # began before its process listened
        await newcomer.start()
        assert await watching.wait(WAIT_LIMIT_S)
    finally:
        for channel in (first, newcomer):
            await channel.close()


async def test_a_peer_that_says_bye_is_forgotten_and_one_that_vanished_is_dropped(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("LISTEN/NOTIFY wake-ups are PostgreSQL's; SQLite processes poll")
    monkeypatch.setattr(pg_wakeups, "PEERS_CHECKED_EVERY_S", 0.0)
    here, leaving, vanishing = _channels(database_url, 3)
    for channel in (here, leaving, vanishing):
        await channel.start()
    try:
        await _until_acquainted(here, leaving, vanishing)
        await leaving.close()
        await _until(lambda: len(here.peers) == 1)
        vanishing_task = vanishing._task
        assert vanishing_task is not None
        vanishing_task.cancel()  # as a process killed outright: no bye
        await asyncio.gather(vanishing_task, return_exceptions=True)
        await vanishing._disconnect()

        def forgotten() -> bool:
            here.signal([7])  # publishing looks at who is still there
            return not here.peers

        await _until(forgotten)
    finally:
        for channel in (here, leaving, vanishing):
            await channel.close()
