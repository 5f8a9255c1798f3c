"""A plain receive that follows one that found its queue empty reads before it claims: no
write transaction while the queue stays empty, and still every message, expiry and deleted
queue seen as the claim would see them, whichever process changed the queue. Deleted and
re-created queues are covered by test_known_queues.py, whose receives count first there."""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from sqlalchemy import event

from qm.clock import SettableClock
from qm.manager import QueueManager
from qm.model import MessageProperties
from qm.reading import QueueReader
from storage import driver_sql
from storage.store import SqlStore
from tests.contract.support import bodies_of, new_queue

pytestmark = pytest.mark.anyio

PATH = "private$/orders"


@contextmanager
def statements_run(manager: QueueManager, monkeypatch: pytest.MonkeyPatch) -> Iterator[Counter[str]]:
    """The first word of each statement the manager's store runs in the block, through
    SQLAlchemy or straight on the driver (storage.driver_sql), DELETE for a claim written
    as a WITH query (PostgreSQL's claim, storage/claims.py); `counts`: the count reads."""
    store = manager.store
    assert isinstance(store, SqlStore)
    seen: Counter[str] = Counter()

    def record(statement: str) -> None:
        kind = statement.split(None, 1)[0].upper()
        claims = kind == "WITH" and "DELETE FROM" in statement
        seen["DELETE" if claims else kind] += 1
        seen["counts"] += kind == "SELECT" and "count(" in statement.lower()

    def through_sqlalchemy(_conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        record(statement)

    with monkeypatch.context() as patched:
        for driver in {*driver_sql._DRIVERS.values()}:
            for method in ("rows", "many"):
                patched.setattr(driver, method, _recording(getattr(driver, method), record))
        engine = store.engine.sync_engine
        event.listen(engine, "before_cursor_execute", through_sqlalchemy)
        try:
            yield seen
        finally:
            event.remove(engine, "before_cursor_execute", through_sqlalchemy)


def _recording(
    run: Callable[..., Awaitable[Any]], record: Callable[[str], None]
) -> Callable[..., Awaitable[Any]]:
    async def recorded(driver: Any, sql: str, values: Any) -> Any:
        record(sql)
        return await run(driver, sql, values)

    return recorded


async def test_a_queue_found_empty_is_read_not_claimed_until_a_message_is_there(
    manager: QueueManager, reader: QueueReader, monkeypatch: pytest.MonkeyPatch
) -> None:
    await new_queue(manager, PATH)
    assert await reader.receive(PATH, 0) is None
    with statements_run(manager, monkeypatch) as seen:
        assert await reader.receive(PATH, 0) is None
    assert seen["DELETE"] == 0 and seen["SELECT"] == seen["counts"] == 1, seen
    await manager.send(PATH, MessageProperties(body=b"arrived"))
    with statements_run(manager, monkeypatch) as seen:
        assert bodies_of([await reader.receive(PATH, 0)]) == [b"arrived"]
    assert seen["DELETE"] == 1, seen


async def test_a_message_another_process_sent_after_an_empty_receive_is_received(
    manager: QueueManager, reader: QueueReader, other_process: QueueManager
) -> None:
    await new_queue(manager, PATH)
    assert await reader.receive(PATH, 0) is None
    await other_process.send(PATH, MessageProperties(body=b"from elsewhere"))
    assert bodies_of([await reader.receive(PATH, 0)]) == [b"from elsewhere"]
    assert await reader.receive(PATH, 0) is None


async def test_a_message_past_its_time_to_be_received_does_not_count_as_there(
    manager: QueueManager, reader: QueueReader, clock: SettableClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    await new_queue(manager, PATH)
    assert await reader.receive(PATH, 0) is None
    await manager.send(PATH, MessageProperties(body=b"late", time_to_be_received=1))
    clock.advance(2)
    assert await reader.receive(PATH, 0) is None  # claims: the send made the queue non-empty
    with statements_run(manager, monkeypatch) as seen:
        assert await reader.receive(PATH, 0) is None
    assert seen["DELETE"] == 0, seen


async def test_messages_another_process_sent_are_counted_once_then_claimed_without_counting(
    manager: QueueManager, reader: QueueReader, other_process: QueueManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    await new_queue(manager, PATH)
    for body in (b"1", b"2", b"3"):
        await other_process.send(PATH, MessageProperties(body=body))
    with statements_run(manager, monkeypatch) as seen:
        received = [await reader.receive(PATH, 0) for _ in range(3)]
    assert bodies_of(received) == [b"1", b"2", b"3"]
    assert seen["counts"] == 1 and seen["DELETE"] == 3, seen
    with statements_run(manager, monkeypatch) as seen:
        assert await reader.receive(PATH, 0) is None
    assert seen["counts"] == 1 and seen["DELETE"] == 0, seen
