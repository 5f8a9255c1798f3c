"""The queue manager: MSMQ's rules over the store port (reference §7). This module holds its
identity and the administration of queues; sending, transactions, stream receipts, timers and
waiting reads are qm.sending, qm.transactions, qm.receipts, qm.expiry and qm.waiting."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Awaitable, Callable
from typing import TypeVar

from qm import outbound
from qm.clock import Clock
from qm.config import ManagerConfig
from qm.disposal import DisposalPolicy
from qm.errors import MqError, MqErrorCode
from qm.expiry import Expiry
from qm.format_names import LocalIdentity, local_queue_path, parse_format_name
from qm.known_queues import KnownQueues
from qm.model import (
    INFINITE,
    Message,
    MessageProperties,
    Queue,
    QueueChanges,
    QueueManagerInfo,
    QueueSettings,
)
from qm.outbound import OutgoingQueueLimits
from qm.paths import (
    QueueKind,
    QueuePath,
    SystemQueue,
    parse_queue_path,
    system_queue_path,
    validate_queue_name,
)
from qm.receipts import StreamReceipts
from qm.redrives import Redrives
from qm.sending import Sending
from qm.store import Claim, ReleaseReport, Store, TransactionRecord
from qm.streams import StreamReceiptDue
from qm.transactions import SINGLE_MESSAGE_TRANSACTION as SINGLE_MESSAGE_TRANSACTION
from qm.transactions import Transactions
from qm.waiting import Abandonment as Abandonment
from qm.waiting import Attempt as Attempt
from qm.waiting import Waiting
from qm.wakeups import WakeUps

_T = TypeVar("_T")

_STALE_QUEUE = frozenset({MqErrorCode.MQ_ERROR_QUEUE_NOT_FOUND, MqErrorCode.MQ_ERROR_TRANSACTION_USAGE})
"""What a send or receive by a remembered queue gets when it is no longer the one remembered."""


class QueueManager:
    """One local queue manager. Methods take path text as users write it."""

    def __init__(self, store: Store, wakeups: WakeUps, clock: Clock, config: ManagerConfig) -> None:
        self.store = store
        self.wakeups = wakeups
        self.clock = clock
        self.config = config
        self._identity: QueueManagerInfo | None = None
        self.policy = self._policy(uuid.UUID(int=0))
        self.known_queues = KnownQueues()
        self.outbound_work = asyncio.Event()
        """Set when this process stored something to send (an outgoing message, a stream message
        to acknowledge): the senders look at once instead of at their next poll."""
        self._sending = Sending(self)
        self._transactions = Transactions(self)
        self._receipts = StreamReceipts(self)
        self._expiry = Expiry(self)
        self._waiting = Waiting(self)
        self.redrives = Redrives(self)
        """Dead letters staged by the pipeline, re-sent through this queue manager's send path."""
        self.deliver = self._sending.deliver
        """Enqueue a message that may arrive more than once (qm.sending.Sending.deliver)."""
        self.refuse_arrival = self._sending.refuse_arrival
        """Refuse a message its sender may not write (qm.sending.Sending.refuse_arrival)."""
        self.final_receipt_received = self._receipts.final_receipt_received
        self._take_waiting = self._waiting.take_waiting
        self._wait = self._waiting.wait

    # -- identity ---------------------------------------------------------------------

    async def start(self) -> QueueManagerInfo:
        """Load (or create once) the persisted identity and the system queues."""
        candidate = QueueManagerInfo(uuid.uuid4(), self.config.initial_quota_kb, False)
        self._identity = await self.store.queues.open_queue_manager(candidate)
        self.policy = self._policy(self._identity.guid)
        self.store.attach(self.policy, self.wakeups)
        for system_queue in SystemQueue:
            await self._ensure_queue(system_queue_path(system_queue))
        return self._identity

    def _policy(self, guid: uuid.UUID) -> DisposalPolicy:
        config = self.config
        limits = OutgoingQueueLimits(config.max_outgoing_queues_per_source, config.max_outgoing_queues)
        identity = LocalIdentity(guid, config.local_host_names)
        return DisposalPolicy(identity, lambda url: self.outbound_target(url) is not None, limits)

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

    async def unreachable_queues(self) -> list[Queue]:
        """Public and private queues whose stored name today's rules refuse (created before
        they did: a name with `=` is read as a format name wherever a queue is named), so no
        path reaches them; `delete_unreachable_queue` removes them by ID."""
        return [queue for queue in await self.list_queues() if _unreachable(queue)]

    async def delete_unreachable_queue(self, queue_id: int) -> int:
        """Delete one of `unreachable_queues` with its messages; MQ_ERROR_QUEUE_NOT_FOUND for any
        other ID (a reachable queue is deleted by its path, with the usual checks)."""
        found = [queue for queue in await self.unreachable_queues() if queue.id == queue_id]
        if not found:
            raise MqError(MqErrorCode.MQ_ERROR_QUEUE_NOT_FOUND, f"no unreachable queue has ID {queue_id}")
        self.known_queues.forget(found[0].path.key)
        return await self.store.queues.delete_queue(queue_id, self.clock.now())

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

    # -- sending (qm.sending) -------------------------------------------------------

    async def send(
        self, path_text: str, properties: MessageProperties, transaction: str | None = None
    ) -> Message:
        """Enqueue (reference §7.3). Returns the message as stored, lookup ID included."""
        sent = await self.deliver(path_text, properties, transaction)
        assert sent is not None  # without a duplicate key nothing is a duplicate
        return sent

    def outbound_target(self, url: str) -> str | None:
        """Where an outbound POST for `url` really goes, or None when its host is not allowed."""
        config = self.config
        return outbound.outbound_target(url, dict(config.outbound_rewrites), config.outbound_hosts)

    # -- transactions (qm.transactions) -----------------------------------------------

    async def begin_transaction(self) -> TransactionRecord:
        return await self._transactions.begin()

    async def transaction(self, transaction_id: str) -> TransactionRecord:
        return await self._transactions.get(transaction_id)

    async def commit(self, transaction_id: str) -> None:
        await self._transactions.finish(transaction_id, commit=True)

    async def abort(self, transaction_id: str) -> None:
        await self._transactions.finish(transaction_id, commit=False)

    async def _active_transaction(self, transaction_id: str, touch: bool = True) -> TransactionRecord:
        """The transaction if it is active (and kept alive unless `touch` is False), else
        MQ_ERROR_TRANSACTION_SEQUENCE: every send and receive in a transaction looks here."""
        return await self._transactions.active(transaction_id, touch)

    # -- stream receipts (qm.receipts) ------------------------------------------------

    async def due_stream_receipts(self, limit: int = 100) -> list[StreamReceiptDue]:
        return await self._receipts.due_stream_receipts(limit)

    async def new_message_id(self) -> str:
        return await self._receipts.new_message_id()

    async def stream_receipt_sent(self, due: StreamReceiptDue) -> None:
        await self._receipts.stream_receipt_sent(due)

    async def outgoing_stream_acknowledged(self, stream_id: str, last_ordinal: int) -> int | None:
        return await self._receipts.outgoing_stream_acknowledged(stream_id, last_ordinal)

    async def stream_receipt_failed(self, due: StreamReceiptDue, retry: bool) -> None:
        await self._receipts.stream_receipt_failed(due, retry)

    # -- timers (qm.expiry) -----------------------------------------------------------

    async def release_expired(self) -> ReleaseReport:
        return await self._expiry.release_expired()

    async def expire_due(self) -> int:
        return await self._expiry.expire_due()

    # -- shared by the reading operations (qm.waiting) --------------------------------

    async def _claim_for(self, queue: Queue, transaction: str | None) -> Claim:
        return await self._waiting.claim_for(queue, transaction)

    def _lock_claim(self, lock_timeout_s: float | None) -> tuple[Claim, str]:
        return self._waiting.lock_claim(lock_timeout_s)

    def _as_read(self, message: Message) -> Message:
        return self._waiting.as_read(message)


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


def _unreachable(queue: Queue) -> bool:
    path = queue.path
    if path.kind not in (QueueKind.PUBLIC, QueueKind.PRIVATE) or path.journal:
        return False
    try:
        validate_queue_name(path.name, path.name)
    except MqError:
        return True
    return False
