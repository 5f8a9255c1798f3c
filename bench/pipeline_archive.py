"""The pipeline scenario: archive and report N journal rows with Spark, beside a baseline
that does the archive's work without Spark (ADBC + pyarrow: export, write, verify, delete).

    .venv/bin/python bench/pipeline_archive.py --rows 1000000     # also part of `make bench`

Builds a SQLite store once (migrated; one journal queue full of rows with 200-byte bodies,
inserted with plain SQL for speed, column by column by name: a change of the `messages`
table stops the bench with the columns to add or drop, never a silently wrong store), then,
on a fresh copy each time:
  jvm start  a process that starts a local SparkSession and stops (what every job pays first)
  baseline   ADBC + pyarrow in one process: the rows exported, written as Parquet partitioned
             by queue and day, read back and compared with the store, deleted in one transaction
  archive    `pipeline archive` in a fresh process (JVM start included), local[1] and local[2]
  report     `pipeline report` over the archive just written
Rows per second count the archived rows over wall time; the ratio is archive / baseline.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pipeline.store import Store, store_url  # noqa: E402
from storage.migrate import upgrade  # noqa: E402

DAY_US = 86_400_000_000
JANUARY_US = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z
INFINITE = 0xFFFFFFFF
BATCH = 50_000
QUEUE_ID, JOURNAL_ID = 1, 2


class SchemaDrift(SystemExit):
    """The store's tables no longer match what this bench inserts: update the bench."""


def build_store(path: Path, rows: int) -> None:
    upgrade(f"sqlite+aiosqlite:///{path}")
    connection = sqlite3.connect(path)
    guid = str(uuid.uuid4())
    _insert(connection, "queue_manager", [_queue_manager(guid, rows)])
    _insert(
        connection,
        "queues",
        [_queue(QUEUE_ID, "bench", None, 0), _queue(JOURNAL_ID, "bench", QUEUE_ID, rows)],
    )
    body = os.urandom(200)
    for first in range(1, rows + 1, BATCH):
        batch = [_journal_copy(counter, guid, body) for counter in range(first, min(first + BATCH, rows + 1))]
        _insert(connection, "messages", batch)
    connection.commit()
    connection.close()


def _insert(connection: sqlite3.Connection, table: str, rows: list[dict[str, Any]]) -> None:
    _check_columns(connection, table, rows[0])
    names = list(rows[0])
    statement = f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"
    connection.executemany(statement, [[row[name] for name in names] for row in rows])


def _check_columns(connection: sqlite3.Connection, table: str, row: Mapping[str, Any]) -> None:
    """Every column of the table, no other: an added column (even a nullable one) fails here."""
    columns = {str(found[1]) for found in connection.execute(f"PRAGMA table_info({table})")}
    missing, unknown = sorted(columns - set(row)), sorted(set(row) - columns)
    if missing or unknown:
        raise SchemaDrift(
            f"bench/pipeline_archive.py is out of date with the table {table!r} (a migration changed it): "
            f"columns to add to the bench: {missing or 'none'}; columns it names that the table no longer "
            f"has: {unknown or 'none'}"
        )


def _queue_manager(guid: str, rows: int) -> dict[str, Any]:
    return {"id": 1, "guid": guid, "quota_kb": INFINITE, "throttled": 0, "counter": rows, "created_at": 0}


def _queue(queue_id: int, name: str, journal_of: int | None, rows: int) -> dict[str, Any]:
    return {
        "id": queue_id, "path_key": "private$\\bench" + (";journal" if journal_of else ""),
        "kind": "private", "name": name, "journal_of": journal_of, "label": "", "transactional": 0,
        "quota_kb": INFINITE, "journal": 1, "journal_quota_kb": INFINITE, "base_priority": 0,
        "created_at": 0, "modified_at": 0, "message_count": rows, "byte_count": rows * 200,
    }  # fmt: skip


def _journal_copy(counter: int, guid: str, body: bytes) -> dict[str, Any]:
    """A journal copy: sent in January, received (and so stored in the journal) half a day later."""
    sent = JANUARY_US + counter * 1000
    return {
        "lookup_id": (4 << 56) | counter, "queue_id": JOURNAL_ID, "state": 0, "transaction_id": None,
        "txn_op": None, "lock_tag": None, "lock_expires_at": None, "purge_pending": 0,
        "message_id": f"{{{guid}}}\\{counter}", "correlation_id": None, "label": f"order {counter % 1000}",
        "body": body, "body_size": len(body), "body_type": 0, "priority": 3, "message_class": 0,
        "app_specific": 0, "extension": b"", "response_queue": None, "admin_queue": None,
        "acknowledge": 0, "journal": 0, "delivery": 1, "ttbr_seconds": INFINITE, "ttrq_seconds": INFINITE,
        "sent_time": sent, "arrived_time": sent + DAY_US // 2, "source_machine": guid,
        "ttbr_deadline": None, "ttrq_deadline": None, "first_in_xact": 0, "last_in_xact": 0,
        "abort_count": 0, "destination_queue": "private$\\bench", "transactional": 0,
        "original_arrived_time": sent + 10, "received_time": sent + DAY_US // 2,
        "dead_lettered_time": None, "srmp_stream_id": None, "srmp_ordinal": None, "srmp_source": None,
    }  # fmt: skip


