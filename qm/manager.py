"""The queue manager: MSMQ's rules over the store port (reference §7)."""

from __future__ import annotations

import asyncio
import dataclasses
import secrets
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Protocol, TypeVar

from qm import outbound, rules, streams
from qm.clock import Clock
from qm.config import ManagerConfig, TransactionTtbr
from qm.disposal import Departure, DisposalPolicy, PlacementKind, Reason, final_outcome
from qm.errors import MqError, MqErrorCode, QuotaExceeded
from qm.format_names import LocalIdentity, local_queue_path, parse_format_name
from qm.known_queues import KnownQueues
from qm.model import (
    INFINITE,
    Message,
    MessageProperties,
    NewMessage,
    Queue,
    QueueChanges,
    QueueManagerInfo,
    QueueSettings,
)
from qm.paths import QueueKind, QueuePath, SystemQueue, parse_queue_path, system_queue_path
from qm.store import (
    Claim,
    ClaimKind,
    EnqueueOutcome,
    ReleaseReport,
    Selector,
    Store,
    TransactionRecord,
)
from qm.streams import StreamPosition, StreamReceiptDue
from qm.wakeups import WakeUps

SINGLE_MESSAGE_TRANSACTION = "single"
"""MQ_SINGLE_MESSAGE: a send that is its own transaction."""

Attempt = Callable[[], Awaitable[Message | None]]


class Abandonment(Protocol):
    """Whether a waiting read's caller went away (its client hung up): it then takes nothing it
    could not hand over. An asyncio.Event is one."""

    def is_set(self) -> bool: ...

    def wait(self) -> Awaitable[object]:
        """Return once the caller went away. Awaited only while the read waits for a change of
        its queue (attempts are never cut off), and cancelled when the wait ends."""
        ...


_T = TypeVar("_T")

_STALE_QUEUE = frozenset({MqErrorCode.MQ_ERROR_QUEUE_NOT_FOUND, MqErrorCode.MQ_ERROR_TRANSACTION_USAGE})
"""What a send or receive by a remembered queue gets when it is no longer the one remembered."""


@dataclass(frozen=True, slots=True)
class Arrival:
    """What `deliver` was asked to store, kept together for a second attempt."""

    properties: MessageProperties
    transaction: str | None
    duplicate_key: str | None
    boundaries: tuple[bool, bool] | None
    stream: StreamPosition | None


