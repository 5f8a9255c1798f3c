"""Incoming SRMP streams (reference §4.2-§4.3): acceptance inside the enqueue's transaction, and
the bookkeeping of stream receipts."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from qm import streams
from qm.streams import StreamPosition, StreamReceiptDue
from storage import rows
from storage.database import Database
from storage.tables import srmp_streams

s = srmp_streams.c


@dataclass(frozen=True, slots=True)
class StreamState:
    last_ordinal: int
    first_unacknowledged_at: int | None


class SqlStreams:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def stream_state(self, connection: AsyncConnection, stream_id: str) -> StreamState | None:
        statement = sa.select(s.last_ordinal, s.first_unacknowledged_at).where(s.stream_id == stream_id)
        row = (await connection.execute(statement)).first()
        return None if row is None else StreamState(row.last_ordinal, row.first_unacknowledged_at)

    async def room_for_stream(self, connection: AsyncConnection, position: StreamPosition) -> bool:
        """The stream's sender may open another one (StreamPosition.max_streams_per_sender), and
        all senders together have fewer than StreamPosition.max_streams.
        Counted, then inserted by advance_stream: concurrent first messages of new streams from
        one sender may pass the limit by as many as arrive together."""
        counted = sa.select(sa.func.count()).select_from(srmp_streams)
        limit = position.max_streams_per_sender
        if limit is not None:
            sender = streams.stream_sender(position.stream_id)
            if int((await connection.execute(counted.where(s.sender == sender))).scalar_one()) >= limit:
                return False
        total = position.max_streams
        return total is None or int((await connection.execute(counted)).scalar_one()) < total

    async def forget_idle_streams(self, before: datetime, limit: int) -> int:
        """Delete up to `limit` streams untouched since `before` that owe their sender nothing
        (no receipt due): a sender resuming one after that starts a new stream."""
        idle = (
            sa.select(s.stream_id)
            .where(s.updated_at < rows.to_us(before), s.receipt_due_at.is_(None))
            .order_by(s.updated_at)
            .limit(limit)
        )
        async with self._db.transaction() as connection:
            gone = await connection.execute(
                sa.delete(srmp_streams).where(
                    s.stream_id.in_(idle.scalar_subquery()), s.updated_at < rows.to_us(before)
                )
            )
        return int(gone.rowcount)

    async def advance_stream(
        self, connection: AsyncConnection, position: StreamPosition, state: StreamState | None, now: datetime
    ) -> bool:
        """Record `position` as the stream's last accepted message; False when a concurrent
        enqueue advanced the stream first (this message is then a duplicate)."""
        now_us = rows.to_us(now)
        first = now_us
        if state is not None and state.first_unacknowledged_at is not None:
            first = state.first_unacknowledged_at
        due = rows.to_us(streams.receipt_due(rows.optional_time(first), now))
        if state is None:
            insert = sqlite_insert if self._db.sqlite else postgresql_insert
            statement = (
                insert(srmp_streams)
                .values(
                    stream_id=position.stream_id,
                    sender=streams.stream_sender(position.stream_id),
                    last_ordinal=position.current,
                    acknowledged_ordinal=0,
                    send_receipts_to=position.send_receipts_to or "",
                    destination=position.destination,
                    first_unacknowledged_at=first,
                    receipt_due_at=due,
                    receipt_attempts=0,
                    created_at=now_us,
                    updated_at=now_us,
                )
                .on_conflict_do_nothing()
            )
            return bool((await connection.execute(statement)).rowcount)
        advance = (
            sa.update(srmp_streams)
            .where(s.stream_id == position.stream_id, s.last_ordinal == state.last_ordinal)
            .values(
                last_ordinal=position.current,
                first_unacknowledged_at=first,
                receipt_due_at=due,
                updated_at=now_us,
            )
        )
        return bool((await connection.execute(advance)).rowcount)

    async def due_stream_receipts(self, now: datetime, limit: int) -> list[StreamReceiptDue]:
        statement = (
            sa.select(srmp_streams)
            .where(s.receipt_due_at <= rows.to_us(now))
            .order_by(s.receipt_due_at)
            .limit(limit)
        )
        async with self._db.engine.connect() as connection:
            found = (await connection.execute(statement)).mappings().all()
        return [
            StreamReceiptDue(
                row["stream_id"],
                row["last_ordinal"],
                row["send_receipts_to"],
                row["destination"],
                row["receipt_attempts"],
            )
            for row in found
        ]

    async def stream_receipt_sent(self, stream_id: str, last_ordinal: int, now: datetime) -> None:
        """The sender now knows of every message up to `last_ordinal`. Messages accepted while
        the receipt was on its way keep the stream due."""
        async with self._db.transaction() as connection:
            await connection.execute(
                sa.update(srmp_streams)
                .where(s.stream_id == stream_id)
                .values(
                    acknowledged_ordinal=sa.case(
                        (s.acknowledged_ordinal > last_ordinal, s.acknowledged_ordinal), else_=last_ordinal
                    ),
                    receipt_attempts=0,
                    updated_at=rows.to_us(now),
                )
            )
            await connection.execute(
                sa.update(srmp_streams)
                .where(s.stream_id == stream_id, s.last_ordinal <= s.acknowledged_ordinal)
                .values(receipt_due_at=None, first_unacknowledged_at=None)
            )

    async def stream_receipt_failed(self, stream_id: str, retry_at: datetime | None) -> None:
        """Count a failed receipt and retry at `retry_at` (None: never; a later message re-arms it)."""
        async with self._db.transaction() as connection:
            await connection.execute(
                sa.update(srmp_streams)
                .where(s.stream_id == stream_id)
                .values(
                    receipt_attempts=s.receipt_attempts + 1,
                    receipt_due_at=None if retry_at is None else rows.to_us(retry_at),
                )
            )
