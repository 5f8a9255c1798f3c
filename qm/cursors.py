"""Cursors (reference §7.5): forward-only positions in a queue, persisted in the store."""

from __future__ import annotations

import dataclasses
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta

from qm.errors import MqError, MqErrorCode
from qm.manager import QueueManager
from qm.model import Message, Queue
from qm.store import Claim, CursorPlace, CursorRecord, PositionState, Seek, Selector


@dataclass(frozen=True, slots=True)
class Arrivals:
    """What a waiting cursor counts as an arrival: a message whose counter is above `counter`
    (a settled counter, Store.counter_high_water) and that is not one of `known` (there
    already, or met). A message whose send commits late, below messages that committed
    before it, is an arrival like any other: it is not lost behind a cursor."""

    counter: int
    known: frozenset[int] = frozenset()

    def selector(self) -> Selector:
        return Selector(Seek.ARRIVED_AFTER, self.counter, known=self.known)


class CursorService:
    def __init__(self, manager: QueueManager) -> None:
        self._qm = manager

    async def open(self, path_text: str) -> CursorRecord:
        """MQCreateCursor: an unpositioned cursor on the queue."""
        queue = await self._qm.get_queue(path_text)
        record = CursorRecord(secrets.token_hex(12), queue.id, CursorPlace.UNPOSITIONED, 0, self._expiry())
        await self._qm.store.cursors.create_cursor(record)
        return record

    async def close(self, cursor_id: str) -> None:
        if not await self._qm.store.cursors.delete_cursor(cursor_id):
            raise _invalid(cursor_id)

    async def get(self, cursor_id: str) -> CursorRecord:
        record = await self._qm.store.cursors.get_cursor(cursor_id)
        if record is None or record.expires_at <= self._qm.clock.now():
            raise _invalid(cursor_id)
        return record

    async def describe(self, cursor_id: str) -> tuple[CursorRecord, Queue]:
        """The open cursor and the queue it walks."""
        return await self._open_cursor(cursor_id)

    async def arrivals(self, queue_id: int) -> Arrivals:
        """From now on: the queue's messages above a settled counter are there already."""
        counter = await self._qm.store.messages.counter_high_water()
        return Arrivals(counter, await self._qm.store.messages.arrived_since(queue_id, counter))

    async def peek_current(
        self, cursor_id: str, timeout_ms: int, arrivals: Arrivals | None = None
    ) -> Message | None:
        """MQ_ACTION_PEEK_CURRENT with a cursor; positions an unpositioned cursor. `arrivals`:
        what counts as new while waiting (default: what arrives from now on)."""
        cursor, queue = await self._open_cursor(cursor_id)
        if cursor.place is CursorPlace.ON_MESSAGE:
            selector = Selector(Seek.CURRENT, cursor.position)
            message = await self._qm.store.messages.peek(queue.id, selector, self._qm.clock.now())
            if message is None:
                raise await self._moved_error(queue, cursor)
            await self._save(cursor)
            return self._qm._as_read(message)
        return await self._advance(cursor, queue, timeout_ms, self._first_seek(cursor), arrivals)

    async def peek_next(
        self, cursor_id: str, timeout_ms: int, arrivals: Arrivals | None = None
    ) -> Message | None:
        """MQ_ACTION_PEEK_NEXT: needs a positioned cursor; waits at the end of the queue."""
        cursor, queue = await self._open_cursor(cursor_id)
        if cursor.place is CursorPlace.UNPOSITIONED:
            raise MqError(
                MqErrorCode.MQ_ERROR_ILLEGAL_CURSOR_ACTION,
                "peek next needs a cursor positioned by peek current first",
            )
        return await self._advance(cursor, queue, timeout_ms, Selector(Seek.NEXT, cursor.position), arrivals)

    async def move_to(self, cursor_id: str, lookup_id: int) -> None:
        """Rest the cursor on a message found another way: the trigger service follows a
        higher-priority arrival it met while busy, as a cursor waiting at the end would."""
        cursor, _queue = await self._open_cursor(cursor_id)
        await self._save(dataclasses.replace(cursor, place=CursorPlace.ON_MESSAGE, position=lookup_id))

    async def receive_current(
        self, cursor_id: str, timeout_ms: int, transaction: str | None = None
    ) -> Message | None:
        """Receive the message under the cursor, then move the cursor to the next one."""
        cursor, queue = await self._open_cursor(cursor_id)
        claim = await self._qm._claim_for(queue, transaction)
        message: Message | None
        if cursor.place is CursorPlace.ON_MESSAGE:
            message = await self._take_current(cursor, queue, claim)
        else:
            message = await self._qm._take_waiting(queue, self._first_seek(cursor), claim, timeout_ms)
        if message is not None:
            await self._step_past(cursor, queue, message.lookup_id)
        return message

    async def _take_current(self, cursor: CursorRecord, queue: Queue, claim: Claim) -> Message:
        selector = Selector(Seek.CURRENT, cursor.position)
        message = await self._qm.store.messages.take(queue, selector, self._qm.clock.now(), claim)
        if message is None:
            raise await self._moved_error(queue, cursor)
        return self._qm._as_read(message)

    async def _advance(
        self,
        cursor: CursorRecord,
        queue: Queue,
        timeout_ms: int,
        selector: Selector,
        arrivals: Arrivals | None = None,
    ) -> Message | None:
        """Peek forward; a cursor waiting at the end moves to whatever arrives, wherever —
        including a message whose send committed after the cursor passed its place."""
        arrived = (arrivals or await self.arrivals(queue.id)).selector()

        async def attempt() -> Message | None:
            now = self._qm.clock.now()
            found = await self._qm.store.messages.peek(queue.id, selector, now)
            return found or await self._qm.store.messages.peek(queue.id, arrived, now)

        message = await self._qm._wait(queue, attempt, timeout_ms)
        if message is not None:
            await self._save(
                dataclasses.replace(cursor, place=CursorPlace.ON_MESSAGE, position=message.lookup_id)
            )
        else:
            await self._save(cursor)
        return message

    async def _step_past(self, cursor: CursorRecord, queue: Queue, lookup_id: int) -> None:
        following = await self._qm.store.messages.peek(
            queue.id, Selector(Seek.NEXT, lookup_id), self._qm.clock.now()
        )
        if following is None:
            moved = dataclasses.replace(cursor, place=CursorPlace.AFTER, position=lookup_id)
        else:
            moved = dataclasses.replace(cursor, place=CursorPlace.ON_MESSAGE, position=following.lookup_id)
        await self._save(moved)

    @staticmethod
    def _first_seek(cursor: CursorRecord) -> Selector:
        if cursor.place is CursorPlace.AFTER:
            return Selector(Seek.NEXT, cursor.position)
        return Selector(Seek.FIRST)

    async def _moved_error(self, queue: Queue, cursor: CursorRecord) -> MqError:
        state = await self._qm.store.messages.position_state(queue.id, cursor.position, self._qm.clock.now())
        if state is PositionState.LOCKED:
            return MqError(
                MqErrorCode.MQ_ERROR_MESSAGE_LOCKED_UNDER_TRANSACTION,
                f"the message under cursor {cursor.id} is locked by a transaction",
            )
        return MqError(
            MqErrorCode.MQ_ERROR_MESSAGE_ALREADY_RECEIVED,
            f"the message under cursor {cursor.id} was removed; move on with peek next",
        )

    async def _open_cursor(self, cursor_id: str) -> tuple[CursorRecord, Queue]:
        cursor = await self.get(cursor_id)
        queue = await self._qm.store.queues.get_queue(cursor.queue_id)
        if queue is None:
            raise MqError(
                MqErrorCode.MQ_ERROR_QUEUE_NOT_FOUND, f"the queue of cursor {cursor_id} was deleted"
            )
        return cursor, queue

    async def _save(self, cursor: CursorRecord) -> None:
        await self._qm.store.cursors.save_cursor(dataclasses.replace(cursor, expires_at=self._expiry()))

    def _expiry(self) -> datetime:
        return self._qm.clock.now() + timedelta(seconds=self._qm.config.cursor_idle_timeout_s)


def _invalid(cursor_id: str) -> MqError:
    return MqError(
        MqErrorCode.MQ_ERROR_INVALID_HANDLE, f"no open cursor {cursor_id!r} (closed or idle too long)"
    )
