"""The store port's repositories: everything the queue manager needs from persistence, one
small protocol per concern, composed by qm.store.Store.

`storage/` implements them on SQLite and PostgreSQL. Each method is one database
transaction; each returns frozen values, never live database objects.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from qm.disposal import Placement, Reason
from qm.model import Message, NewMessage, Queue, QueueChanges, QueueManagerInfo, QueueSettings
from qm.outbound import OutgoingQueue, OutgoingStreamPosition
from qm.paths import QueuePath
from qm.redrives import RedriveBatch, Redriven, StagedDeadLetter
from qm.store import (
    NO_FILTER,
    Budget,
    Claim,
    CursorRecord,
    EnqueueResult,
    MessageFilter,
    Moved,
    PositionState,
    ReleaseReport,
    Reshape,
    Selector,
    TransactionRecord,
)
from qm.streams import StreamReceiptDue


class QueueRepository(Protocol):
    """Queues and the queue manager's identity and machine quota."""

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


class MessageRepository(Protocol):
    """Messages: sends, reads, claims and two-phase lock ends, counters."""

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

    async def take_many(
        self, queue: Queue, limit: int, now: datetime, budget: Budget | None = None
    ) -> list[Message]:
        """Receive (remove) up to `limit` available messages in queue order, in one statement;
        with a budget, only as many as fit in it (always at least one)."""
        ...

    async def browse(
        self, queue_id: int, after: int, limit: int, now: datetime, where: MessageFilter = NO_FILTER
    ) -> list[Message]:
        """Available messages in queue order after a lookup ID, those `where` keeps."""
        ...

    async def browse_within(
        self,
        queue_id: int,
        after: int,
        limit: int,
        now: datetime,
        budget: Budget,
        where: MessageFilter = NO_FILTER,
    ) -> tuple[list[Message], bool]:
        """`browse`, stopping where the messages would pass the budget (always at least one
        message); True when it stopped before the end of the queue or at `limit`."""
        ...

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

    async def place(self, placements: Sequence[Placement], now: datetime) -> None:
        """Put messages the queue manager produced (dead letters, acknowledgments) in their queues."""
        ...

    async def move(
        self, queue_id: int, lookup_ids: Sequence[int], reshape: Reshape, now: datetime
    ) -> list[Moved]:
        """Take the chosen available messages (in lookup-ID order) out of the queue and store
        what `reshape` makes of each, in one transaction, all or none: MQ_ERROR_MESSAGE_NOT_FOUND
        (missing or expired), MQ_ERROR_MESSAGE_LOCKED_UNDER_TRANSACTION, MQ_ERROR_QUEUE_NOT_FOUND
        (a target deleted meanwhile), MQ_ERROR_INSUFFICIENT_RESOURCES (a target's quota). Earns
        nothing: no journal copy, no acknowledgment."""
        ...

    async def insert_all(self, batch: Sequence[NewMessage]) -> list[Message]:
        """Store every message or none, the quotas checked on the whole batch."""
        ...


class TransactionRepository(Protocol):
    """MSMQ transactions as rows (any process on the database can use them)."""

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


class CursorRepository(Protocol):
    """Cursors as rows."""

    async def create_cursor(self, record: CursorRecord) -> None: ...

    async def get_cursor(self, cursor_id: str) -> CursorRecord | None: ...

    async def save_cursor(self, record: CursorRecord) -> None: ...

    async def delete_cursor(self, cursor_id: str) -> bool: ...


class StreamRepository(Protocol):
    """Incoming SRMP streams: the stream receipts this gateway owes (reference §4.3)."""

    async def due_stream_receipts(self, now: datetime, limit: int) -> list[StreamReceiptDue]:
        """Incoming streams whose receipt is due, most overdue first."""
        ...

    async def stream_receipt_sent(self, stream_id: str, last_ordinal: int, now: datetime) -> None: ...

    async def stream_receipt_failed(self, stream_id: str, retry_at: datetime | None) -> None: ...

    async def forget_idle_streams(self, before: datetime, limit: int) -> int:
        """Delete up to `limit` incoming streams untouched since `before` that owe nothing."""
        ...


class OutgoingRepository(Protocol):
    """Outgoing queues: the gateway as an SRMP sender."""

    async def ensure_outgoing_queue(self, path: QueuePath, now: datetime) -> OutgoingQueue: ...

    async def list_outgoing_queues(self, after: int = 0, limit: int | None = None) -> list[OutgoingQueue]:
        """In queue ID order, those with an ID above `after`; at most `limit` (None: all)."""
        ...

    async def remove_idle_outgoing_queues(self, before: datetime, now: datetime, limit: int) -> int:
        """Delete up to `limit` outgoing queues holding no message, created and last attempted
        before `before`, that no process holds a live lease on; return how many."""
        ...

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


class Housekeeping(Protocol):
    """Timers and leftovers: expired locks, idle transactions and cursors, TTBR expiry."""

    async def release_expired(
        self, now: datetime, forget_ids_before: datetime | None = None
    ) -> ReleaseReport:
        """Abort expired two-phase locks and transactions; close idle cursors; forget message
        IDs remembered for duplicate elimination before `forget_ids_before`."""
        ...

    async def expire_due(self, now: datetime, limit: int) -> int:
        """Remove up to `limit` available messages past their TTBR (reason EXPIRED); return how many."""
        ...


class RedriveRepository(Protocol):
    """Redrive batches staged by the pipeline (qm.redrives)."""

    async def get_batch(self, batch_id: str) -> RedriveBatch | None: ...

    async def batches_in(self, status: str, staged_before: datetime | None) -> list[str]:
        """Batches with `status` (staged before `staged_before`, when given), oldest first."""
        ...

    async def staged(self, batch_id: str, after: int, limit: int) -> list[StagedDeadLetter]:
        """Up to `limit` of the batch's staged dead letters with a lookup ID above `after`,
        in lookup-ID order, each once, marked when the ledger has it already."""
        ...

    async def settle(self, batch_id: str, done: Sequence[Redriven], now: datetime) -> None:
        """One transaction: ledger rows for those sent, live originals out of their
        dead-letter queues (available ones, totals kept), their staging rows deleted."""
        ...

    async def note(self, batch_id: str, resent: int, error: str) -> None:
        """Record progress and why the batch waits for the next pass."""
        ...

    async def finish(self, batch_id: str, status: str, resent: int, error: str | None, now: datetime) -> None:
        """Applied or failed: the batch's remaining staging rows deleted."""
        ...
