"""Reads that wait (reference §7.4): claims, the wait for a change of the queue, and the hand-on
of wake-ups between receivers of one queue."""

from __future__ import annotations

import asyncio
import dataclasses
import secrets
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import TYPE_CHECKING, Protocol

from qm import rules
from qm.errors import MqError, MqErrorCode
from qm.model import INFINITE, Message, Queue
from qm.store import Claim, ClaimKind, Selector
from qm.transactions import SINGLE_MESSAGE_TRANSACTION

if TYPE_CHECKING:
    from qm.manager import QueueManager

Attempt = Callable[[], Awaitable[Message | None]]


class Abandonment(Protocol):
    """Whether a waiting read's caller went away (its client hung up): it then takes nothing it
    could not hand over. An asyncio.Event is one."""

    def is_set(self) -> bool: ...

    def wait(self) -> Awaitable[object]:
        """Return once the caller went away. Awaited only while the read waits for a change of
        its queue (attempts are never cut off), and cancelled when the wait ends."""
        ...


class Waiting:
    """The waiting reads of a queue manager, shared by qm.reading, qm.cursors and triggers."""

    def __init__(self, qm: QueueManager) -> None:
        self._qm = qm

    async def claim_for(self, queue: Queue, transaction: str | None) -> Claim:
        if transaction is None:
            return Claim()
        if not queue.settings.transactional:
            raise MqError(
                MqErrorCode.MQ_ERROR_TRANSACTION_USAGE,
                f"{queue.path.url_path} is not transactional; receive from it without a transaction",
            )
        if transaction == SINGLE_MESSAGE_TRANSACTION:
            return Claim()  # its own transaction, committed at once: a plain receive
        await self._qm._active_transaction(transaction)
        return Claim(ClaimKind.TRANSACTION, transaction)

    def lock_claim(self, lock_timeout_s: float | None) -> tuple[Claim, str]:
        seconds = self._qm.config.default_lock_timeout_s if lock_timeout_s is None else lock_timeout_s
        if not 0 < seconds <= self._qm.config.max_lock_timeout_s:
            raise MqError(
                MqErrorCode.MQ_ERROR_INVALID_PARAMETER,
                f"a lock timeout must be above 0 and at most {self._qm.config.max_lock_timeout_s} s",
            )
        token = secrets.token_hex(12)
        expires_at = self._qm.clock.now() + timedelta(seconds=seconds)
        return Claim(ClaimKind.LOCK, token, expires_at), token

    def as_read(self, message: Message) -> Message:
        """Report the remaining TTBR, as MSMQ does on receive (reference §7.4)."""
        remaining = rules.remaining_seconds(message.ttbr_deadline, self._qm.clock.now())
        if remaining == message.properties.time_to_be_received:
            return message  # as it reads already (INFINITE without a TTBR): two replace() cost ~20 us
        properties = dataclasses.replace(message.properties, time_to_be_received=remaining)
        return dataclasses.replace(message, properties=properties)

    async def take_waiting(
        self,
        queue: Queue,
        selector: Selector,
        claim: Claim,
        timeout_ms: int,
        abandoned: Abandonment | None = None,
    ) -> Message | None:
        """Take (receive or lock) what the selector addresses, waiting up to the timeout."""

        async def attempt() -> Message | None:
            return await self._qm.store.messages.take(queue, selector, self._qm.clock.now(), claim)

        return await self.wait(queue, attempt, timeout_ms, abandoned, takes_first=selector.first)

    async def wait(
        self,
        queue: Queue,
        attempt: Attempt,
        timeout_ms: int,
        abandoned: Abandonment | None = None,
        takes_first: bool = False,
    ) -> Message | None:
        """Try, then wait for a change of the queue, until the timeout (INFINITE: forever) or
        until `abandoned` is set (the client went away: take nothing it could not receive).
        `takes_first`: the attempt takes the queue's first message, so one message wakes
        one such waiter (qm.wakeups); one that took a message after a wake-up, or gave up
        after one, passes a wake-up on."""
        loop = asyncio.get_running_loop()
        give_up_at = None if timeout_ms == INFINITE else loop.time() + timeout_ms / 1000
        woken = False
        while True:
            if abandoned is not None and abandoned.is_set():
                if woken and takes_first:
                    self._qm.wakeups.pass_on(queue.id)
                return None
            watch = self._qm.wakeups.watch(queue.id, takes_first)
            try:
                message = await self._attempt_after(attempt, woken and takes_first, queue.id)
                if message is not None:
                    if woken and takes_first and self._qm.store.messages.may_have_more(queue.id):
                        self._qm.wakeups.pass_on(queue.id)  # there may be more than the wake-ups said
                    return self.as_read(message)
                remaining = 3600.0 if give_up_at is None else give_up_at - loop.time()
                if remaining <= 0:
                    return None
                woken = await _first_of(watch.wait(remaining), abandoned)
            finally:
                watch.close()

    async def _attempt_after(self, attempt: Attempt, wake_up: bool, queue_id: int) -> Message | None:
        """An attempt that fails hands on the wake-up it was made for."""
        try:
            return await attempt()
        except BaseException:
            if wake_up:
                self._qm.wakeups.pass_on(queue_id)
            raise


async def _first_of(waiting: Awaitable[bool], abandoned: Abandonment | None) -> bool:
    """Await `waiting`, or stop early when `abandoned` is set (False then); attempts are never
    cut off."""
    if abandoned is None:
        return await waiting
    waiter = asyncio.ensure_future(waiting)
    hang_up = asyncio.ensure_future(abandoned.wait())
    try:
        await asyncio.wait({waiter, hang_up}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        hang_up.cancel()
        waiter.cancel()
    return waiter.done() and not waiter.cancelled() and waiter.result()
