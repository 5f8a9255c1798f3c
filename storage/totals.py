"""Queue totals (message count and bytes on each queue row), kept in step with every insert
and removal of a message. This module is the only one that writes them: statements that
change totals compose `onto_totals` (a data-modifying CTE's rows summed per queue, PostgreSQL)
or run ADD_TO_TOTALS (a change per queue, in queue ID order); tests/contract/test_totals.py
checks that no other named statement writes them."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from storage import driver_sql
from storage.sql_rules import constant
from storage.tables import queues

q = queues.c

ADD_TO_TOTALS = (
    sa.update(queues)
    .where(q.id == sa.bindparam("queue", type_=sa.Integer))
    .values(
        message_count=q.message_count + sa.bindparam("number", type_=sa.BigInteger),
        byte_count=q.byte_count + sa.bindparam("bytes", type_=sa.BigInteger),
    )
)
"""A queue's message count and bytes (`:queue`) change by `:number` and `:bytes`."""


def onto_totals(changed: sa.CTE, sign: int) -> sa.Update:
    """The rows of a data-modifying CTE (with their `queue_id` and `body_size`) counted and
    summed per queue onto its totals, added (sign 1) or subtracted (-1). The UPDATE ... FROM
    may lock the queues' rows in any order: only for a statement that changes one queue or
    whose transaction holds every one of those rows already (docs/store.md). The sign is
    written into the SQL: as an anonymous bound value inside a CTE the statement could not be
    run through SQLAlchemy's execution layer ("a value is required"), only on the driver."""
    added = (
        sa.select(
            changed.c.queue_id,
            (sa.func.count() * constant(sign)).label("number"),
            (sa.cast(sa.func.sum(changed.c.body_size), sa.BigInteger) * constant(sign)).label("bytes"),
        )
        .group_by(changed.c.queue_id)
        .subquery("added")
    )
    return (
        sa.update(queues)
        .where(q.id == added.c.queue_id)
        .values(message_count=q.message_count + added.c.number, byte_count=q.byte_count + added.c.bytes)
    )


async def add_to_totals(connection: AsyncConnection, changed: Iterable[Mapping[Any, Any]], sign: int) -> None:
    """Keep each queue's message count and bytes in step with inserted (+1) or deleted (-1)
    message rows (their `queue_id` and `body_size`); one statement, the queues in ID order."""
    counts: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for row in changed:
        counts[row["queue_id"]][0] += 1
        counts[row["queue_id"]][1] += row["body_size"]
    await change_totals(
        connection, {queue_id: (sign * n, sign * size) for queue_id, (n, size) in counts.items()}
    )


async def change_totals(connection: AsyncConnection, changes: Mapping[int, tuple[int, int]]) -> None:
    """Add (number, bytes) to each queue's totals, in queue ID order (the lock order)."""
    totals = [
        {"queue": queue_id, "number": changes[queue_id][0], "bytes": changes[queue_id][1]}
        for queue_id in sorted(changes)
    ]
    if totals:
        await driver_sql.execute_many(connection, ADD_TO_TOTALS, totals)
