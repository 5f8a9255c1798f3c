"""The redrive merge in SQL: staged dead letters -> new messages, ledger, totals, one chunk
per transaction.

This is the one place the pipeline writes messages. It does what the gateway's store does
for a send (a lookup ID from the queue manager's counter, the message ID from its GUID,
fresh deadlines, the queue totals), because the pipeline must not import the gateway. A
gateway already waiting on the target queue sees the new messages at its next poll.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pipeline import times
from pipeline.errors import PipelineError
from pipeline.progress import Progress
from pipeline.schemas import INFINITE_SECONDS
from pipeline.store import Store

STAGED_COLUMNS = (
    "label", "body", "body_type", "priority", "correlation_id", "app_specific",
    "delivery", "ttbr_seconds", "ttrq_seconds", "sent_time", "source_machine",
)  # fmt: skip
"""What a redriven message keeps of its dead letter. No acknowledgment requests (a redrive
must not start a second storm of acknowledgments); it asks for MQMSG_DEADLETTER again, as
every dead letter did, so one that dies again returns to the dead-letter queue."""
MQMSG_DEADLETTER = 1
MAX_PRIORITY = 7
COUNTER_BITS = 56
COUNTER_MASK = (1 << COUNTER_BITS) - 1
SEQUENCE_MASK = 0xFFFFFFFF
WRITABLE_KINDS = ("private", "public")


@dataclass(frozen=True, slots=True)
class Target:
    path: str
    queue_id: int
    transactional: bool


def resolve_targets(store: Store, paths: Sequence[str]) -> dict[str, Target]:
    """Every target queue must exist and take messages, or nothing is staged at all."""
    found: dict[str, Target] = {}
    for path in paths:
        pathname = path.strip().replace("/", "\\")
        rows = store.execute(
            "SELECT id, kind, journal_of, transactional FROM queues WHERE path_key = ?", [pathname.casefold()]
        )
        if not rows:
            raise PipelineError(f"the redrive target '{pathname}' does not exist")
        queue_id, kind, journal_of, transactional = rows[0]
        if kind not in WRITABLE_KINDS or journal_of is not None:
            raise PipelineError(f"the redrive target '{pathname}' does not take messages (a {kind} queue)")
        found[path] = Target(pathname, int(queue_id), bool(transactional))
    store.commit()
    return found


def require_queue(store: Store, path: str) -> str:
    """The `--queue` filter names a queue that exists (a typo would select nothing, silently)."""
    pathname = path.strip().replace("/", "\\")
    found = store.execute("SELECT 1 FROM queues WHERE path_key = ?", [pathname.casefold()])
    store.commit()
    if not found:
        raise PipelineError(f"unknown queue '{pathname}'")
    return pathname


def pending(store: Store, batch: str, limit: int) -> list[int]:
    """The batch's dead letters not yet in the ledger (by this or any earlier run)."""
    rows = store.execute(
        "SELECT s.source_lookup_id FROM redrive_staging s WHERE s.batch_id = ? AND NOT EXISTS "
        "(SELECT 1 FROM redrive_ledger l WHERE l.source_lookup_id = s.source_lookup_id) "
        "ORDER BY s.source_lookup_id LIMIT ?",
        [batch, limit],
    )
    store.commit()
    return sorted({int(row[0]) for row in rows})


def merge_chunk(store: Store, batch: str, chunk: Sequence[int], progress: Progress) -> int:
    """One transaction: ledger rows, new messages, the live originals gone, totals kept."""
    with store.transaction():
        staged = _staged_rows(store, batch, chunk)
        guid, counters = _allocate(store, len(staged))
        now = times.now_us()
        totals: dict[int, list[int]] = defaultdict(lambda: [0, 0])
        known: dict[int, bool] = {}
        for row, counter in zip(staged, counters, strict=True):
            lookup_id = ((MAX_PRIORITY - row["priority"]) << COUNTER_BITS) | (counter & COUNTER_MASK)
            message_id = f"{{{guid}}}\\{counter & SEQUENCE_MASK}"
            store.execute(
                "INSERT INTO redrive_ledger (source_lookup_id, batch_id, new_lookup_id, target_queue_id, "
                "redriven_at) VALUES (?, ?, ?, ?, ?)",
                [row["source_lookup_id"], batch, lookup_id, row["target_queue_id"], now],
            )
            transactional = _transactional(store, row["target_queue_id"], known)
            _insert_message(store, row, (lookup_id, message_id), guid, now, transactional)
            totals[row["target_queue_id"]][0] += 1
            totals[row["target_queue_id"]][1] += len(row["body"])
        progress.checkpoint("merge")
        for queue_id, body_size in store.execute(
            "DELETE FROM messages WHERE lookup_id IN (" + ", ".join("?" * len(chunk)) + ") AND queue_id IN "
            "(SELECT id FROM queues WHERE kind = 'system' AND name IN ('deadletter', 'deadxact')) "
            "RETURNING queue_id, body_size",
            list(chunk),
        ):
            totals[int(queue_id)][0] -= 1
            totals[int(queue_id)][1] -= int(body_size)
        for queue_id in sorted(totals):  # id order, as the gateway locks queues
            count, size = totals[queue_id]
            store.execute(
                "UPDATE queues SET message_count = message_count + ?, byte_count = byte_count + ? "
                "WHERE id = ?",
                [count, size, queue_id],
            )
    return len(staged)


