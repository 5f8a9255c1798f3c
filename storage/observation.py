"""What operators watch, read from the store at scrape and probe time: queue totals with their
journals', dead letters by class, outgoing queues, stream receipts owed, the schema revision.

Read from the database rather than counted in a process, so that every worker process of a
deployment answers the same numbers. Each read is one statement in autocommit."""

from __future__ import annotations

from dataclasses import dataclass

import sqlalchemy as sa

from qm.paths import QueueKind, SystemQueue
from storage.database import Database
from storage.tables import messages, outgoing_queues, queues, srmp_streams

q = queues.c
_JOURNAL = queues.alias("journal_of_queue")
j = _JOURNAL.c

QUEUE_TOTALS = (
    sa.select(
        q.kind,
        q.name,
        q.message_count,
        q.byte_count,
        sa.func.coalesce(j.message_count, 0).label("journal_message_count"),
        sa.func.coalesce(j.byte_count, 0).label("journal_byte_count"),
    )
    .outerjoin(_JOURNAL, j.journal_of == q.id)
    .where(q.journal_of.is_(None), q.kind != QueueKind.OUTGOING.value)
)
"""Every queue but journals and outgoing queues, with its journal's totals: one pass over the
queue rows (totals live on them, docs/store.md), however many messages there are."""

_DEAD_LETTER_NAMES = (SystemQueue.DEADLETTER.value, SystemQueue.DEADXACT.value)
DEAD_LETTERS = (
    sa.select(q.name, messages.c.message_class, sa.func.count().label("messages"))
    .join(messages, messages.c.queue_id == q.id)
    .where(q.kind == QueueKind.SYSTEM.value, q.name.in_(_DEAD_LETTER_NAMES), q.journal_of.is_(None))
    .group_by(q.name, messages.c.message_class)
)
"""Dead letters by queue and class: its cost follows the dead letters kept, not the queues."""

_OLDEST = (
    sa.select(messages.c.queue_id, sa.func.min(messages.c.arrived_time).label("oldest_arrived"))
    .join(outgoing_queues, outgoing_queues.c.queue_id == messages.c.queue_id)
    .group_by(messages.c.queue_id)
    .subquery()
)
OUTGOING = (
    sa.select(
        q.name,
        q.message_count,
        q.byte_count,
        outgoing_queues.c.paused,
        outgoing_queues.c.attempts,
        _OLDEST.c.oldest_arrived,
        outgoing_queues.c.delivered_count,
    )
    .join(outgoing_queues, outgoing_queues.c.queue_id == q.id)
    .outerjoin(_OLDEST, _OLDEST.c.queue_id == q.id)
)

RECEIPTS_OWED = sa.select(sa.func.count()).where(srmp_streams.c.receipt_due_at.is_not(None))
SCHEMA_REVISION = sa.text("SELECT version_num FROM alembic_version")


@dataclass(frozen=True, slots=True)
class QueueTotals:
    kind: QueueKind
    name: str
    messages: int
    bytes: int
    journal_messages: int
    journal_bytes: int


@dataclass(frozen=True, slots=True)
class DeadLetters:
    queue: SystemQueue
    message_class: int
    messages: int


@dataclass(frozen=True, slots=True)
class OutgoingTotals:
    name: str
    """The remote queue's URL (the outgoing queue's name)."""
    messages: int
    bytes: int
    paused: bool
    attempts: int
    """Failed attempts since the last delivery."""
    oldest_arrived_us: int | None
    """Arrival of the oldest message waiting, in microseconds since the epoch."""
    delivered: int
    """Messages the destination took since the outgoing queue was created."""


@dataclass(frozen=True, slots=True)
class Observation:
    queues: list[QueueTotals]
    dead_letters: list[DeadLetters]
    outgoing: list[OutgoingTotals]
    receipts_owed: int


class SqlObservation:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def observe(self) -> Observation:
        """Everything a scrape reports from the store, each part one statement."""
        async with self._db.reading() as connection:
            found = (await connection.execute(QUEUE_TOTALS)).all()
            dead = (await connection.execute(DEAD_LETTERS)).all()
            outgoing = (await connection.execute(OUTGOING)).all()
            owed = (await connection.execute(RECEIPTS_OWED)).scalar_one()
        return Observation(
            queues=[QueueTotals(QueueKind(row[0]), *row[1:]) for row in found],
            dead_letters=[DeadLetters(SystemQueue(row[0]), row[1], row[2]) for row in dead],
            outgoing=[OutgoingTotals(*row) for row in outgoing],
            receipts_owed=int(owed),
        )

    async def schema_revision(self) -> str | None:
        """The Alembic revision the database is at (None: none recorded). Raises the driver's
        error when the database cannot be reached or was never migrated."""
        async with self._db.reading() as connection:
            revision = (await connection.execute(SCHEMA_REVISION)).scalar()
        return None if revision is None else str(revision)
