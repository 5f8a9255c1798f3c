"""The store port: what the queue manager needs from persistence, as one small repository per
concern (qm.repositories), and the values they take and return.

`storage/` implements it on SQLite and PostgreSQL. Each repository method is one database
transaction; each returns frozen values, never live database objects.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from qm.disposal import DisposalPolicy
from qm.model import Message, NewMessage
from qm.wakeups import WakeUps

if TYPE_CHECKING:
    from qm.repositories import (
        CursorRepository,
        Housekeeping,
        MessageRepository,
        OutgoingRepository,
        QueueRepository,
        RedriveRepository,
        StreamRepository,
        TransactionRepository,
    )
    from qm.triggers.port import TriggerStore


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


@dataclass(frozen=True, slots=True)
class MessageFilter:
    """What a browse keeps (an operator's list): every condition given must hold."""

    label: str | None = None
    """Part of the label, any case."""
    message_class: int | None = None
    priority: int | None = None
    arrived_after: datetime | None = None
    arrived_before: datetime | None = None
    correlation_id: bytes | None = None

    @property
    def empty(self) -> bool:
        return self == NO_FILTER


NO_FILTER = MessageFilter()


@dataclass(frozen=True, slots=True)
class Footprint:
    """What a message's answer grows with, read before its body is: the body's and the
    extension's bytes, and the characters of its texts (label and format names)."""

    body: int
    extension: int
    text: int


def base64_size(size: int) -> int:
    return (size + 2) // 3 * 4


@dataclass(frozen=True, slots=True)
class Budget:
    """How many messages one answer may carry: those whose weights, in the order they are read,
    add up to `max_bytes` at most, and always one. A message weighs `per_message`, its body and
    extension in base64, and `text_character_bytes` per character of its texts: a sum the
    store can also compute in SQL (PostgreSQL's receive claim, storage/claims.py)."""

    max_bytes: int
    per_message: int
    text_character_bytes: int

    def weigh(self, footprint: Footprint) -> int:
        return (
            self.per_message
            + base64_size(footprint.body)
            + base64_size(footprint.extension)
            + self.text_character_bytes * footprint.text
        )

    def fitting(self, footprints: Sequence[Footprint]) -> int:
        """How many of the first messages fit; at least one (none of none)."""
        total = 0
        for count, footprint in enumerate(footprints):
            total += self.weigh(footprint)
            if total > self.max_bytes:
                return max(count, 1)
        return len(footprints)


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
    STREAM_LIMIT_REACHED = 5
    """The first message of a new SRMP stream from a sender that has as many incoming streams
    as ManagerConfig.max_streams_per_sender allows, or when all senders together have
    max_streams: not stored, the sender retries later."""


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


Reshape = Callable[[Message], NewMessage]
"""What a message chosen by an operator becomes in its new queue (qm.administration's rules):
the store calls it inside the move's transaction; an MqError it raises undoes the whole move."""


@dataclass(frozen=True, slots=True)
class Moved:
    """A message that changed queue: its lookup ID before, and the message as now stored."""

    old_lookup_id: int
    message: Message


class Store(Protocol):
    """The repositories, over one database and one queue manager."""

    @property
    def queues(self) -> QueueRepository: ...

    @property
    def messages(self) -> MessageRepository: ...

    @property
    def transactions(self) -> TransactionRepository: ...

    @property
    def cursors(self) -> CursorRepository: ...

    @property
    def streams(self) -> StreamRepository: ...

    @property
    def outgoing(self) -> OutgoingRepository: ...

    @property
    def housekeeping(self) -> Housekeeping: ...

    @property
    def triggers(self) -> TriggerStore: ...

    @property
    def redrives(self) -> RedriveRepository: ...

    def attach(self, policy: DisposalPolicy, wakeups: WakeUps) -> None:
        """The rules for consequences, and whom to tell after a commit changed a queue."""
        ...

    async def close(self) -> None: ...
