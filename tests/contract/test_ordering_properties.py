"""Queue order as properties: random operations against a plain in-memory model.

The model keeps messages as (priority, arrival) and never looks at lookup IDs, so it checks
the store's ordering rather than repeating it. Each example uses a new queue.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from qm.cursors import CursorService
from qm.errors import MqError, MqErrorCode
from qm.manager import QueueManager
from qm.model import Message, MessageProperties, QueueSettings
from qm.reading import QueueReader
from qm.store import Seek
from tests.contract.support import bodies_of, counts

pytestmark = pytest.mark.anyio

EXAMPLES = settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
NOT_FOUND = MqErrorCode.MQ_ERROR_MESSAGE_NOT_FOUND

Operation = tuple[str, int, bool]
"""(kind, argument, receive): argument is a priority for sends, else a reference index."""

operations = st.lists(
    st.one_of(
        st.tuples(st.just("send"), st.integers(0, 7), st.just(False)),
        st.tuples(st.sampled_from(["receive", "peek"]), st.just(0), st.just(False)),
        st.tuples(st.sampled_from(["first", "last"]), st.just(0), st.booleans()),
        st.tuples(st.sampled_from(["current", "next", "previous"]), st.integers(0, 40), st.booleans()),
    ),
    min_size=5,
    max_size=40,
)
priority_lists = st.lists(st.integers(0, 7), min_size=1, max_size=12)


@dataclass
class QueueModel:
    """What a queue must hold: bodies in (priority descending, arrival) order."""

    present: dict[bytes, tuple[int, int]] = field(default_factory=dict)
    sent: list[bytes] = field(default_factory=list)

    def send(self, priority: int) -> bytes:
        body = str(len(self.sent)).encode()
        self.present[body] = (-priority, len(self.sent))
        self.sent.append(body)
        return body

    def order(self) -> list[bytes]:
        return sorted(self.present, key=self.present.__getitem__)

    def seek(self, kind: str, reference: bytes | None) -> bytes | None:
        """The body a lookup addresses, or None for MQ_ERROR_MESSAGE_NOT_FOUND."""
        order = self.order()
        if kind in ("first", "last"):
            return (order[0] if kind == "first" else order[-1]) if order else None
        if reference not in self.present:
            return None
        position = order.index(reference)
        if kind == "current":
            return reference
        neighbour = position + 1 if kind == "next" else position - 1
        return order[neighbour] if 0 <= neighbour < len(order) else None


async def _fresh_queue(manager: QueueManager) -> str:
    path = f"private$/property-{uuid.uuid4().hex}"
    await manager.create_queue(path, QueueSettings())
    return path


class Run:
    """Applies operations to the queue manager and the model side by side."""

    def __init__(self, manager: QueueManager, reader: QueueReader, path: str) -> None:
        self.manager = manager
        self.reader = reader
        self.path = path
        self.model = QueueModel()
        self.lookup_ids: dict[bytes, int] = {}

    async def apply(self, kind: str, argument: int, receive: bool) -> None:
        if kind == "send":
            body = self.model.send(argument)
            sent = await self.manager.send(self.path, MessageProperties(body=body, priority=argument))
            self.lookup_ids[body] = sent.lookup_id
        elif kind in ("receive", "peek"):
            expected = self.model.seek("first", None)
            call = self.reader.receive if kind == "receive" else self.reader.peek
            self._check(await call(self.path, 0), expected, remove=kind == "receive")
        elif kind in ("first", "last"):
            await self._lookup(kind, Seek(kind), 0, None, receive)
        elif self.model.sent:
            reference = self.model.sent[argument % len(self.model.sent)]
            seek = Seek.PREVIOUS if kind == "previous" else Seek(kind)
            await self._lookup(kind, seek, self.lookup_ids[reference], reference, receive)

    async def _lookup(
        self, kind: str, seek: Seek, lookup_id: int, reference: bytes | None, receive: bool
    ) -> None:
        expected = self.model.seek(kind, reference)
        try:
            found: Message | None = await self.reader.by_lookup_id(self.path, seek, lookup_id, receive)
        except MqError as error:
            if kind == "current" and reference not in self.model.present:
                # Reference §7.10 says ALREADY_RECEIVED for a removed position; NOT_FOUND is
                # all a store without tombstones can tell. Either is a refusal.
                assert error.code in (NOT_FOUND, MqErrorCode.MQ_ERROR_MESSAGE_ALREADY_RECEIVED)
            else:
                assert error.code is NOT_FOUND
            found = None
        self._check(found, expected, remove=receive)

    def _check(self, found: Message | None, expected: bytes | None, remove: bool) -> None:
        assert bodies_of([found]) == ([] if expected is None else [expected])
        if found is not None and expected is not None:
            assert found.lookup_id == self.lookup_ids[expected]
            if remove:
                del self.model.present[expected]


@EXAMPLES
@given(initial=priority_lists, steps=operations)
async def test_random_operations_match_the_model(
    manager: QueueManager, reader: QueueReader, initial: list[int], steps: list[Operation]
) -> None:
    run = Run(manager, reader, await _fresh_queue(manager))
    for kind, argument, receive in [("send", priority, False) for priority in initial] + steps:
        await run.apply(kind, argument, receive)
    assert bodies_of(await reader.browse(run.path, 0, 100)) == run.model.order()
    assert (await counts(manager, run.path))[0] == len(run.model.present)


@EXAMPLES
@given(priorities=priority_lists)
async def test_a_cursor_walk_sees_queue_order(
    manager: QueueManager, cursors: CursorService, priorities: list[int]
) -> None:
    path = await _fresh_queue(manager)
    model = QueueModel()
    for priority in priorities:
        await manager.send(path, MessageProperties(body=model.send(priority), priority=priority))
    cursor = await cursors.open(path)
    walked = [await cursors.peek_current(cursor.id, 0)]
    while walked[-1] is not None:
        walked.append(await cursors.peek_next(cursor.id, 0))
    assert bodies_of(walked) == model.order()


@st.composite
def lock_plans(draw: st.DrawFn) -> tuple[list[int], list[int], list[bool]]:
    """Priorities to send; then which locks to end in which order, and whether to commit each.

    Drawn up front: interactive draws (st.data) do not mix with anyio's test runner.
    """
    priorities = draw(priority_lists)
    locks = draw(st.integers(0, len(priorities)))
    ending_order = draw(st.permutations(range(locks)))
    commits = draw(st.lists(st.booleans(), min_size=locks, max_size=locks))
    return priorities, ending_order, commits


@EXAMPLES
@given(plan=lock_plans())
async def test_ended_locks_leave_the_rest_in_order(
    manager: QueueManager, reader: QueueReader, plan: tuple[list[int], list[int], list[bool]]
) -> None:
    """Lock a prefix, commit some and abort the others in any order: the order survives."""
    priorities, ending_order, commits = plan
    path = await _fresh_queue(manager)
    model = QueueModel()
    for priority in priorities:
        await manager.send(path, MessageProperties(body=model.send(priority), priority=priority))
    locked = []
    for _ in ending_order:
        entry = await reader.receive_locked(path, 0, 30)
        assert entry is not None
        locked.append(entry)
    assert bodies_of(message for message, _ in locked) == model.order()[: len(locked)]
    for index, commit in zip(ending_order, commits, strict=True):
        message, tag = locked[index]
        await reader.end_lock(tag, commit)
        if commit:
            del model.present[message.properties.body]
    assert bodies_of(await reader.browse(path, 0, 100)) == model.order()
    assert bodies_of([await reader.receive(path, 0)]) == model.order()[:1]
