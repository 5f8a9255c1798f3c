"""The store port: everything the queue manager needs from persistence.

`storage/` implements it on SQLite and PostgreSQL. Each method is one database
transaction; each returns frozen values, never live database objects.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from qm.disposal import DisposalPolicy, Placement, Reason
from qm.model import (
    Message,
    NewMessage,
    Queue,
    QueueChanges,
    QueueManagerInfo,
    QueueSettings,
)
from qm.outbound import OutgoingQueue, OutgoingStreamPosition
from qm.paths import QueuePath
from qm.streams import StreamReceiptDue
from qm.triggers.port import TriggerStore
from qm.wakeups import WakeUps


class Seek(enum.Enum):
    """Where to look in a queue's order (reference §7.10 lookup actions)."""

    FIRST = "first"
    LAST = "last"
    CURRENT = "current"
    NEXT = "next"
    PREVIOUS = "previous"
    ARRIVED_AFTER = "arrived-after"
    """The first message whose counter part is above `lookup_id` and that is not one of the
    selector's `known` messages: what a waiting cursor sees (see `Store.counter_high_water`)."""


@dataclass(frozen=True, slots=True)
class Selector:
    """Which available message a peek or take addresses."""

    seek: Seek = Seek.FIRST
    lookup_id: int = 0
    message_id: str | None = None
    correlation_id: bytes | None = None
    known: frozenset[int] = frozenset()
    """ARRIVED_AFTER only: lookup IDs that do not count as arrivals (already there or met)."""

    @property
    def first(self) -> bool:
        """The queue's first available message, whatever it is (a plain receive's choice)."""
        return self == FIRST


FIRST = Selector()


class ClaimKind(enum.Enum):
    RECEIVE = "receive"
    """Remove now (reason AckReceive), journaling if the queue asks for it."""
    TRANSACTION = "transaction"
    """Lock for a transaction; removed at commit, back in place at abort."""
    LOCK = "lock"
    """Two-phase read: lock under a tag until ended or expired."""


@dataclass(frozen=True, slots=True)
class Claim:
    kind: ClaimKind = ClaimKind.RECEIVE
    owner: str | None = None
    expires_at: datetime | None = None


class PositionState(enum.Enum):
    MISSING = "missing"
    AVAILABLE = "available"
    LOCKED = "locked"
    EXPIRED = "expired"


class EnqueueOutcome(enum.Enum):
    """Reference §7.3 statuses."""

    ACCEPTED = 0
    QUEUE_QUOTA_EXCEEDED = 1
    QUEUE_MANAGER_QUOTA_EXCEEDED = 2
    DUPLICATE = 4
    """A message ID seen within the duplicate window (SRMP, reference §1.7 step 9): not stored."""


@dataclass(frozen=True, slots=True)
class EnqueueResult:
    outcome: EnqueueOutcome
    lookup_id: int | None = None
    message_id: str = ""


@dataclass(frozen=True, slots=True)
class TransactionRecord:
    id: str
    created_at: datetime
    expires_at: datetime


class CursorPlace(enum.Enum):
    UNPOSITIONED = 0
    ON_MESSAGE = 1
    AFTER = 2
    """Just after `position`: the message there was received through the cursor."""


@dataclass(frozen=True, slots=True)
class CursorRecord:
    id: str
    queue_id: int
    place: CursorPlace
    position: int
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class ReleaseReport:
    """What a housekeeping pass undid, with the queues that gained available messages."""

    locks_released: int
    transactions_aborted: int
    cursors_closed: int
    queue_ids: frozenset[int]


