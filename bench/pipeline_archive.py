"""Archive N journal rows (200-byte bodies) end to end, against a plain ADBC + pyarrow export.

    .venv/bin/python bench/pipeline_archive.py --rows 200000

Builds a SQLite store once (migrated; one journal queue full of rows, inserted with plain
SQL for speed), then, on a fresh copy each time:
  baseline   ADBC + pyarrow, one process, no Spark, no verify: the rows to one Parquet file
  archive    `pipeline archive` in a fresh process (JVM start included) with local[1], local[2]
  report     `pipeline report` over the archive just written
Prints a table and one JSON line. Rows per second count the archived rows over wall time.
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
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from pipeline.store import Store, store_url  # noqa: E402
from storage.migrate import upgrade  # noqa: E402

JOURNAL_OF_ORDERS = "private$\\bench;journal"
DAY_US = 86_400_000_000
JANUARY_US = 1_767_225_600_000_000  # 2026-01-01T00:00:00Z


def build_store(path: Path, rows: int) -> None:
    upgrade(f"sqlite+aiosqlite:///{path}")
    connection = sqlite3.connect(path)
    guid = str(uuid.uuid4())
    connection.execute("INSERT INTO queue_manager VALUES (1, ?, 4294967295, 0, ?, 0)", [guid, rows])
    common = "'private', 'bench', ?, '', 0, 4294967295, 1, 4294967295, 0, 0, 0, ?, ?"
    connection.execute(f"INSERT INTO queues VALUES (1, 'private$\\bench', {common})", [None, 0, 0])
    connection.execute(
        f"INSERT INTO queues VALUES (2, 'private$\\bench;journal', {common})", [1, rows, rows * 200]
    )
    body = os.urandom(200)
    # journal copies: sent in January, received (and so stored in the journal) half a day later
    values = (
        (
            (4 << 56) | counter, 2, 0, None, None, None, None, 0, f"{{{guid}}}\\{counter}", None,
            f"order {counter % 1000}", body, 200, 0, 3, 0, 0, b"", None, None, 0, 0, 1,
            4294967295, 4294967295, JANUARY_US + counter * 1000, JANUARY_US + counter * 1000 + DAY_US // 2,
            guid, None, None, 0, 0, 0, "private$\\bench", 0,
            JANUARY_US + counter * 1000 + 10, JANUARY_US + counter * 1000 + DAY_US // 2, None,
        )
        for counter in range(1, rows + 1)
    )  # fmt: skip
    placeholders = ", ".join("?" * 38)
    connection.executemany(f"INSERT INTO messages VALUES ({placeholders})", values)
    connection.commit()
    connection.close()


def baseline(store: Path, work: Path) -> float:
    started = time.monotonic()
    opened = Store(store_url(f"sqlite:///{store}"))
    opened.export_to_parquet("location = 'journal'", [], work / "baseline.parquet")
    opened.close()
    return time.monotonic() - started


def run_job(arguments: list[str]) -> float:
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "pipeline.cli", *arguments, "--quiet"], check=True, cwd=ROOT)
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--masters", default="local[1],local[2]")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="pipeline-bench-") as scratch:
        work = Path(scratch)
        template = work / "template.db"
        started = time.monotonic()
        build_store(template, options.rows)
        print(f"store with {options.rows} journal rows built in {time.monotonic() - started:.1f} s")
        copy = _fresh_copy(template, work)
        results: dict[str, float] = {"baseline_adbc_pyarrow": baseline(copy, work)}
        for master in options.masters.split(","):
            copy = _fresh_copy(template, work)
            tag = master.replace("[", "").replace("]", "").replace("*", "all")  # Hadoop globs [ ] *
            archive = work / f"archive-{tag}"
            store = f"sqlite:///{copy}"
            results[f"archive_{master}"] = run_job(
                [
                    "archive",
                    "--store",
                    store,
                    "--archive",
                    str(archive),
                    "--cutoff",
                    "2026-06-01",
                    "--master",
                    master,
                ]
            )
            out = str(work / f"report-{tag}")
            results[f"report_{master}"] = run_job(
                ["report", "--store", store, "--archive", str(archive), "--out", out, "--master", master]
            )
        _print(options.rows, results)


def _fresh_copy(template: Path, work: Path) -> Path:
    copy = work / "store.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{copy}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(template, copy)
    return copy


def _print(rows: int, results: dict[str, float]) -> None:
    print(f"{'step':28} {'seconds':>9} {'rows/s':>10}")
    for name, seconds in results.items():
        rate = f"{rows / seconds:,.0f}" if not name.startswith("report") else "-"
        print(f"{name:28} {seconds:9.1f} {rate:>10}")
    print(json.dumps({"rows": rows, "seconds": results}))


if __name__ == "__main__":
    main()
