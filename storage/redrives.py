"""Redrive batches staged by the pipeline: read in lookup-ID order, settled chunk by chunk
(ledger, live originals out of their dead-letter queues with totals, staging rows gone),
finished. The sends themselves go through the queue manager (qm/redrives.py)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from qm.paths import SystemQueue
from qm.redrives import RedriveBatch, Redriven, StagedDeadLetter
from storage import rows, totals
from storage.database import Database
from storage.tables import AVAILABLE, messages, queues, redrive_batches, redrive_ledger, redrive_staging

b = redrive_batches.c
s = redrive_staging.c
m = messages.c

DEAD_LETTER_NAMES = [SystemQueue.DEADLETTER.value, SystemQueue.DEADXACT.value]
DEAD_LETTER_QUEUES = (
    sa.select(queues.c.id)
    .where(queues.c.kind == "system", queues.c.name.in_(DEAD_LETTER_NAMES))
    .scalar_subquery()
)


class SqlRedrives:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def get_batch(self, batch_id: str) -> RedriveBatch | None:
        async with self._db.reading() as connection:
            row = (await connection.execute(sa.select(redrive_batches).where(b.batch_id == batch_id))).first()
        if row is None:
            return None
        return RedriveBatch(
            batch_id=row.batch_id,
            status=row.status,
            staged_count=row.staged_count,
            resent_count=row.resent_count,
            skipped_count=row.skipped_count,
            error=row.error,
            staged_at=rows.from_us(row.staged_at),
            finished_at=rows.optional_time(row.finished_at),
        )

    async def batches_in(self, status: str, staged_before: datetime | None) -> list[str]:
        statement = sa.select(b.batch_id).where(b.status == status).order_by(b.staged_at, b.batch_id)
        if staged_before is not None:
            statement = statement.where(b.staged_at < rows.to_us(staged_before))
        async with self._db.reading() as connection:
            return [row.batch_id for row in await connection.execute(statement)]

    async def staged(self, batch_id: str, after: int, limit: int) -> list[StagedDeadLetter]:
        ledger = sa.exists().where(redrive_ledger.c.source_lookup_id == s.source_lookup_id)
        statement = (
            sa.select(redrive_staging, ledger.label("already_redriven"))
            .where(s.batch_id == batch_id, s.source_lookup_id > after)
            .order_by(s.source_lookup_id)
            .limit(limit)
        )
        async with self._db.reading() as connection:
            found = (await connection.execute(statement)).all()
        unique = {row.source_lookup_id: row for row in found}  # a staging retry may repeat a row
        return [
            StagedDeadLetter(
                source_lookup_id=row.source_lookup_id,
                target_queue_id=row.target_queue_id,
                label=row.label,
                body=bytes(row.body),
                body_type=row.body_type,
                priority=row.priority,
                correlation_id=None if row.correlation_id is None else bytes(row.correlation_id),
                app_specific=row.app_specific,
                delivery=row.delivery,
                ttbr_seconds=row.ttbr_seconds,
                ttrq_seconds=row.ttrq_seconds,
                already_redriven=bool(row.already_redriven),
            )
            for row in unique.values()
        ]

    async def settle(self, batch_id: str, done: Sequence[Redriven], now: datetime) -> None:
        sent = [item for item in done if item.new_lookup_id is not None]
        ids = [item.source_lookup_id for item in done]
        insert = sqlite_insert if self._db.sqlite else postgresql_insert
        async with self._db.transaction() as connection:
            if sent:
                ledger = insert(redrive_ledger).on_conflict_do_nothing()
                await connection.execute(
                    ledger,
                    [
                        {
                            "source_lookup_id": item.source_lookup_id,
                            "batch_id": batch_id,
                            "new_lookup_id": item.new_lookup_id,
                            "target_queue_id": item.target_queue_id,
                            "redriven_at": rows.to_us(now),
                        }
                        for item in sent
                    ],
                )
                # Message rows first, then the queue rows in ID order (docs/store.md's lock order).
                originals = (
                    sa.delete(messages)
                    .where(
                        m.lookup_id.in_([item.source_lookup_id for item in sent]),
                        m.queue_id.in_(DEAD_LETTER_QUEUES),
                        m.state == AVAILABLE,
                    )
                    .returning(m.queue_id, m.body_size)
                )
                removed = (await connection.execute(originals)).mappings().all()
                await totals.add_to_totals(connection, removed, -1)
            await connection.execute(
                sa.delete(redrive_staging).where(s.batch_id == batch_id, s.source_lookup_id.in_(ids))
            )
            await connection.execute(
                sa.update(redrive_batches)
                .where(b.batch_id == batch_id)
                .values(skipped_count=b.skipped_count + (len(done) - len(sent)))
            )

    async def note(self, batch_id: str, resent: int, error: str) -> None:
        async with self._db.transaction() as connection:
            progress = sa.update(redrive_batches).where(b.batch_id == batch_id)
            await connection.execute(progress.values(resent_count=resent, error=error))

    async def finish(self, batch_id: str, status: str, resent: int, error: str | None, now: datetime) -> None:
        async with self._db.transaction() as connection:
            await connection.execute(sa.delete(redrive_staging).where(s.batch_id == batch_id))
            await connection.execute(
                sa.update(redrive_batches)
                .where(b.batch_id == batch_id)
                .values(status=status, resent_count=resent, error=error, finished_at=rows.to_us(now))
            )