class QueueManager:
    """One local queue manager. Methods take path text as users write it."""

    def __init__(self, store: Store, wakeups: WakeUps, clock: Clock, config: ManagerConfig) -> None:
        self.store = store
        self.wakeups = wakeups
        self.clock = clock
        self.config = config
        self._identity: QueueManagerInfo | None = None
        self.policy = DisposalPolicy(LocalIdentity(uuid.UUID(int=0), config.local_host_names))
        self.known_queues = KnownQueues()
        self.outbound_work = asyncio.Event()
        """Set when this process stored something to send (an outgoing message, a stream message
        to acknowledge): the senders look at once instead of at their next poll."""

    # -- identity ---------------------------------------------------------------------

    async def start(self) -> QueueManagerInfo:
        """Load (or create once) the persisted identity and the system queues."""
        candidate = QueueManagerInfo(uuid.uuid4(), self.config.initial_quota_kb, False)
        self._identity = await self.store.queues.open_queue_manager(candidate)
        self.policy = DisposalPolicy(LocalIdentity(self._identity.guid, self.config.local_host_names))
        self.store.attach(self.policy, self.wakeups)
        for system_queue in SystemQueue:
            await self._ensure_queue(system_queue_path(system_queue))
        return self._identity

    @property
    def guid(self) -> uuid.UUID:
        if self._identity is None:
            raise RuntimeError("QueueManager.start() was not awaited")
        return self._identity.guid

    async def info(self) -> QueueManagerInfo:
        return await self.store.queues.queue_manager_info()

    async def configure(
        self, quota_kb: int | None, throttled: bool | None, journal_quota_kb: int | None = None
    ) -> QueueManagerInfo:
        """Machine quota, throttling, and the computer journal's quota."""
        for name, value in (("quota_kb", quota_kb), ("journal_quota_kb", journal_quota_kb)):
            if value is not None:
                _check_quota(name, value)
        return await self.store.queues.update_queue_manager(quota_kb, throttled, journal_quota_kb)

    async def _ensure_queue(self, path: QueuePath) -> None:
        if await self.store.queues.find_queue(path) is None:
            try:
                await self.store.queues.create_queue(path, QueueSettings(), self.clock.now())
            except MqError as error:  # another process created it first
                if error.code is not MqErrorCode.MQ_ERROR_QUEUE_EXISTS:
                    raise

    # -- queues -----------------------------------------------------------------------

    async def create_queue(self, path_text: str, settings: QueueSettings) -> Queue:
        path = parse_queue_path(path_text)
        if not path.writable:
            raise MqError(
                MqErrorCode.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME,
                f"{path_text!r}: journal and system queues exist with their queue manager",
            )
        _check_settings(settings)
        return await self.store.queues.create_queue(path, settings, self.clock.now())

    async def get_queue(self, path_text: str) -> Queue:
        """A queue by path name, or by a format name that designates a local queue."""
        return await self._queue(self.resolve(path_text))

    def resolve(self, text: str) -> QueuePath:
        """`private$/orders`, or a format name such as `MACHINE={guid};DEADLETTER`."""
        if "=" not in text:
            return parse_queue_path(text)
        name = parse_format_name(text)
        path = local_queue_path(name, self.policy.identity)
        if path is None:
            raise MqError(
                MqErrorCode.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION,
                f"{text!r} does not designate a queue of this gateway",
            )
        return path

    def destination(self, text: str) -> QueuePath:
        """Where a send to `text` goes: a local queue, or the outgoing queue of a remote one."""
        return self.policy.remote_queue(text) or self.resolve(text)

    async def list_queues(self) -> list[Queue]:
        return await self.store.queues.list_queues()

    async def update_queue(self, path_text: str, changes: QueueChanges) -> Queue:
        queue = await self._administered_queue(path_text)
        _check_settings(_apply(queue.settings, changes))
        self.known_queues.forget(queue.path.key)
        return await self.store.queues.update_queue(queue.id, changes, self.clock.now())

    async def delete_queue(self, path_text: str) -> int:
        queue = await self._administered_queue(path_text)
        self.known_queues.forget(queue.path.key)
        return await self.store.queues.delete_queue(queue.id, self.clock.now())

    async def purge_queue(self, path_text: str) -> int:
        queue = await self.get_queue(path_text)
        return await self.store.queues.purge_queue(queue.id, self.clock.now())

    async def _administered_queue(self, path_text: str) -> Queue:
        path = self.resolve(path_text)
        if not path.writable:
            raise MqError(
                MqErrorCode.MQ_ERROR_ACCESS_DENIED,
                f"{path.url_path} belongs to the queue manager; it can be read and purged only",
            )
        return await self._queue(path)

    async def known_queue(self, path_text: str) -> Queue:
        """`get_queue`, remembered (qm.known_queues): for sends and plain receives, whose
        transactions check that the queue is still the one remembered."""
        return await self._known(self.resolve(path_text))

    async def with_known_queue(self, path: QueuePath, act: Callable[[Queue], Awaitable[_T]]) -> _T:
        """`act` on the remembered queue. The store checks in its transaction that the queue is
        still the one remembered; when it is not (deleted, perhaps re-created, transactional or
        not, by another process), the queue is looked up again, once."""
        try:
            return await act(await self._known(path))
        except MqError as error:
            if error.code not in _STALE_QUEUE or self.known_queues.get(path.key) is None:
                raise
            self.known_queues.forget(path.key)
            return await act(await self._known(path))

    async def _known(self, path: QueuePath) -> Queue:
        """The queue at `path`, remembered; an outgoing queue is created on first use."""
        queue = self.known_queues.get(path.key)
        if queue is None:
            if path.kind is QueueKind.OUTGOING:
                queue = (await self.store.outgoing.ensure_outgoing_queue(path, self.clock.now())).queue
            else:
                queue = await self._queue(path)
            self.known_queues.put(queue)
        return queue

    async def _queue(self, path: QueuePath) -> Queue:
        queue = await self.store.queues.find_queue(path)
        if queue is None:
            raise MqError(MqErrorCode.MQ_ERROR_QUEUE_NOT_FOUND, f"no queue {path.url_path}")
        return queue

    # -- send -------------------------------------------------------------------------

    async def send(
        self, path_text: str, properties: MessageProperties, transaction: str | None = None
    ) -> Message:
        """Enqueue (reference §7.3). Returns the message as stored, lookup ID included."""
        sent = await self.deliver(path_text, properties, transaction)
        assert sent is not None  # without a duplicate key nothing is a duplicate
        return sent

    async def deliver(
        self,
        path_text: str,
        properties: MessageProperties,
        transaction: str | None = None,
        duplicate_key: str | None = None,
        boundaries: tuple[bool, bool] | None = None,
        stream: StreamPosition | None = None,
    ) -> Message | None:
        """Enqueue a message that may arrive more than once (SRMP retries): None when
        `duplicate_key` was seen within the duplicate window, and nothing is stored.
        `boundaries` are the sender's first/last-in-transaction marks (SRMP `<Eod>`)."""
        path = self.destination(path_text)
        if not path.writable and path.kind is not QueueKind.OUTGOING:
            raise MqError(
                MqErrorCode.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION,
                f"{path.url_path} is read-only: only the queue manager writes journal and dead-letter queues",
            )
        rules.validate_properties(properties, self.config.max_body_bytes)
        if path.kind is QueueKind.OUTGOING and self.outbound_target(path.name) is None:
            raise MqError(
                MqErrorCode.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION,
                f"{path.pathname}: the gateway sends only to hosts in MSMQGW_SRMP_OUTBOUND_HOSTS",
            )
        arrival = Arrival(properties, transaction, duplicate_key, boundaries, stream)
        stored = await self.with_known_queue(path, lambda queue: self._deliver_to(queue, arrival))
        if stored is not None and (stream is not None or path.kind is QueueKind.OUTGOING):
            self.outbound_work.set()
        return stored

    async def _deliver_to(self, queue: Queue, arrival: Arrival) -> Message | None:
        held_by = await self._send_transaction(queue, arrival.transaction)
        properties = arrival.properties
        if arrival.transaction is not None:
            properties = await self._transactional(properties, held_by)
        new_message = self._new_message(queue, properties, held_by, arrival)
        return await self._enqueue(queue, new_message)

    async def _transactional(self, properties: MessageProperties, held_by: str | None) -> MessageProperties:
        """Priority 0, and (MSMQ's rule, unless configured otherwise) the TTBR of the
        transaction's first message."""
        ttbr = properties.time_to_be_received
        if held_by is not None and self.config.transaction_ttbr is TransactionTtbr.FIRST_MESSAGE:
            ttbr = await self.store.transactions.transaction_ttbr(held_by, ttbr)
        return dataclasses.replace(properties, priority=0, time_to_be_received=ttbr)

    async def _send_transaction(self, queue: Queue, transaction: str | None) -> str | None:
        """Check §7.8's pairing of transactional queues and sends; return the holder. An
        outgoing queue takes both (the remote queue decides; transactional ones travel as a stream)."""
        outgoing = queue.path.kind is QueueKind.OUTGOING
        if not outgoing and queue.settings.transactional != (transaction is not None):
            wanted = "inside a transaction" if queue.settings.transactional else "without one"
            raise MqError(
                MqErrorCode.MQ_ERROR_TRANSACTION_USAGE,
                f"{queue.path.url_path} accepts only messages sent {wanted}",
            )
        if transaction is None or transaction == SINGLE_MESSAGE_TRANSACTION:
            return None
        await self._active_transaction(transaction)
        return transaction

    def _new_message(
        self, queue: Queue, properties: MessageProperties, transaction: str | None, arrival: Arrival
    ) -> NewMessage:
        """Deadlines from now; TTBR wins over a later TTRQ (a message never outlives its TTBR).
        Built in one go: each dataclasses.replace() of it cost about 10 us per send."""
        now = self.clock.now()
        ttbr_deadline = rules.deadline(now, properties.time_to_be_received)
        ttrq_deadline = rules.deadline(now, properties.time_to_reach_queue)
        if ttbr_deadline is not None and (ttrq_deadline is None or ttrq_deadline > ttbr_deadline):
            ttrq_deadline = ttbr_deadline
        transactional = arrival.transaction is not None
        single = transactional and transaction is None
        first, last = (single, single) if arrival.boundaries is None else arrival.boundaries
        return NewMessage(
            queue_id=queue.id,
            properties=properties,
            message_id=properties.message_id or "",
            sent_time=properties.sent_time or now,
            arrived_time=now,
            source_machine=properties.source_machine or self.guid,
            ttbr_deadline=ttbr_deadline,
            ttrq_deadline=ttrq_deadline,
            transaction_id=transaction,
            first_in_transaction=first,
            last_in_transaction=last,
            transactional=transactional,
            duplicate_key=arrival.duplicate_key,
            stream=arrival.stream,
            queue_key=queue.path.key,
            queue_quota_kb=queue.settings.quota_kb,
        )

    async def _enqueue(self, queue: Queue, new_message: NewMessage) -> Message | None:
        [result] = await self.store.messages.enqueue([new_message])
        if result.outcome is EnqueueOutcome.DUPLICATE:
            return None
        if result.outcome is EnqueueOutcome.QUEUE_MANAGER_QUOTA_EXCEEDED:
            raise QuotaExceeded("the queue manager is throttled or its quota is reached", machine=True)
        if result.outcome is EnqueueOutcome.QUEUE_QUOTA_EXCEEDED:
            dead_lettered = await self._refused(queue, new_message)
            raise QuotaExceeded(
                f"the quota of {queue.path.url_path} is reached"
                + ("; the message went to the dead-letter queue" if dead_lettered else ""),
                machine=False,
            )
        assert result.lookup_id is not None
        return stored_message(result.lookup_id, result.message_id, new_message)

    async def _refused(self, queue: Queue, refused: NewMessage) -> bool:
        """Reference §7.3 step 2: a dead-letter copy (class 0x8003) and a NACK, where asked for."""
        message = stored_message(0, refused.message_id, refused)  # no ID yet: the copy gets one
        queue = (
            await self.store.queues.get_queue(queue.id) or queue
        )  # its settings as they are now, not cached
        departure = Departure(message, queue.path, queue.settings.journal, refused.transactional)
        placements = self.policy.consequences(departure, Reason.QUOTA_EXCEEDED, self.clock.now())
        await self.store.messages.place(placements, self.clock.now())
        return any(placement.kind is PlacementKind.DEAD_LETTER for placement in placements)

    # -- transactions -----------------------------------------------------------------

    async def begin_transaction(self) -> TransactionRecord:
        now = self.clock.now()
        record = TransactionRecord(
            id=secrets.token_hex(16),
            created_at=now,
            expires_at=now + timedelta(seconds=self.config.transaction_timeout_s),
        )
        await self.store.transactions.create_transaction(record)
        return record

    async def transaction(self, transaction_id: str) -> TransactionRecord:
        return await self._active_transaction(transaction_id, touch=False)

    async def commit(self, transaction_id: str) -> None:
        await self._finish(transaction_id, commit=True)

    async def abort(self, transaction_id: str) -> None:
        await self._finish(transaction_id, commit=False)

    async def _finish(self, transaction_id: str, commit: bool) -> None:
        """Commit or abort; a transaction past its timeout is aborted, whatever was asked."""
        record = await self.store.transactions.get_transaction(transaction_id)
        timed_out = record is not None and record.expires_at <= self.clock.now()
        now = self.clock.now()
        touched = await self.store.transactions.finish_transaction(
            transaction_id, commit and not timed_out, now
        )
        if touched is None or timed_out:
            raise _unknown_transaction(transaction_id)

    async def _active_transaction(self, transaction_id: str, touch: bool = True) -> TransactionRecord:
        record = await self.store.transactions.get_transaction(transaction_id)
        now = self.clock.now()
        if record is None or record.expires_at <= now:
            raise _unknown_transaction(transaction_id)
        if not touch:
            return record
        expires_at = now + timedelta(seconds=self.config.transaction_timeout_s)
        if not await self.store.transactions.touch_transaction(transaction_id, expires_at):
            raise _unknown_transaction(transaction_id)
        return dataclasses.replace(record, expires_at=expires_at)

    # -- housekeeping -----------------------------------------------------------------

    def outbound_target(self, url: str) -> str | None:
        """Where an outbound POST for `url` really goes, or None when its host is not allowed."""
        config = self.config
        return outbound.outbound_target(url, dict(config.outbound_rewrites), config.outbound_hosts)

    # -- stream receipts (reference §4.3) ------------------------------------------------

    async def due_stream_receipts(self, limit: int = 100) -> list[StreamReceiptDue]:
        return await self.store.streams.due_stream_receipts(self.clock.now(), limit)

    async def new_message_id(self) -> str:
        """A fresh ID (`{guid}\\sequence`) for a message this queue manager sends without storing
        it. The sequence comes from the durable counter of stored messages, so it never repeats
        one (a receiver's duplicate check would drop the later message) and grows."""
        return await self.store.messages.new_message_id()

    async def stream_receipt_sent(self, due: StreamReceiptDue) -> None:
        await self.store.streams.stream_receipt_sent(due.stream_id, due.last_ordinal, self.clock.now())

    async def outgoing_stream_acknowledged(self, stream_id: str, last_ordinal: int) -> int | None:
        """A stream receipt for a stream this gateway sends; None when it is not one of ours."""
        return await self.store.outgoing.outgoing_stream_acknowledged(
            stream_id, last_ordinal, self.clock.now()
        )

    async def final_receipt_received(
        self, stream_id: str, original_message_id: str, positive: bool, message_class: int | None
    ) -> bool | None:
        """A final receipt (reference §4.4) for a message sent on one of this gateway's streams:
        True when it settled a waiting message (a negative outcome puts it in DEADXACT), False
        when no such message waits (it did not ask for MQMSG_DEADLETTER, or was settled already:
        the receipt is dropped), None when the stream is not ours. A negative class §4.4 does
        not list settles nothing: the message waits for its TTBR."""
        outcome = final_outcome(positive, message_class)
        if outcome is None:
            return False
        now = self.clock.now()
        return await self.store.outgoing.outgoing_final_receipt(stream_id, original_message_id, outcome, now)

    async def stream_receipt_failed(self, due: StreamReceiptDue, retry: bool) -> None:
        """Retry on the backoff schedule, or (a target never allowed) wait for the next message."""
        retry_at = self.clock.now() + streams.retry_delay(due.attempts + 1) if retry else None
        await self.store.streams.stream_receipt_failed(due.stream_id, retry_at)

    async def release_expired(self) -> ReleaseReport:
        """Abort expired locks and idle transactions, close idle cursors, wake readers."""
        now = self.clock.now()
        forget_before = now - timedelta(seconds=self.config.duplicate_window_s)
        return await self.store.housekeeping.release_expired(now, forget_before)

    async def expire_due(self) -> int:
        """The sweeper's pass: remove messages past their TTBR, in batches, until none is due."""
        total = 0
        while True:  # in transit first: a message past both deadlines never reached its queue
            expired = await self.store.outgoing.expire_in_transit(self.clock.now(), self.config.sweep_batch)
            total += expired
            if expired < self.config.sweep_batch:
                break
        while True:
            expired = await self.store.housekeeping.expire_due(self.clock.now(), self.config.sweep_batch)
            total += expired
            if expired < self.config.sweep_batch:
                return total

    # -- shared by the reading operations (qm.reading) --------------------------------

    async def _claim_for(self, queue: Queue, transaction: str | None) -> Claim:
        if transaction is None:
            return Claim()
        if not queue.settings.transactional:
            raise MqError(
                MqErrorCode.MQ_ERROR_TRANSACTION_USAGE,
                f"{queue.path.url_path} is not transactional; receive from it without a transaction",
            )
        if transaction == SINGLE_MESSAGE_TRANSACTION:
            return Claim()  # its own transaction, committed at once: a plain receive
        await self._active_transaction(transaction)
        return Claim(ClaimKind.TRANSACTION, transaction)

    def _lock_claim(self, lock_timeout_s: float | None) -> tuple[Claim, str]:
        seconds = self.config.default_lock_timeout_s if lock_timeout_s is None else lock_timeout_s
        if not 0 < seconds <= self.config.max_lock_timeout_s:
            raise MqError(
                MqErrorCode.MQ_ERROR_INVALID_PARAMETER,
                f"a lock timeout must be above 0 and at most {self.config.max_lock_timeout_s} s",
            )
        token = secrets.token_hex(12)
        expires_at = self.clock.now() + timedelta(seconds=seconds)
        return Claim(ClaimKind.LOCK, token, expires_at), token

    def _as_read(self, message: Message) -> Message:
        """Report the remaining TTBR, as MSMQ does on receive (reference §7.4)."""
        remaining = rules.remaining_seconds(message.ttbr_deadline, self.clock.now())
        if remaining == message.properties.time_to_be_received:
            return message  # as it reads already (INFINITE without a TTBR): two replace() cost ~20 us
        properties = dataclasses.replace(message.properties, time_to_be_received=remaining)
        return dataclasses.replace(message, properties=properties)

    async def _take_waiting(
        self,
        queue: Queue,
        selector: Selector,
        claim: Claim,
        timeout_ms: int,
        abandoned: Abandonment | None = None,
    ) -> Message | None:
        """Take (receive or lock) what the selector addresses, waiting up to the timeout."""

        async def attempt() -> Message | None:
            return await self.store.messages.take(queue, selector, self.clock.now(), claim)

        return await self._wait(queue, attempt, timeout_ms, abandoned, takes_first=selector.first)

    async def _wait(
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
                    self.wakeups.pass_on(queue.id)
                return None
            watch = self.wakeups.watch(queue.id, takes_first)
            try:
                message = await self._attempt_after(attempt, woken and takes_first, queue.id)
                if message is not None:
                    if woken and takes_first and self.store.messages.may_have_more(queue.id):
                        self.wakeups.pass_on(queue.id)  # there may be more than the wake-ups said
                    return self._as_read(message)
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
                self.wakeups.pass_on(queue_id)
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


def _unknown_transaction(transaction_id: str) -> MqError:
    return MqError(
        MqErrorCode.MQ_ERROR_TRANSACTION_SEQUENCE,
        f"no active transaction {transaction_id!r} (unknown, finished, or timed out)",
    )


def _apply(settings: QueueSettings, changes: QueueChanges) -> QueueSettings:
    updates = {
        field.name: getattr(changes, field.name)
        for field in dataclasses.fields(changes)
        if getattr(changes, field.name) is not None
    }
    return dataclasses.replace(settings, **updates)


def _check_settings(settings: QueueSettings) -> None:
    if len(settings.label) > 124:
        raise MqError(MqErrorCode.MQ_ERROR_ILLEGAL_PROPERTY_VALUE, "a queue label has at most 124 characters")
    _check_quota("quota_kb", settings.quota_kb)
    _check_quota("journal_quota_kb", settings.journal_quota_kb)
    if not -32768 <= settings.base_priority <= 32767:
        raise MqError(MqErrorCode.MQ_ERROR_ILLEGAL_PROPERTY_VALUE, "base_priority is a signed 16-bit number")


def _check_quota(name: str, value: int) -> None:
    if not 0 <= value <= INFINITE:
        raise MqError(
            MqErrorCode.MQ_ERROR_ILLEGAL_PROPERTY_VALUE,
            f"{name} is kilobytes from 0 to {INFINITE} ({INFINITE} = unlimited)",
        )


def stored_message(lookup_id: int, message_id: str, new_message: NewMessage) -> Message:
    """The message as the store now holds it, without reading it back."""
    return Message(
        lookup_id=lookup_id,
        queue_id=new_message.queue_id,
        message_id=message_id,
        properties=new_message.properties,
        sent_time=new_message.sent_time,
        arrived_time=new_message.arrived_time,
        source_machine=new_message.source_machine,
        ttbr_deadline=new_message.ttbr_deadline,
        ttrq_deadline=new_message.ttrq_deadline,
        first_in_transaction=new_message.first_in_transaction,
        last_in_transaction=new_message.last_in_transaction,
        abort_count=0,
        transaction_id=new_message.transaction_id,
        destination_queue=new_message.destination_queue,
        stream=new_message.stream,
    )
