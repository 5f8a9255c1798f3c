"""What the report says beyond the message rows: its summary header, the archive runs and
redrives (from the pipeline's own ledgers), and the warnings an operator must not miss."""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from pipeline import times
from pipeline.store import Store

Tables = dict[str, list[dict[str, Any]]]
STALE_AFTER_US = 24 * 3600 * 1_000_000
"""An archive run unfinished this long after it started, or a redrive batch not applied this
long after it was staged, was left by a job that stopped."""
SPIKE_FACTOR = 3
SPIKE_AT_LEAST = 10
"""A dead-letter spike: the last period has at least SPIKE_AT_LEAST dead letters and more
than SPIKE_FACTOR times the median of the periods before it."""


@dataclass
class Operations:
    archive_runs: list[dict[str, Any]] = field(default_factory=list)
    redrive_batches: list[dict[str, Any]] = field(default_factory=list)
    redriven_per_day: list[dict[str, Any]] = field(default_factory=list)
    staging_rows: int = 0
    leftover_directories: list[str] = field(default_factory=list)
    now_us: int = 0

    def tables(self) -> Tables:
        return {
            "archive_runs": [_public(row) for row in self.archive_runs],
            "redrive_batches": [_public(row) for row in self.redrive_batches],
            "redriven_per_day": self.redriven_per_day,
        }


def _public(row: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in row.items() if not name.startswith("_")}


def read(store: Store, archive: Path | None) -> Operations:
    found = Operations(now_us=times.now_us())
    for run_id, status, cutoff, rows, started, finished in store.execute(
        "SELECT run_id, status, cutoff, row_count, started_at, finished_at FROM archive_runs "
        "ORDER BY started_at"
    ):
        found.archive_runs.append(
            {
                "run_id": run_id,
                "status": status,
                "cutoff": times.iso(int(cutoff)),
                "rows": rows,
                "started": times.iso(int(started)),
                "finished": None if finished is None else times.iso(int(finished)),
                "_started_us": int(started),
            }
        )
    for batch_id, status, staged, resent, skipped, error, at in store.execute(
        "SELECT batch_id, status, staged_count, resent_count, skipped_count, error, staged_at "
        "FROM redrive_batches ORDER BY staged_at"
    ):
        found.redrive_batches.append(
            {
                "batch_id": batch_id,
                "status": status,
                "staged": staged,
                "resent": resent,
                "skipped": skipped,
                "error": error,
                "staged_at": times.iso(int(at)),
                "_staged_us": int(at),
            }
        )
    per_day: dict[str, int] = defaultdict(int)
    for (redriven_at,) in store.execute("SELECT redriven_at FROM redrive_ledger"):
        per_day[times.iso(int(redriven_at))[:10]] += 1
    found.redriven_per_day = [{"day": day, "redriven": count} for day, count in sorted(per_day.items())]
    found.staging_rows = int(store.execute("SELECT count(*) FROM redrive_staging")[0][0])
    store.commit()
    if archive is not None:
        found.leftover_directories = sorted(
            str(path) for pattern in ("_staging/*", ".spark-staging-*") for path in archive.glob(pattern)
        )
    return found


def summary(
    tables: Tables, sources: dict[str, int], first: datetime | None, last: datetime | None, resolution: str
) -> dict[str, Any]:
    """The header: totals, the period covered, when made, live against archived rows."""
    daily = tables["daily"]
    totals = {
        name: sum(int(row[name]) for row in daily)
        for name in ("arrivals", "receives", "expiries", "dead_letters")
    }
    return {
        "generated": times.iso(times.now_us()),
        "first": None if first is None else first.isoformat(),
        "last": None if last is None else last.isoformat(),
        "resolution": resolution,
        "queues": len({row["queue"] for row in daily}),
        "live_rows": sources.get("live", 0),
        "archived_rows": sources.get("archive", 0),
        "totals": totals,
    }


def warnings(tables: Tables, operations: Operations) -> list[str]:
    found: list[str] = []
    now = operations.now_us
    for run in operations.archive_runs:
        if run["status"] in ("claimed", "written") and now - run["_started_us"] > STALE_AFTER_US:
            found.append(
                f"archive run {run['run_id']} is still '{run['status']}' since {run['started']}: the next "
                "archive run finishes or rolls it back (run `pipeline archive` on the same directory)"
            )
    for batch in operations.redrive_batches:
        if batch["status"] in ("staging", "staged") and now - batch["_staged_us"] > STALE_AFTER_US:
            found.append(
                f"redrive batch {batch['batch_id']} is still '{batch['status']}' since {batch['staged_at']}: "
                "is a gateway running on this store? (GET /api/redrives/<batch>)"
            )
        if batch["status"] == "failed":
            found.append(f"redrive batch {batch['batch_id']} failed: {batch['error']}")
    if operations.staging_rows and not any(
        batch["status"] in ("staging", "staged") for batch in operations.redrive_batches
    ):
        found.append(f"{operations.staging_rows} rows in redrive_staging belong to no pending batch")
    for path in operations.leftover_directories:
        found.append(f"staging left behind in the archive: {path}")
    found.extend(_spikes(tables["timeline"]))
    return found


def _spikes(timeline: list[dict[str, Any]]) -> list[str]:
    """Per queue: the last period against the median of the ones before it."""
    per_queue: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for row in timeline:
        per_queue[str(row["queue"])].append((str(row["period"]), int(row["dead_letters"])))
    found = []
    for queue, points in sorted(per_queue.items()):
        points.sort()
        *before, (period, last) = points
        usual = statistics.median(value for _, value in before) if before else 0
        if last >= SPIKE_AT_LEAST and last > SPIKE_FACTOR * usual:
            found.append(f"dead-letter spike in {queue}: {last:,} in {period} (usually {usual:,.0f})")
    return found