class Store(TriggerStore, Protocol):
    def attach(self, policy: DisposalPolicy, wakeups: WakeUps) -> None:
        """The rules for consequences, and whom to tell after a commit changed a queue."""
        ...

    async def open_queue_manager(self, candidate: QueueManagerInfo) -> QueueManagerInfo:
        """Return the persisted identity, persisting `candidate` the first time."""
        ...

    async def queue_manager_info(self) -> QueueManagerInfo: ...

    async def update_queue_manager(
        self, quota_kb: int | None, throttled: bool | None, journal_quota_kb: int | None = None
    ) -> QueueManagerInfo: ...

    async def create_queue(self, path: QueuePath, settings: QueueSettings, now: datetime) -> Queue:
        """Create the queue and its journal queue; MQ_ERROR_QUEUE_EXISTS if it exists."""
        ...

    async def find_queue(self, path: QueuePath) -> Queue | None: ...

    async def get_queue(self, queue_id: int) -> Queue | None: ...

    async def list_queues(self) -> list[Queue]: ...

    async def update_queue(self, queue_id: int, changes: QueueChanges, now: datetime) -> Queue: ...

    async def delete_queue(self, queue_id: int, now: datetime) -> int:
        """Delete the queue, its journal and their messages; return the messages dropped."""
        ...

    async def purge_queue(self, queue_id: int, now: datetime, reason: Reason = Reason.PURGED) -> int:
        """Remove every available message; locked ones are removed when their lock ends."""
        ...

    async def enqueue(self, messages: Sequence[NewMessage]) -> list[EnqueueResult]:
        """Insert in one transaction, applying the §7.3 quota rules message by message: the
        queue manager's quota and throttle as stored at that moment, then the queue's."""
        ...

    async def peek(self, queue_id: int, selector: Selector, now: datetime) -> Message | None: ...

    async def take(self, queue: Queue, selector: Selector, now: datetime, claim: Claim) -> Message | None: ...

    def may_have_more(self, queue_id: int) -> bool:
        """After a take of the queue's first message: False only where the store read, when
        it took it, that the queue had nothing more available (a message made available
        since has a wake-up of its own). It only decides whether a wake-up is handed on."""
        ...

    async def take_many(self, queue: Queue, limit: int, now: datetime) -> list[Message]:
        """Receive (remove) up to `limit` available messages in queue order, in one statement."""
        ...

    async def browse(self, queue_id: int, after: int, limit: int, now: datetime) -> list[Message]: ...

    async def position_state(self, queue_id: int, lookup_id: int, now: datetime) -> PositionState: ...

    async def counter_high_water(self) -> int:
        """A settled counter (low 56 bits of lookup IDs): every message whose counter is at or
        below it is committed and available, or gone for good. Counters are allocated before
        the commit: on PostgreSQL, transactions in flight commit in any order, and a message
        sent in a transaction becomes available at that transaction's commit (both stores),
        so the value can lag behind the last counter handed out; it never goes back."""
        ...

    async def arrived_since(self, queue_id: int, counter: int) -> frozenset[int]:
        """The lookup IDs of the queue's messages whose counter is above `counter`, except
        those sent in a transaction still open: with `counter` a settled counter, what is
        already there, so that a later ARRIVED_AFTER finds only what arrives from now on."""
        ...

    async def new_message_id(self) -> str:
        """A message ID of this queue manager for a message it sends without storing it (a
        stream receipt), from the counter that numbers stored messages: never handed out twice."""
        ...

    async def end_lock(
        self, lookup_id: int, tag: str, commit: bool, now: datetime
    ) -> tuple[PositionState, int]:
        """End a two-phase read; return the state found and the queue id (0 if missing)."""
        ...

    async def create_transaction(self, record: TransactionRecord) -> None: ...

    async def get_transaction(self, transaction_id: str) -> TransactionRecord | None: ...

    async def touch_transaction(self, transaction_id: str, expires_at: datetime) -> bool: ...

    async def finish_transaction(
        self, transaction_id: str, commit: bool, now: datetime
    ) -> frozenset[int] | None:
        """Commit or abort; return the queues touched, or None if it was not active."""
        ...

    async def transaction_ttbr(self, transaction_id: str, seconds: int) -> int:
        """Record `seconds` as the transaction's first TTBR unless one is set; return that one."""
        ...

    async def due_stream_receipts(self, now: datetime, limit: int) -> list[StreamReceiptDue]:
        """Incoming streams whose receipt is due, most overdue first."""
        ...

    async def stream_receipt_sent(self, stream_id: str, last_ordinal: int, now: datetime) -> None: ...

    async def stream_receipt_failed(self, stream_id: str, retry_at: datetime | None) -> None: ...

    # -- outgoing queues (the gateway as an SRMP sender) --

    async def ensure_outgoing_queue(self, path: QueuePath, now: datetime) -> OutgoingQueue: ...

    async def list_outgoing_queues(self) -> list[OutgoingQueue]: ...

    async def get_outgoing_queue(self, queue_id: int) -> OutgoingQueue | None: ...

    async def due_outgoing_queues(self, now: datetime, owner: str) -> list[OutgoingQueue]:
        """Queues with messages, not paused, due, and not leased by a process other than `owner`."""
        ...

    async def acquire_outgoing_lease(self, queue_id: int, owner: str, now: datetime, until: datetime) -> bool:
        """Lease the sending of a queue to `owner` until `until`, in one conditional statement:
        only when nobody holds it, `owner` does, or the holder's lease ran out by `now`."""
        ...

    async def release_outgoing_lease(self, queue_id: int, owner: str) -> None:
        """Give up `owner`'s lease (nothing happens when another process holds it by now)."""
        ...

    async def outgoing_head(
        self, queue_id: int, now: datetime, resend_before: datetime
    ) -> Message | None: ...

    async def outgoing_stream_position(
        self, queue_id: int, lookup_id: int, candidate_stream_id: str, now: datetime
    ) -> OutgoingStreamPosition: ...

    async def outgoing_stream_sent(self, lookup_id: int, now: datetime) -> None: ...

    async def outgoing_stream_acknowledged(
        self, stream_id: str, last_ordinal: int, now: datetime
    ) -> int | None:
        """Remove the messages a stream receipt covers; None for a stream not sent from here."""
        ...

    async def outgoing_final_receipt(
        self, stream_id: str, message_id: str, reason: Reason, now: datetime
    ) -> bool | None:
        """Settle a message sent on `stream_id` by its final receipt (reference §4.4); False when
        no such message waits, None when the stream is not one this gateway sends."""
        ...

    async def outgoing_finished(self, queue_id: int, lookup_id: int, reason: Reason, now: datetime) -> bool:
        """Remove a message that left its outgoing queue (DELIVERED, or a failure reason)."""
        ...

    async def outgoing_failed(self, queue_id: int, error: str, retry_at: datetime, now: datetime) -> None: ...

    async def outgoing_refusal_noted(self, queue_id: int, error: str) -> None: ...

    async def set_outgoing_paused(self, queue_id: int, paused: bool, now: datetime) -> None: ...

    async def expire_in_transit(self, now: datetime, limit: int) -> int:
        """Remove messages of outgoing queues past their TTRQ (REACH_QUEUE_TIMEOUT)."""
        ...

    async def expire_due(self, now: datetime, limit: int) -> int:
        """Remove up to `limit` available messages past their TTBR (reason EXPIRED); return how many."""
        ...

    async def place(self, placements: Sequence[Placement], now: datetime) -> None:
        """Put messages the queue manager produced (dead letters, acknowledgments) in their queues."""
        ...

    async def create_cursor(self, record: CursorRecord) -> None: ...

    async def get_cursor(self, cursor_id: str) -> CursorRecord | None: ...

    async def save_cursor(self, record: CursorRecord) -> None: ...

    async def delete_cursor(self, cursor_id: str) -> bool: ...

    async def release_expired(
        self, now: datetime, forget_ids_before: datetime | None = None
    ) -> ReleaseReport:
        """Abort expired two-phase locks and transactions; close idle cursors; forget message
        IDs remembered for duplicate elimination before `forget_ids_before`."""
        ...
