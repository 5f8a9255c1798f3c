"""Outgoing queues: one per remote SRMP queue, holding messages until the remote queue manager
takes them, with the delivery state an operator looks at and the lease of the process that
sends each (their streams and receipts: storage.outgoing_streams)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa

from qm.disposal import Reason
from qm.model import Message
from qm.outbound import OutgoingQueue
from qm.paths import QueueKind, QueuePath
from storage import rows
from storage.consequences import Consequences, remove_past_deadline
from storage.outgoing_room import create_outgoing_queue
from storage.outgoing_streams import SqlOutgoingStreams
from storage.tables import (
    AVAILABLE,
    messages,
    outgoing_queues,
    outgoing_stream_messages,
    queues,
)

m = messages.c
o = outgoing_queues.c
sm = outgoing_stream_messages.c
q = queues.c


class SqlOutgoing(SqlOutgoingStreams):
    """The outgoing queues and their delivery state; their streams' ordinals and receipts are
    SqlOutgoingStreams'."""

    async def ensure_outgoing_queue(self, path: QueuePath, now: datetime) -> OutgoingQueue:
        try:
            async with self._db.transaction() as connection:
                queue_id = await create_outgoing_queue(connection, path, now)
        except sa.exc.IntegrityError:  # created concurrently by another process
            async with self._db.engine.connect() as connection:
                queue_id = (
                    await connection.execute(sa.select(q.id).where(q.path_key == path.key))
                ).scalar_one()
        found = await self.get_outgoing_queue(queue_id)
        assert found is not None
        return found

    async def list_outgoing_queues(self, after: int = 0, limit: int | None = None) -> list[OutgoingQueue]:
        return await self._outgoing(q.kind == QueueKind.OUTGOING.value, q.id > after, limit=limit)

    async def remove_idle_outgoing_queues(self, before: datetime, now: datetime, limit: int) -> int:
        """One DELETE, its conditions checked again on each row it removes: a message written
        meanwhile keeps its queue (no message row is ever removed here)."""
        before_us, now_us = rows.to_us(before), rows.to_us(now)
        idle = sa.and_(
            q.kind == QueueKind.OUTGOING.value,
            q.message_count == 0,
            q.created_at < before_us,
            ~sa.exists().where(m.queue_id == q.id),
            q.id.in_(
                sa.select(o.queue_id).where(
                    sa.or_(o.last_attempt_at.is_(None), o.last_attempt_at < before_us),
                    sa.or_(o.owner.is_(None), o.lease_expires_at < now_us),
                )
            ),
        )
        candidates = sa.select(q.id).where(idle).order_by(q.id).limit(limit).scalar_subquery()
        async with self._db.transaction() as connection:
            gone = await connection.execute(sa.delete(queues).where(q.id.in_(candidates), idle))
        return int(gone.rowcount)

    async def get_outgoing_queue(self, queue_id: int) -> OutgoingQueue | None:
        found = await self._outgoing(q.id == queue_id)
        return found[0] if found else None

    async def due_outgoing_queues(self, now: datetime, owner: str) -> list[OutgoingQueue]:
        """Queues with messages, not paused, whose next attempt is due, that no other process
        holds a live lease on."""
        now_us = rows.to_us(now)
        return await self._outgoing(
            o.paused.is_(False),
            o.next_attempt_at <= now_us,
            q.message_count > 0,
            _lease_open_to(owner, now_us),
        )

    async def acquire_outgoing_lease(self, queue_id: int, owner: str, now: datetime, until: datetime) -> bool:
        """One conditional UPDATE: atomic on SQLite (one writer at a time) and on PostgreSQL (a
        concurrent UPDATE of the row waits, then re-checks the condition on the row it wrote)."""
        async with self._db.transaction() as connection:
            taken = await connection.execute(
                sa.update(outgoing_queues)
                .where(o.queue_id == queue_id, _lease_open_to(owner, rows.to_us(now)))
                .values(owner=owner, lease_expires_at=rows.to_us(until))
            )
        return bool(taken.rowcount)

    async def release_outgoing_lease(self, queue_id: int, owner: str) -> None:
        async with self._db.transaction() as connection:
            await connection.execute(
                sa.update(outgoing_queues)
                .where(o.queue_id == queue_id, o.owner == owner)
                .values(owner=None, lease_expires_at=None)
            )

    async def _outgoing(
        self, *conditions: sa.ColumnElement[bool], limit: int | None = None
    ) -> list[OutgoingQueue]:
        statement = (
            sa.select(queues, outgoing_queues)
            .join(outgoing_queues, o.queue_id == q.id)
            .where(*conditions)
            .order_by(q.id)
            .limit(limit)
        )
        async with self._db.engine.connect() as connection:
            found = (await connection.execute(statement)).mappings().all()
        return [_outgoing_from_row(row) for row in found]

    async def outgoing_head(self, queue_id: int, now: datetime, resend_before: datetime) -> Message | None:
        """The next message to send: queue order, not past its time to reach queue, and not a
        stream message sent after `resend_before` (it waits for its receipt)."""
        now_us = rows.to_us(now)
        waiting = sa.select(sm.lookup_id).where(
            sm.queue_id == queue_id,
            sa.or_(sm.last_sent_at > rows.to_us(resend_before), sm.acknowledged_at.is_not(None)),
        )
        statement = (
            sa.select(messages)
            .where(
                m.queue_id == queue_id,
                m.state == AVAILABLE,
                sa.or_(m.ttrq_deadline.is_(None), m.ttrq_deadline > now_us),
                m.lookup_id.not_in(waiting),
            )
            .order_by(m.lookup_id)
            .limit(1)
        )
        async with self._db.engine.connect() as connection:
            row = (await connection.execute(statement)).mappings().first()
        return None if row is None else rows.message_from_row(row)

    async def outgoing_finished(self, queue_id: int, lookup_id: int, reason: Reason, now: datetime) -> bool:
        """Remove a sent (DELIVERED) or refused message with what follows; False if it was gone."""
        async with self._db.transaction() as connection:
            statement = sa.delete(messages).where(m.lookup_id == lookup_id, m.state == AVAILABLE)
            gone = (await connection.execute(statement.returning(*messages.c))).mappings().all()
            await Consequences(self._db, connection, now).removed(gone, reason)
            await connection.execute(sa.delete(outgoing_stream_messages).where(sm.lookup_id == lookup_id))
            await connection.execute(
                sa.update(outgoing_queues)
                .where(o.queue_id == queue_id)
                .values(
                    attempts=0,
                    last_error=None if reason is Reason.DELIVERED else o.last_error,
                    last_attempt_at=rows.to_us(now),
                    delivered_count=o.delivered_count + (1 if gone and reason is Reason.DELIVERED else 0),
                )
            )
        return bool(gone)

    async def outgoing_failed(self, queue_id: int, error: str, retry_at: datetime, now: datetime) -> None:
        await self._update_outgoing(
            queue_id,
            attempts=o.attempts + 1,
            last_error=error[:1000],
            next_attempt_at=rows.to_us(retry_at),
            last_attempt_at=rows.to_us(now),
        )

    async def outgoing_refusal_noted(self, queue_id: int, error: str) -> None:
        await self._update_outgoing(queue_id, last_error=error[:1000])

    async def set_outgoing_paused(self, queue_id: int, paused: bool, now: datetime) -> None:
        """Pause, or resume with an attempt at once (an operator resumes after fixing something)."""
        values: dict[str, Any] = {"paused": paused}
        if not paused:
            values |= {"next_attempt_at": rows.to_us(now), "attempts": 0}
        await self._update_outgoing(queue_id, **values)

    async def _update_outgoing(self, queue_id: int, **values: Any) -> None:
        async with self._db.transaction() as connection:
            await connection.execute(
                sa.update(outgoing_queues).where(o.queue_id == queue_id).values(**values)
            )

    async def expire_in_transit(self, now: datetime, limit: int) -> int:
        """Messages whose time to reach queue passed while waiting in an outgoing queue (§2.2).
        Looks before it writes: most passes find nothing and take no write lock."""
        now_us = rows.to_us(now)
        outgoing = sa.select(o.queue_id).scalar_subquery()
        due = (
            sa.select(m.lookup_id)
            .where(m.ttrq_deadline <= now_us, m.state == AVAILABLE, m.queue_id.in_(outgoing))
            .order_by(m.ttrq_deadline)
            .limit(limit)
        )
        async with self._db.engine.connect() as connection:
            if (await connection.execute(due.limit(1))).first() is None:
                return 0
        return await remove_past_deadline(self._db, due, "ttrq_deadline", Reason.REACH_QUEUE_TIMEOUT, now)


def _lease_open_to(owner: str, now_us: int) -> sa.ColumnElement[bool]:
    """Nobody holds the queue's lease, `owner` does, or its holder let it run out."""
    return sa.or_(o.owner.is_(None), o.owner == owner, o.lease_expires_at <= now_us)


def _outgoing_from_row(row: sa.RowMapping) -> OutgoingQueue:
    return OutgoingQueue(
        queue=rows.queue_from_row(row),
        url=row["url"],
        paused=row["paused"],
        attempts=row["attempts"],
        next_attempt_at=rows.from_us(row["next_attempt_at"]),
        last_error=row["last_error"],
        last_attempt_at=rows.optional_time(row["last_attempt_at"]),
        delivered_count=row["delivered_count"],
        owner=row["owner"],
        lease_expires_at=rows.optional_time(row["lease_expires_at"]),
    )
