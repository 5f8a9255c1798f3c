"""The physical limit of the store: the gateway's inserts and claims through the plain driver.

Same table, same indexes, same 1 KB row shape, the same durability settings as the gateway
(SQLite WAL with synchronous=FULL; PostgreSQL's defaults), with one commit per message and
with 100 messages per commit. No Python web stack, no queue rules: what fsync allows.
"""

from __future__ import annotations

import functools
import sqlite3
import time
from collections.abc import Callable
from typing import Any

from bench.harness import Database

CEILING_QUEUE_ID = 900_001
LOOKUP_BASE = 1 << 50
BODY = b"x" * 1024

COLUMNS = (
    "lookup_id, queue_id, state, purge_pending, message_id, label, body, body_size, body_type, priority, "
    "message_class, app_specific, extension, acknowledge, journal, delivery, ttbr_seconds, ttrq_seconds, "
    "sent_time, arrived_time, source_machine, first_in_xact, last_in_xact, abort_count, transactional"
)


def _row(lookup_id: int) -> tuple[Any, ...]:
    now = int(time.time() * 1_000_000)
    return (
        lookup_id, CEILING_QUEUE_ID, 0, False, f"{{bench}}\\{lookup_id}", "", BODY, len(BODY), 0, 3,
        0, 0, b"", 0, 0, 1, 0xFFFFFFFF, 0xFFFFFFFF, now, now, "bench", False, False, 0, False,
    )  # fmt: skip


def _queue_row() -> tuple[Any, ...]:
    return (CEILING_QUEUE_ID, "bench-ceiling", "private", "bench-ceiling", "", False, 0xFFFFFFFF, False,
            0xFFFFFFFF, 0, 0, 0, 0, 0)  # fmt: skip


QUEUE_COLUMNS = (
    "id, path_key, kind, name, label, transactional, quota_kb, journal, journal_quota_kb, base_priority, "
    "created_at, modified_at, message_count, byte_count"
)


class _Driver:
    """Just enough of both drivers: placeholders, BEGIN/COMMIT, the claim statement."""

    def __init__(self, database: Database) -> None:
        self.sqlite = database.kind == "sqlite"
        if self.sqlite:
            self.connection: Any = sqlite3.connect(database.driver_target, isolation_level=None)
            self.connection.execute("PRAGMA journal_mode=WAL")
            self.connection.execute("PRAGMA synchronous=FULL")
            self.mark = "?"
        else:
            import psycopg

            self.connection = psycopg.connect(database.driver_target)
            self.mark = "%s"
        lock = "" if self.sqlite else " FOR UPDATE SKIP LOCKED"
        self.claim = (
            f"DELETE FROM messages WHERE lookup_id = (SELECT lookup_id FROM messages WHERE queue_id = "
            f"{self.mark} AND state = 0 ORDER BY lookup_id LIMIT 1{lock}) RETURNING lookup_id, body"
        )
        marks = ", ".join([self.mark] * len(_row(0)))
        self.insert = f"INSERT INTO messages ({COLUMNS}) VALUES ({marks})"

    def transaction(self, work: Callable[[Any], object]) -> None:
        cursor = self.connection.cursor()
        if self.sqlite:
            cursor.execute("BEGIN IMMEDIATE")
            work(cursor)
            cursor.execute("COMMIT")
        else:
            work(cursor)
            self.connection.commit()

    def close(self) -> None:
        self.connection.close()


def run_ceiling(database: Database, messages: int, per_commit: int) -> dict[str, float]:
    """Insert then claim `messages` rows, `per_commit` per transaction; messages/s of each."""
    driver = _Driver(database)
    marks = ", ".join([driver.mark] * len(_queue_row()))
    driver.transaction(
        lambda c: c.execute(f"INSERT INTO queues ({QUEUE_COLUMNS}) VALUES ({marks})", _queue_row())
    )
    try:
        groups = [
            list(range(start, min(start + per_commit, messages))) for start in range(0, messages, per_commit)
        ]
        started = time.perf_counter()
        for group in groups:
            driver.transaction(functools.partial(_insert, statement=driver.insert, lookup_ids=group))
        insert_rate = messages / (time.perf_counter() - started)
        started = time.perf_counter()
        for group in groups:
            driver.transaction(functools.partial(_claim, statement=driver.claim, count=len(group)))
        claim_rate = messages / (time.perf_counter() - started)
    finally:
        driver.transaction(
            lambda c: c.execute(f"DELETE FROM queues WHERE id = {driver.mark}", (CEILING_QUEUE_ID,))
        )
        driver.close()
    return {"insert_per_s": insert_rate, "claim_per_s": claim_rate}


def _insert(cursor: Any, statement: str, lookup_ids: list[int]) -> None:
    for lookup_id in lookup_ids:
        cursor.execute(statement, _row(LOOKUP_BASE + lookup_id))


def _claim(cursor: Any, statement: str, count: int) -> None:
    for _ in range(count):
        cursor.execute(statement, (CEILING_QUEUE_ID,)).fetchone()
