"""Receive, peek, receive by lookup ID and two-phase read (reference §7.4, §7.9, §7.10)."""

from __future__ import annotations

import asyncio

from qm.errors import MqError, MqErrorCode
from qm.manager import Abandonment, Attempt, QueueManager
from qm.model import INFINITE, Message, Queue
from qm.store import NO_FILTER, Budget, Claim, MessageFilter, PositionState, Seek, Selector

LOCK_TAG_SEPARATOR = "-"


class QueueReader:
    """Reading operations of a queue manager, by queue path."""

    def __init__(self, manager: QueueManager) -> None:
        self._qm = manager

    async def receive(
        self,
        path_text: str,
        timeout_ms: int,
        transaction: str | None = None,
        abandoned: Abandonment | None = None,
    ) -> Message | None:
        """Remove the first available message, waiting up to the timeout; None on timeout,
        or as soon as `abandoned` is set (the caller can no longer take the message)."""
        if transaction is not None:
            queue = await self._qm.get_queue(path_text)
            claim = await self._qm._claim_for(queue, transaction)
            return await self._qm._take_waiting(queue, Selector(), claim, timeout_ms, abandoned)
        loop = asyncio.get_running_loop()
        started = loop.time()

        async def take(queue: Queue) -> Message | None:  # a second try waits what is left
            left = _remaining_ms(timeout_ms, loop.time() - started)
            return await self._qm._take_waiting(queue, Selector(), Claim(), left, abandoned)

        return await self._qm.with_known_queue(self._qm.resolve(path_text), take)

    async def receive_many(
        self,
        path_text: str,
        timeout_ms: int,
        max_messages: int,
        abandoned: Abandonment | None = None,
        budget: Budget | None = None,
    ) -> list[Message]:
        """Remove up to `max_messages` available messages in queue order, waiting up to the
        timeout for the first; empty on timeout. Outside any transaction (a batch is for speed)."""
        queue = await self._qm.get_queue(path_text)
        await self._qm._claim_for(queue, None)
        taken: list[Message] = []

        async def attempt() -> Message | None:
            nonlocal taken
            now = self._qm.clock.now()
            taken = await self._qm.store.messages.take_many(queue, max_messages, now, budget)
            return taken[0] if taken else None

        if await self._qm._wait(queue, attempt, timeout_ms, abandoned, takes_first=True) is None:
            return []
        return [self._qm._as_read(message) for message in taken]

    async def peek(self, path_text: str, timeout_ms: int) -> Message | None:
        queue = await self._qm.get_queue(path_text)
        return await self._qm._wait(queue, self._peeker(queue, Selector()), timeout_ms)

    async def receive_locked(
        self, path_text: str, timeout_ms: int, lock_timeout_s: float | None
    ) -> tuple[Message, str] | None:
        """Dequeue Message Begin: lock the first message under a tag; end with end_lock."""
        queue = await self._qm.get_queue(path_text)
        claim, token = self._qm._lock_claim(lock_timeout_s)
        message = await self._qm._take_waiting(queue, Selector(), claim, timeout_ms)
        if message is None:
            return None
        return message, f"{message.lookup_id}{LOCK_TAG_SEPARATOR}{token}"

    async def lock_by_lookup_id(
        self, path_text: str, lookup_id: int, lock_timeout_s: float
    ) -> tuple[Message, str] | None:
        """Dequeue Message Begin on one message by lookup ID, without waiting; None when it
        is not available (received, locked, or gone)."""
        queue = await self._qm.get_queue(path_text)
        claim, token = self._qm._lock_claim(lock_timeout_s)
        message = await self._once(queue, Selector(Seek.CURRENT, lookup_id), claim)
        if message is None:
            return None
        return message, f"{message.lookup_id}{LOCK_TAG_SEPARATOR}{token}"

    async def end_lock(self, tag: str, commit: bool) -> None:
        """Dequeue Message End (reference §7.9)."""
        lookup_id, token = _parse_lock_tag(tag)
        state, _queue_id = await self._qm.store.messages.end_lock(
            lookup_id, token, commit, self._qm.clock.now()
        )
        if state is PositionState.MISSING:
            raise MqError(
                MqErrorCode.MQ_ERROR_MESSAGE_ALREADY_RECEIVED,
                f"the message of lock {tag!r} is gone: it was received (or the tag never existed)",
            )
        if state is not PositionState.LOCKED:
            raise MqError(
                MqErrorCode.MQ_ERROR_TRANSACTION_SEQUENCE,
                f"lock {tag!r} is not held: it was ended or it expired",
            )

    async def by_lookup_id(
        self,
        path_text: str,
        seek: Seek,
        lookup_id: int = 0,
        receive: bool = False,
        transaction: str | None = None,
    ) -> Message:
        """MQReceiveMessageByLookupId: never waits; MQ_ERROR_MESSAGE_NOT_FOUND if nothing."""
        if seek in (Seek.FIRST, Seek.LAST) and lookup_id != 0:
            raise MqError(
                MqErrorCode.MQ_ERROR_INVALID_PARAMETER,
                f"{seek.value} takes lookup ID 0, not {lookup_id} (reference §7.10)",
            )
        queue = await self._qm.get_queue(path_text)
        claim = await self._qm._claim_for(queue, transaction) if receive else None
        if seek in (Seek.CURRENT, Seek.NEXT, Seek.PREVIOUS):
            await self._check_reference(queue, seek, lookup_id, receive)
        message = await self._once(queue, Selector(seek, lookup_id), claim)
        if message is None:
            raise _not_found(queue, f"no {seek.value} message" + _relative(seek, lookup_id))
        return message

    async def by_message_id(
        self,
        path_text: str,
        message_id: str | None = None,
        correlation_id: bytes | None = None,
        receive: bool = False,
        transaction: str | None = None,
    ) -> Message:
        """The first available message with this message ID or correlation ID."""
        queue = await self._qm.get_queue(path_text)
        claim = await self._qm._claim_for(queue, transaction) if receive else None
        selector = Selector(message_id=message_id, correlation_id=correlation_id)
        message = await self._once(queue, selector, claim)
        if message is None:
            raise _not_found(queue, "no available message with that identifier")
        return message

    async def browse(
        self, path_text: str, after: int, limit: int, where: MessageFilter = NO_FILTER
    ) -> list[Message]:
        """Available messages in queue order after a lookup ID (keyset pagination), those
        `where` keeps."""
        queue = await self._qm.get_queue(path_text)
        now = self._qm.clock.now()
        messages = await self._qm.store.messages.browse(queue.id, after, limit, now, where)
        return [self._qm._as_read(message) for message in messages]

    async def browse_within(
        self, path_text: str, after: int, limit: int, budget: Budget, where: MessageFilter = NO_FILTER
    ) -> tuple[list[Message], bool]:
        """`browse` of as many messages as fit in the budget (at least one); True when more
        may follow."""
        queue = await self._qm.get_queue(path_text)
        now = self._qm.clock.now()
        found, more = await self._qm.store.messages.browse_within(queue.id, after, limit, now, budget, where)
        return [self._qm._as_read(message) for message in found], more

    async def _check_reference(self, queue: Queue, seek: Seek, lookup_id: int, receive: bool) -> None:
        state = await self._qm.store.messages.position_state(queue.id, lookup_id, self._qm.clock.now())
        if state in (PositionState.MISSING, PositionState.EXPIRED):
            raise _not_found(queue, f"no message with lookup ID {lookup_id}")
        if seek is Seek.CURRENT and state is PositionState.LOCKED:
            code = (
                MqErrorCode.MQ_ERROR_MESSAGE_LOCKED_UNDER_TRANSACTION
                if receive
                else MqErrorCode.MQ_ERROR_TRANSACTION_USAGE
            )
            raise MqError(code, f"message {lookup_id} is locked by a transaction or a two-phase read")

    async def _once(self, queue: Queue, selector: Selector, claim: Claim | None) -> Message | None:
        now = self._qm.clock.now()
        if claim is None:
            message = await self._qm.store.messages.peek(queue.id, selector, now)
        else:
            message = await self._qm.store.messages.take(queue, selector, now, claim)
        return None if message is None else self._qm._as_read(message)

    def _peeker(self, queue: Queue, selector: Selector) -> Attempt:
        async def attempt() -> Message | None:
            return await self._qm.store.messages.peek(queue.id, selector, self._qm.clock.now())

        return attempt


def _parse_lock_tag(tag: str) -> tuple[int, str]:
    lookup_text, _, token = tag.partition(LOCK_TAG_SEPARATOR)
    if not lookup_text.isdigit() or not token:
        raise MqError(MqErrorCode.MQ_ERROR_INVALID_HANDLE, f"{tag!r} is not a lock tag of this gateway")
    return int(lookup_text), token


def _not_found(queue: Queue, what: str) -> MqError:
    return MqError(MqErrorCode.MQ_ERROR_MESSAGE_NOT_FOUND, f"{queue.path.url_path}: {what}")


def _relative(seek: Seek, lookup_id: int) -> str:
    if seek in (Seek.NEXT, Seek.PREVIOUS):
        return f" to lookup ID {lookup_id}"
    if seek is Seek.CURRENT:
        return f" with lookup ID {lookup_id}"
    return ""


def _remaining_ms(timeout_ms: int, elapsed_s: float) -> int:
    """What is left of a receive's wait after `elapsed_s` (INFINITE stays INFINITE)."""
    if timeout_ms == INFINITE:
        return INFINITE
    return max(0, timeout_ms - int(elapsed_s * 1000))
