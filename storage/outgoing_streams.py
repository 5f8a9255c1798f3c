"""The streams of outgoing queues (reference §4.1): each transactional message's ordinal in its
outgoing queue's stream, kept for its resends, and the stream receipts and final receipts
(§4.4) that settle what was sent."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from qm.disposal import Reason
from qm.model import JournalFlags
from qm.outbound import OutgoingStreamPosition
from storage import rows
from storage.consequences import Consequences
from storage.database import Database
from storage.tables import (
    AVAILABLE,
    messages,
    outgoing_queues,
    outgoing_stream_messages,
    outgoing_streams,
)

m = messages.c
os_ = outgoing_streams.c
sm = outgoing_stream_messages.c
o = outgoing_queues.c


class SqlOutgoingStreams:
    def __init__(self, db: Database) -> None:
        self._db = db

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


def _awaits_final_receipt() -> sa.ColumnElement[bool]:
    """A transactional message sent with MQMSG_DEADLETTER: its sender waits for the final
    receipt (reference §4.4) before it forgets the message."""
    return sa.and_(m.transactional, m.journal.op("&")(JournalFlags.DEADLETTER.value) != 0)
