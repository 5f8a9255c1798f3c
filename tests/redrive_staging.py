"""Stage a redrive batch the way `msmq-gateway pipeline redrive --execute` does (staging rows
and a batch row in one transaction), without Spark: for the gateway's side of the redrive."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine

STAGE = sa.text(
    "INSERT INTO redrive_staging (batch_id, source_lookup_id, target_queue_id, label, body, body_type, "
    "priority, correlation_id, app_specific, delivery, ttbr_seconds, ttrq_seconds, sent_time, "
    "source_machine) "
    "SELECT :batch, m.lookup_id, :target, m.label, m.body, m.body_type, m.priority, m.correlation_id, "
    "m.app_specific, m.delivery, m.ttbr_seconds, m.ttrq_seconds, m.sent_time, m.source_machine "
    "FROM messages m WHERE m.lookup_id IN :ids"
).bindparams(sa.bindparam("ids", expanding=True))
BATCH = sa.text(
    "INSERT INTO redrive_batches (batch_id, status, staged_count, resent_count, skipped_count, staged_at) "
    "VALUES (:batch, :status, :count, 0, 0, :at)"
)


async def stage(
    engine: AsyncEngine,
    dead_letters: Sequence[int],
    target_path_key: str,
    status: str = "staged",
    staged_at_us: int = 1_700_000_000_000_000,
) -> str:
    """Stage these dead letters (lookup IDs) for the queue with this path key; the batch ID."""
    batch = uuid.uuid4().hex
    async with engine.begin() as connection:
        target = (
            await connection.execute(
                sa.text("SELECT id FROM queues WHERE path_key = :key"), {"key": target_path_key}
            )
        ).scalar_one()
        await connection.execute(STAGE, {"batch": batch, "target": target, "ids": list(dead_letters)})
        await connection.execute(
            BATCH, {"batch": batch, "status": status, "count": len(dead_letters), "at": staged_at_us}
        )
    return batch


async def scalar(engine: AsyncEngine, statement: str, **parameters: object) -> object:
    async with engine.connect() as connection:
        return (await connection.execute(sa.text(statement), parameters)).scalar_one()
