"""The outbox's dispatcher: what a receive's removal earns (journal copy, acknowledgment, final
receipt), placed after the claim that wrote it down (storage/claims.py; docs/store.md,
"Receives"). An outbox row is deleted by the transaction that places its consequences, so
they are placed once, whoever places them: the receive right after its claim, or the
housekeeping pass for rows a crash or a cancelled call left."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.dml import ReturningDelete

from qm.disposal import Placement, Reason
from qm.paths import QueueKind, QueuePath
from storage.consequences import Consequences, QueueFacts
from storage.database import Database
from storage.tables import outbox

o = outbox.c
Row = Mapping[Any, Any]

LEFT_OVER_AT_MOST = 256
"""Outbox rows one housekeeping pass places, at most."""

_DEPARTED = (
    sa.delete(outbox).where(o.lookup_id.in_(sa.bindparam("lookup_ids", expanding=True))).returning(*outbox.c)
)
"""The rows of these messages taken out of the outbox (PostgreSQL: waiting for a pass that
holds them; it has placed them once it lets go, and they are gone)."""


def _left_over(sqlite: bool) -> ReturningDelete[Any]:
    first = sa.select(o.lookup_id).order_by(o.lookup_id).limit(LEFT_OVER_AT_MOST)
    if not sqlite:
        first = first.with_for_update(skip_locked=True)  # a receive placing them has them
    return sa.delete(outbox).where(o.lookup_id.in_(first)).returning(*outbox.c)


async def place_departed(db: Database, lookup_ids: Sequence[int], now: datetime) -> None:
    """Place what the removal of these messages earns (their outbox rows, just written by the
    caller's claim at `now`), in one transaction: the targets' rows are locked in one
    ID-ordered sweep (Consequences.settle), as every placement locks them."""
    if not lookup_ids:
        return
    async with db.transaction() as connection:
        found = (await connection.execute(_DEPARTED, {"lookup_ids": sorted(lookup_ids)})).mappings().all()
        consequences = Consequences(db, connection, now)
        await consequences.place(await earned(consequences, found))


async def take_left_over(
    db: Database, connection: AsyncConnection, consequences: Consequences
) -> list[Placement]:
    """The housekeeping pass, in its transaction: outbox rows no one holds, taken out, and what
    they earn (placed by the caller's one settlement, at the pass's time)."""
    found = (await connection.execute(_left_over(db.sqlite))).mappings().all()
    return await earned(consequences, found)


async def earned(consequences: Consequences, found: Sequence[Row]) -> list[Placement]:
    """What the departures of these outbox rows earn, each with its queue as it was when the
    message left (the queue may have changed or gone since)."""
    placements: list[Placement] = []
    for reason in {row["reason"] for row in found}:
        departed = [row for row in found if row["reason"] == reason]
        known: QueueFacts = {
            row["queue_id"]: (
                QueuePath(QueueKind(row["queue_kind"]), row["queue_name"], row["queue_is_journal"]),
                row["queue_journal"],
            )
            for row in departed
        }
        placements.extend(await consequences.earned(departed, Reason[reason], known))
    return placements
