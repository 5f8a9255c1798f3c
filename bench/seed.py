"""Queue depth for the depth scenarios, put in place with set-based SQL while no gateway runs.

Rows get the lookup IDs and message IDs the gateway would have given them (counter values
above the store's high water, which is raised to match), and the queue's totals are kept
in step, so the gateway sees an ordinary deep queue.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from bench.harness import Database
from bench.requests import BODY_SIZE, body
from qm.rules import COUNTER_BITS

PRIORITY = 3
HIGH = (7 - PRIORITY) << COUNTER_BITS
INFINITE = 0xFFFFFFFF


def seed_depth(database: Database, queue_name: str, depth: int) -> None:
    if depth == 0:
        return
    if database.kind == "sqlite":
        _seed_sqlite(database.driver_target, queue_name, depth)
    else:
        _seed_postgres(database.driver_target, queue_name, depth)


def _select_rows(generator: str, base: str, mark: str) -> str:
    """The SELECT producing `depth` message rows from a number series `n(i)`."""
    counter = f"({base} + i)"
    return (
        f"SELECT {HIGH} + {counter}, {mark}, 0, false, '{{' || {mark} || '}}\\' || ({counter} & {INFINITE}), "
        f"'', {mark}, {BODY_SIZE}, 0, {PRIORITY}, 0, 0, {mark}, 0, 0, 1, {INFINITE}, {INFINITE}, "
        f"{mark}, {mark}, {mark}, false, false, 0, false FROM {generator}"
    )


COLUMNS = (
    "lookup_id, queue_id, state, purge_pending, message_id, label, body, body_size, body_type, priority, "
    "message_class, app_specific, extension, acknowledge, journal, delivery, ttbr_seconds, ttrq_seconds, "
    "sent_time, arrived_time, source_machine, first_in_xact, last_in_xact, abort_count, transactional"
)


def _parameters(queue_id: int, guid: str) -> tuple[Any, ...]:
    now = int(time.time() * 1_000_000)
    return (queue_id, guid, body(), b"", now, now, guid)


def _seed_sqlite(path: str, queue_name: str, depth: int) -> None:
    connection = sqlite3.connect(path, isolation_level=None)
    try:
        connection.execute("BEGIN IMMEDIATE")
        queue_id = connection.execute(
            "SELECT id FROM queues WHERE name = ? AND journal_of IS NULL", (queue_name,)
        ).fetchone()[0]
        guid, base = connection.execute("SELECT guid, counter FROM queue_manager").fetchone()
        series = (
            f"(WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < {depth}) "
            "SELECT i FROM n)"
        )
        connection.execute(
            f"INSERT INTO messages ({COLUMNS}) " + _select_rows(series, str(base), "?"),
            _parameters(queue_id, guid),
        )
        connection.execute("UPDATE queue_manager SET counter = counter + ?", (depth,))
        _add_totals(connection, "?", queue_id, depth)
        connection.execute("COMMIT")
        connection.execute("ANALYZE")
    finally:
        connection.close()


def _seed_postgres(target: str, queue_name: str, depth: int) -> None:
    import psycopg

    with psycopg.connect(target) as connection:
        queue_id = connection.execute(
            "SELECT id FROM queues WHERE name = %s AND journal_of IS NULL", (queue_name,)
        ).fetchone()[0]  # type: ignore[index]
        guid = connection.execute("SELECT guid FROM queue_manager").fetchone()[0]  # type: ignore[index]
        base = connection.execute(
            "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM message_counter"
        ).fetchone()[0]  # type: ignore[index]
        series = f"generate_series(1, {depth}) AS n(i)"
        connection.execute(
            f"INSERT INTO messages ({COLUMNS}) " + _select_rows(series, f"{int(base)}::bigint", "%s"),
            _parameters(queue_id, guid),
        )
        connection.execute("SELECT setval('message_counter', %s)", (int(base) + depth,))
        _add_totals(connection, "%s", queue_id, depth)
        connection.commit()
        connection.autocommit = True
        connection.execute("VACUUM ANALYZE messages")


def _add_totals(connection: Any, mark: str, queue_id: int, depth: int) -> None:
    connection.execute(
        f"UPDATE queues SET message_count = message_count + {mark}, byte_count = byte_count + {mark} "
        f"WHERE id = {mark}",
        (depth, depth * BODY_SIZE, queue_id),
    )
