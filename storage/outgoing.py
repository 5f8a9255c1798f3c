"""Outgoing queues: one per remote SRMP queue, holding messages until the remote queue manager
takes them, with the delivery state an operator looks at."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from qm.disposal import Reason
from qm.model import JournalFlags, Message
from qm.outbound import OutgoingQueue, OutgoingStreamPosition
from qm.paths import QueueKind, QueuePath
from storage import rows
from storage.consequences import Consequences, remove_past_deadline
from storage.database import Database
from storage.outgoing_room import create_outgoing_queue
from storage.tables import (
    AVAILABLE,
    messages,
    outgoing_queues,
    outgoing_stream_messages,
    outgoing_streams,
    queues,
)

m = messages.c
o = outgoing_queues.c
os_ = outgoing_streams.c
sm = outgoing_stream_messages.c
q = queues.c


class SqlOutgoing:
    def __init__(self, db: Database) -> None:
        self._db = db

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

    async def outgoing_stream_position(
        self, queue_id: int, lookup_id: int, candidate_stream_id: str, now: datetime
    ) -> OutgoingStreamPosition:
        """The message's stream ordinal, assigned at its first send and kept for its resends."""
        async with self._db.transaction() as connection:
            stream = await self._outgoing_stream(connection, queue_id, candidate_stream_id, now)
            statement = sa.select(sm.ordinal).where(sm.lookup_id == lookup_id)
            ordinal = (await connection.execute(statement)).scalar()
            if ordinal is None:
                ordinal = stream.next_ordinal
                await connection.execute(
                    sa.update(outgoing_streams)
                    .where(os_.queue_id == queue_id)
                    .values(next_ordinal=os_.next_ordinal + 1)
                )
                await connection.execute(
                    sa.insert(outgoing_stream_messages).values(
                        lookup_id=lookup_id, queue_id=queue_id, ordinal=ordinal, last_sent_at=0, sends=0
                    )
                )
            previous = await self._previous_ordinal(
                connection, queue_id, ordinal, stream.acknowledged_ordinal
            )
        return OutgoingStreamPosition(
            stream.stream_id, ordinal, None if previous == ordinal - 1 else previous
        )

    async def _outgoing_stream(
        self, connection: AsyncConnection, queue_id: int, candidate_stream_id: str, now: datetime
    ) -> sa.Row[Any]:
        """The queue's stream row, created on its first transactional send. Two writers may
        create it at once (two processes sending, a send racing a receipt): the insert does
        nothing when the row is there, and the row is read back locked (PostgreSQL: FOR UPDATE;
        SQLite has one writer), so the stream's next ordinal is advanced by one writer at a time."""
        statement = sa.select(outgoing_streams).where(os_.queue_id == queue_id).with_for_update()
        row = (await connection.execute(statement)).first()
        if row is not None:
            return row
        insert = sqlite_insert if self._db.sqlite else postgresql_insert
        await connection.execute(
            insert(outgoing_streams)
            .values(
                queue_id=queue_id,
                stream_id=candidate_stream_id,
                next_ordinal=1,
                acknowledged_ordinal=0,
                created_at=rows.to_us(now),
            )
            .on_conflict_do_nothing(index_elements=[os_.queue_id])
        )
        return (await connection.execute(statement)).one()

    @staticmethod
    async def _previous_ordinal(
        connection: AsyncConnection, queue_id: int, ordinal: int, acknowledged: int
    ) -> int:
        """The highest ordinal below `ordinal` still held here or already acknowledged: messages
        dropped at the source (refused, expired, purged) leave a gap the receiver must be told of."""
        held = (
            sa.select(sa.func.max(sm.ordinal))
            .join(messages, m.lookup_id == sm.lookup_id)
            .where(sm.queue_id == queue_id, sm.ordinal < ordinal)
        )
        highest = (await connection.execute(held)).scalar()
        return max(acknowledged, highest or 0)

    async def outgoing_stream_sent(self, lookup_id: int, now: datetime) -> None:
        async with self._db.transaction() as connection:
            await connection.execute(
                sa.update(outgoing_stream_messages)
                .where(sm.lookup_id == lookup_id)
                .values(last_sent_at=rows.to_us(now), sends=sm.sends + 1)
            )

    async def outgoing_stream_acknowledged(
        self, stream_id: str, last_ordinal: int, now: datetime
    ) -> int | None:
        """A stream receipt: every message up to `last_ordinal` reached its queue. It leaves the
        outgoing queue (DELIVERED), except a message that asked for MQMSG_DEADLETTER: that one
        gets its journal copy now and stays, never resent and no longer subject to its time to
        reach queue, until its final receipt (reference §4.4). None when the stream is not one
        this gateway sends.

        Only ordinals that were POSTed and answered 2xx (`sends` > 0) are settled, and the
        stream's acknowledged ordinal never passes the highest of them: a receipt claiming more
        than was delivered (forged, or from a confused receiver) settles nothing it claims
        beyond that."""
        async with self._db.transaction() as connection:
            statement = sa.select(os_.queue_id).where(os_.stream_id == stream_id)
            queue_id = (await connection.execute(statement)).scalar()
            if queue_id is None:
                return None
            delivered = (sm.queue_id == queue_id, sm.ordinal <= last_ordinal, sm.sends > 0)
            highest = sa.select(sa.func.max(sm.ordinal)).where(*delivered)
            acknowledged = (await connection.execute(highest)).scalar()
            covered = sa.select(sm.lookup_id).where(*delivered)
            removal = sa.delete(messages).where(
                m.lookup_id.in_(covered), m.state == AVAILABLE, sa.not_(_awaits_final_receipt())
            )
            gone = (await connection.execute(removal.returning(*messages.c))).mappings().all()
            held = await self._hold_for_final_receipt(connection, queue_id, last_ordinal, now)
            consequences = Consequences(self._db, connection, now)
            placements = [
                *await consequences.earned(gone, Reason.DELIVERED),
                *await consequences.earned(held, Reason.DELIVERED),
            ]
            await consequences.settle(gone, placements)
            await connection.execute(
                sa.delete(outgoing_stream_messages).where(
                    *delivered,
                    sa.or_(sm.acknowledged_at.is_(None), sm.lookup_id.not_in(sa.select(m.lookup_id))),
                )
            )
            if acknowledged is not None:
                await connection.execute(
                    sa.update(outgoing_streams)
                    .where(os_.queue_id == queue_id, os_.acknowledged_ordinal < acknowledged)
                    .values(acknowledged_ordinal=acknowledged)
                )
            await connection.execute(
                sa.update(outgoing_queues)
                .where(o.queue_id == queue_id)
                .values(delivered_count=o.delivered_count + len(gone) + len(held))
            )
        return len(gone) + len(held)

    @staticmethod
    async def _hold_for_final_receipt(
        connection: AsyncConnection, queue_id: int, last_ordinal: int, now: datetime
    ) -> Sequence[sa.RowMapping]:
        """Mark the covered messages that wait for their final receipt; return those newly marked."""
        waiting = sa.select(m.lookup_id).where(
            m.queue_id == queue_id, m.state == AVAILABLE, _awaits_final_receipt()
        )
        marked = (
            (
                await connection.execute(
                    sa.update(outgoing_stream_messages)
                    .where(
                        sm.queue_id == queue_id,
                        sm.ordinal <= last_ordinal,
                        sm.sends > 0,
                        sm.acknowledged_at.is_(None),
                        sm.lookup_id.in_(waiting),
                    )
                    .values(acknowledged_at=rows.to_us(now))
                    .returning(sm.lookup_id)
                )
            )
            .scalars()
            .all()
        )
        if not marked:
            return []
        reached = sa.update(messages).where(m.lookup_id.in_(marked)).values(ttrq_deadline=None)
        return (await connection.execute(reached.returning(*messages.c))).mappings().all()

    async def outgoing_final_receipt(
        self, stream_id: str, message_id: str, reason: Reason, now: datetime
    ) -> bool | None:
        """A final receipt for a message sent on `stream_id`: it leaves the outgoing queue, to
        the transactional dead-letter queue when the outcome is negative (and it asked for
        that). False when no such message waits here, or it was never answered 2xx (nothing
        the receiver could report on); None when the stream is not ours."""
        async with self._db.transaction() as connection:
            statement = sa.select(os_.queue_id).where(os_.stream_id == stream_id)
            queue_id = (await connection.execute(statement)).scalar()
            if queue_id is None:
                return None
            delivered = sa.select(sm.lookup_id).where(sm.queue_id == queue_id, sm.sends > 0)
            removal = sa.delete(messages).where(
                m.queue_id == queue_id,
                m.message_id == message_id,
                m.state == AVAILABLE,
                m.transactional,
                m.lookup_id.in_(delivered),  # a receiver reports only on what it took
            )
            gone = (await connection.execute(removal.returning(*messages.c))).mappings().all()
            await Consequences(self._db, connection, now).concluded(gone, reason)
            ids = [row["lookup_id"] for row in gone]
            if ids:
                await connection.execute(sa.delete(outgoing_stream_messages).where(sm.lookup_id.in_(ids)))
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


def _awaits_final_receipt() -> sa.ColumnElement[bool]:
    """A transactional message sent with MQMSG_DEADLETTER: its sender waits for the final
    receipt (reference §4.4) before it forgets the message."""
    return sa.and_(m.transactional, m.journal.op("&")(JournalFlags.DEADLETTER.value) != 0)
