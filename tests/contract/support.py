"""Helpers shared by the contract tests: error assertions, queues, and observable wake-ups."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import pytest

from qm.errors import MqError, MqErrorCode
from qm.manager import QueueManager
from qm.model import Message, MessageProperties, NewMessage, QueueSettings
from storage.store import SqlStore
from storage.wakeups import LocalWakeUps
from tests.observed_wakeups import ObservedWakeUps

WAIT_LIMIT_S = 10.0
"""How long a test waits for something that should happen at once; only reached on failure."""


@contextmanager
def mq_error(code: MqErrorCode) -> Iterator[None]:
    """Expect the block to raise MqError with exactly this code."""
    with pytest.raises(MqError) as caught:
        yield
    assert caught.value.code is code, f"expected {code.name}, got {caught.value}"


async def new_queue(manager: QueueManager, path: str, settings: QueueSettings | None = None) -> str:
    """Create a queue and return its path for the calls that follow."""
    await manager.create_queue(path, settings or QueueSettings())
    return path


async def send_bodies(
    manager: QueueManager, path: str, bodies: Iterable[bytes], priority: int = 3
) -> list[Message]:
    return [await manager.send(path, MessageProperties(body=body, priority=priority)) for body in bodies]


def store_message(
    manager: QueueManager, queue_id: int, properties: MessageProperties, duplicate_key: str | None = None
) -> NewMessage:
    """A message as the queue manager hands it to the store now, for tests that enqueue
    through the store directly (batches, concurrent batches)."""
    now = manager.clock.now()
    return NewMessage(
        queue_id=queue_id,
        properties=properties,
        message_id="",
        sent_time=now,
        arrived_time=now,
        source_machine=manager.guid,
        ttbr_deadline=None,
        ttrq_deadline=None,
        duplicate_key=duplicate_key,
    )


def bodies_of(messages: Iterable[Message | None]) -> list[bytes]:
    return [message.properties.body for message in messages if message is not None]


async def counts(manager: QueueManager, path: str) -> tuple[int, int]:
    """The queue's (message_count, byte_count) totals."""
    queue = await manager.get_queue(path)
    return queue.message_count, queue.byte_count


class WatchedWakeUps(ObservedWakeUps):
    """LocalWakeUps observed by the test. The poll interval is long so that a missing
    wake-up signal shows up as a test failure instead of being covered by the poll."""

    def __init__(self, poll_interval: float = 60.0) -> None:
        super().__init__(LocalWakeUps(poll_interval=poll_interval))


def sql_store(manager: QueueManager) -> SqlStore:
    """The manager's store, as the SQLAlchemy store these tests look into."""
    assert isinstance(manager.store, SqlStore)
    return manager.store