def baseline(store: Path, work: Path) -> float:
    """The archive's work without Spark: export, partitioned write, verify, delete."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    started = time.monotonic()
    where = "location = 'journal'"
    opened = Store(store_url(f"sqlite:///{store}"))
    opened.export_to_parquet(where, [], work / "export.parquet")
    table = pq.read_table(work / "export.parquet")
    stored = pc.cast(table["stored_time"], pa.timestamp("us", tz="UTC"))
    days = pc.strftime(stored, format="%Y-%m-%d")
    table = table.append_column("dt", days)
    out = work / "baseline-archive"
    pq.write_to_dataset(table, out, partition_cols=["queue", "dt"])
    archived = ds.dataset(out, format="parquet", partitioning="hive").to_table().drop_columns(["queue", "dt"])
    opened.export_to_parquet(where, [], work / "verify.parquet")
    again = pq.read_table(work / "verify.parquet").drop_columns(["queue"])
    ordered = [("lookup_id", "ascending")]
    if not archived.sort_by(ordered).equals(again.select(archived.column_names).sort_by(ordered)):
        raise SystemExit("baseline: the archive does not match the store")
    opened.close()
    ids = archived["lookup_id"].to_pylist()
    connection = sqlite3.connect(store)
    connection.execute("CREATE TEMP TABLE gone (lookup_id INTEGER PRIMARY KEY)")
    connection.executemany("INSERT INTO gone VALUES (?)", ((value,) for value in ids))
    totals = connection.execute(
        "SELECT queue_id, count(*), sum(body_size) FROM messages "
        "WHERE lookup_id IN (SELECT lookup_id FROM gone) GROUP BY queue_id"
    ).fetchall()
    connection.execute("DELETE FROM messages WHERE lookup_id IN (SELECT lookup_id FROM gone)")
    for queue_id, count, size in totals:
        connection.execute(
            "UPDATE queues SET message_count = message_count - ?, byte_count = byte_count - ? WHERE id = ?",
            [count, size, queue_id],
        )
    connection.commit()
    left = connection.execute("SELECT count(*) FROM messages").fetchone()[0]
    connection.close()
    if left != 0 or len(ids) != pa.array(ids).unique().__len__():
        raise SystemExit("baseline: rows left or duplicated")
    return time.monotonic() - started


JVM_START = (
    "import sys; import pipeline.session as s; s.quiet_jvm = True; "
    "s.get_spark('bench jvm start', sys.argv[1]).stop()"
)


def jvm_start(master: str) -> float:
    started = time.monotonic()
    subprocess.run([sys.executable, "-c", JVM_START, master], check=True, cwd=ROOT)
    return time.monotonic() - started


def run_job(arguments: list[str]) -> float:
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "pipeline.cli", *arguments, "--quiet"], check=True, cwd=ROOT)
    return time.monotonic() - started


def measure(rows: int, masters: list[str]) -> dict[str, float]:
    """Seconds per step, on fresh copies of one store."""
    with tempfile.TemporaryDirectory(prefix="pipeline-bench-") as scratch:
        work = Path(scratch)
        template = work / "template.db"
        started = time.monotonic()
        build_store(template, rows)
        print(
            f"pipeline: store with {rows} journal rows built in {time.monotonic() - started:.1f} s",
            flush=True,
        )
        results: dict[str, float] = {"baseline": baseline(_fresh_copy(template, work), work)}
        for master in masters:
            results[f"jvm_start_{master}"] = jvm_start(master)
            copy = _fresh_copy(template, work)
            tag = master.replace("[", "").replace("]", "").replace("*", "all")  # Hadoop globs [ ] *
            archive = work / f"archive-{tag}"
            store = f"sqlite:///{copy}"
            cutoff = ["--cutoff", "2026-06-01", "--master", master]
            results[f"archive_{master}"] = run_job(
                ["archive", "--store", store, "--archive", str(archive), *cutoff]
            )
            out = str(work / f"report-{tag}")
            report = ["report", "--store", store, "--archive", str(archive), "--out", out, "--master", master]
            results[f"report_{master}"] = run_job(report)
            print(f"pipeline: {master} done", flush=True)
        return results


def bench_rows(rows: int, results: Mapping[str, float]) -> list[dict[str, Any]]:
    """The figures as rows of `make bench`'s table (store sqlite, one row per step)."""
    base_rate = rows / results["baseline"]
    found: list[dict[str, Any]] = [
        {"store": "sqlite", "scenario": "pipeline baseline adbc+pyarrow", "messages": rows,
         "per_s": round(base_rate, 1), "seconds": round(results["baseline"], 1)}
    ]  # fmt: skip
    for name, seconds in results.items():
        if name == "baseline":
            continue
        step, _, master = name.rpartition("_")
        row: dict[str, Any] = {"store": "sqlite", "scenario": f"pipeline {step.replace('_', ' ')} {master}"}
        row["seconds"] = round(seconds, 1)
        if step == "archive":
            row |= {
                "messages": rows,
                "per_s": round(rows / seconds, 1),
                "ratio": round(rows / seconds / base_rate, 3),
            }
        found.append(row)
    return found


def _fresh_copy(template: Path, work: Path) -> Path:
    copy = work / "store.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{copy}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(template, copy)
    return copy


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--masters", default="local[1],local[2]")
    options = parser.parse_args()
    results = measure(options.rows, options.masters.split(","))
    print(f"{'step':34} {'seconds':>9} {'rows/s':>10} {'ratio':>7}")
    for row in bench_rows(options.rows, results):
        rate = f"{row['per_s']:,.0f}" if "per_s" in row else "-"
        print(f"{row['scenario']:34} {row['seconds']:9.1f} {rate:>10} {row.get('ratio', ''):>7}")
    print(json.dumps({"rows": options.rows, "seconds": results}))


if __name__ == "__main__":
    main()
