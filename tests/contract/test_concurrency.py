"""Concurrent readers and writers: every message is delivered exactly once, on both stores."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from qm.manager import QueueManager
from qm.model import Message, MessageProperties, QueueSettings
from qm.reading import QueueReader
from qm.store import EnqueueOutcome
from tests.contract.support import counts, new_queue, store_message

pytestmark = pytest.mark.anyio

PATH = "private$/orders"
TOTAL = 10_000
RECEIVERS = 8
BATCH = 1_000
HANG_LIMIT_S = 300.0
"""A deadlock or a lost message shows up as this timeout instead of a hung suite."""


async def _fill(manager: QueueManager, total: int) -> None:
    """Insert `total` messages, numbered by body, through the store in large batches."""
    queue = await manager.get_queue(PATH)
    for start in range(0, total, BATCH):
        batch = [
            store_message(
                manager, queue.id, MessageProperties(body=str(number).encode(), priority=number % 8)
            )
            for number in range(start, min(start + BATCH, total))
        ]
        results = await manager.store.messages.enqueue(batch)
        assert {result.outcome for result in results} == {EnqueueOutcome.ACCEPTED}


async def _drain(reader: QueueReader) -> list[Message]:
    taken = []
    while (message := await reader.receive(PATH, 0)) is not None:
        taken.append(message)
    return taken


def _assert_exactly_once(per_receiver: list[list[Message]], total: int) -> None:
    bodies = Counter(int(message.properties.body) for taken in per_receiver for message in taken)
    duplicates = {number: seen for number, seen in bodies.items() if seen > 1}
    assert duplicates == {}
    assert set(bodies) == set(range(total))


async def test_concurrent_receivers_take_each_message_exactly_once(
    manager: QueueManager, reader: QueueReader
) -> None:
    await new_queue(manager, PATH)
    await _fill(manager, TOTAL)
    assert (await counts(manager, PATH))[0] == TOTAL
    async with asyncio.timeout(HANG_LIMIT_S), asyncio.TaskGroup() as group:
        tasks = [group.create_task(_drain(reader)) for _ in range(RECEIVERS)]
    per_receiver = [task.result() for task in tasks]
    _assert_exactly_once(per_receiver, TOTAL)
    assert sum(1 for taken in per_receiver if taken) > 1, "the receivers did not run concurrently"
    for taken in per_receiver:  # nothing comes back, so each receiver sees queue order
        lookup_ids = [message.lookup_id for message in taken]
        assert lookup_ids == sorted(lookup_ids)
    assert await counts(manager, PATH) == (0, 0)
    assert await reader.peek(PATH, 0) is None


async def test_concurrent_two_phase_readers_take_each_message_exactly_once(
    manager: QueueManager, reader: QueueReader
) -> None:
    total = 300
    await new_queue(manager, PATH)
    await _fill(manager, total)

    given_back: set[bytes] = set()

    async def lock_and_end() -> list[Message]:
        taken = []
        while (locked := await reader.receive_locked(PATH, 0, 30)) is not None:
            message, tag = locked
            body = message.properties.body
            if int(body) % 3 == 0 and body not in given_back:  # comes round again, to anyone
                given_back.add(body)
                await reader.end_lock(tag, commit=False)
                continue
            await reader.end_lock(tag, commit=True)
            taken.append(message)
        return taken

    async with asyncio.timeout(HANG_LIMIT_S), asyncio.TaskGroup() as group:
        tasks = [group.create_task(lock_and_end()) for _ in range(RECEIVERS)]
    per_reader = [task.result() for task in tasks]
    _assert_exactly_once(per_reader, total)
    assert len(given_back) == len(range(0, total, 3))
    assert await counts(manager, PATH) == (0, 0)


async def test_concurrent_senders_and_waiting_receivers(manager: QueueManager, reader: QueueReader) -> None:
    senders, per_sender = 4, 50
    total = senders * per_sender
    await new_queue(manager, PATH, QueueSettings())
    received: list[Message] = []

    async def send(sender: int) -> None:
        for number in range(sender * per_sender, (sender + 1) * per_sender):
            await manager.send(PATH, MessageProperties(body=str(number).encode(), priority=number % 8))

    async def receive() -> None:
        while len(received) < total:
            message = await reader.receive(PATH, 200)
            if message is not None:
                received.append(message)

    async with asyncio.timeout(HANG_LIMIT_S), asyncio.TaskGroup() as group:
        for _ in range(4):
            group.create_task(receive())
        for sender in range(senders):
            group.create_task(send(sender))
    _assert_exactly_once([received], total)
    assert await counts(manager, PATH) == (0, 0)


async def test_purges_while_readers_drain(manager: QueueManager, reader: QueueReader) -> None:
    """Purges take the rows that receives and two-phase ends take: no deadlock, exact totals."""
    total, refills, refill_size = 2_000, 20, 20
    await new_queue(manager, PATH)
    await _fill(manager, total)
    purged = 0

    async def purge() -> None:
        nonlocal purged
        for _ in range(refills):
            purged += await manager.purge_queue(PATH)
            for _ in range(refill_size):
                await manager.send(PATH, MessageProperties(body=b"0"))

    async def lock_and_commit() -> int:
        committed = 0
        while (locked := await reader.receive_locked(PATH, 0, 30)) is not None:
            await reader.end_lock(locked[1], commit=True)
            committed += 1
        return committed

    async with asyncio.timeout(HANG_LIMIT_S), asyncio.TaskGroup() as group:
        receivers = [group.create_task(_drain(reader)) for _ in range(RECEIVERS - 2)]
        lockers = [group.create_task(lock_and_commit()) for _ in range(2)]
        group.create_task(purge())
    taken = sum(len(task.result()) for task in receivers) + sum(task.result() for task in lockers)
    leftover = len(await _drain(reader))
    assert taken + purged + leftover == total + refills * refill_size
    assert await counts(manager, PATH) == (0, 0)