def _staged_rows(store: Store, batch: str, chunk: Sequence[int]) -> list[dict[str, Any]]:
    names = ("source_lookup_id", "target_queue_id", *STAGED_COLUMNS)
    rows = store.execute(
        f"SELECT {', '.join(names)} FROM redrive_staging WHERE batch_id = ? AND source_lookup_id IN ("
        + ", ".join("?" * len(chunk))
        + ")",
        [batch, *chunk],
    )
    unique = {int(row[0]): dict(zip(names, row, strict=True)) for row in rows}  # retries may duplicate
    return [unique[key] for key in sorted(unique)]


def _allocate(store: Store, count: int) -> tuple[str, list[int]]:
    """The queue manager's GUID and `count` fresh counters, as the gateway's store takes them."""
    guid = str(store.execute("SELECT guid FROM queue_manager")[0][0])
    if store.url.is_sqlite:
        top = int(
            store.execute("UPDATE queue_manager SET counter = counter + ? RETURNING counter", [count])[0][0]
        )
        return guid, list(range(top - count + 1, top + 1))
    # Take the transaction ID before the first counter (the condition is evaluated once,
    # first): the gateway's commit fence must see every transaction holding counters.
    rows = store.execute(
        "SELECT nextval('message_counter') FROM generate_series(1, ?) WHERE pg_current_xact_id() IS NOT NULL",
        [count],
    )
    return guid, sorted(int(row[0]) for row in rows)


def _insert_message(
    store: Store, row: dict[str, Any], ids: tuple[int, str], guid: str, now: int, transactional: bool
) -> None:
    """A new, available message: sent now by this queue manager, with fresh deadlines."""
    ttbr = _deadline(now, int(row["ttbr_seconds"]))
    ttrq = _deadline(now, int(row["ttrq_seconds"]))
    if ttbr is not None and (ttrq is None or ttrq > ttbr):
        ttrq = ttbr
    values: dict[str, Any] = {
        "lookup_id": ids[0], "queue_id": row["target_queue_id"], "state": 0, "purge_pending": False,
        "message_id": ids[1], "correlation_id": row["correlation_id"], "label": row["label"],
        "body": row["body"], "body_size": len(row["body"]), "body_type": row["body_type"],
        "priority": row["priority"], "message_class": 0, "app_specific": row["app_specific"],
        "extension": b"", "acknowledge": 0, "journal": MQMSG_DEADLETTER, "delivery": row["delivery"],
        "ttbr_seconds": row["ttbr_seconds"], "ttrq_seconds": row["ttrq_seconds"], "sent_time": now,
        "arrived_time": now, "source_machine": guid, "ttbr_deadline": ttbr, "ttrq_deadline": ttrq,
        "first_in_xact": transactional, "last_in_xact": transactional, "abort_count": 0,
        "transactional": transactional,
    }  # fmt: skip
    columns = ", ".join(values)
    store.execute(
        f"INSERT INTO messages ({columns}) VALUES ({', '.join('?' * len(values))})", list(values.values())
    )


def _transactional(store: Store, queue_id: int, known: dict[int, bool]) -> bool:
    """A transactional queue takes its redriven messages as single-message transactions."""
    if queue_id not in known:
        known[queue_id] = bool(
            store.execute("SELECT transactional FROM queues WHERE id = ?", [queue_id])[0][0]
        )
    return known[queue_id]


def _deadline(now: int, seconds: int) -> int | None:
    return None if seconds >= INFINITE_SECONDS else now + seconds * 1_000_000
