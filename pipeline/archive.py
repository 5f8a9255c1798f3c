"""archive: journal and dead-letter messages older than a cutoff -> Parquet -> verified -> deleted.

Crash-safe by two rules (probe §4): the only Parquet ever overwritten is an earlier attempt
of the same run (partitions end in `run_id=`), and rows leave the store in one transaction,
chosen by the lookup IDs read back from the archive, never by the selection predicate. The
run ledger (`archive_runs`) freezes the cutoff at the first attempt; a run marked `deleted`
is complete, and running it again changes nothing.

Runs are named by their cutoff, so the nightly run after a crash is another run. Before its
own work, a run settles every unfinished run of the same archive: one verified before the
crash (`written`) is finished (re-verified, deleted from the store); one that got no further
than writing (`claimed`: the store untouched) is rolled back (its partitions removed, status
`abandoned`). So every row ends in the archive exactly once. One archive job at a time per
archive directory (a lock file) keeps a running job from being taken for a crashed one.
"""

from __future__ import annotations

import fcntl
import shutil
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pipeline import times
from pipeline.errors import PipelineError
from pipeline.progress import Progress
from pipeline.schemas import ARCHIVED_LOCATIONS, export_spark_schema, typed
from pipeline.session import get_spark
from pipeline.store import Store, read_view_jdbc
from pipeline.transforms import PARTITION_COLUMNS, Verification, archive_rows, checksum, verify

CLAIMED, WRITTEN, DELETED, ABANDONED = "claimed", "written", "deleted", "abandoned"
LOCK_FILE = ".archive.lock"


@dataclass(frozen=True, slots=True)
class ArchiveOptions:
    archive: Path
    cutoff: datetime
    body_mode: str
    run_id: str | None
    extract: str = "adbc"
    """adbc: the view read on the driver into staged Parquet; jdbc: Spark's JDBC source."""
    partitions: int = 2


@dataclass(frozen=True, slots=True)
class Run:
    run_id: str
    cutoff_us: int
    body_mode: str
    status: str
    verified: tuple[int, int] | None = None
    """(rows, checksum) recorded when the run was verified (status `written`)."""
    rows: int = 0
    """Rows archived, for a complete run."""
    archive: Path | None = None


def run_archive(store: Store, options: ArchiveOptions, progress: Progress) -> str:
    """Archive one run to completion (or find it complete); return the summary line."""
    with _only_job(options.archive):
        run_id = options.run_id or f"archive-{options.cutoff:%Y%m%dT%H%M%SZ}"
        settled = _settle_unfinished(store, options, run_id, progress)
        run = _claim(store, options, run_id)
        progress.stage("claim", f"run {run.run_id}, cutoff {times.iso(run.cutoff_us)}, status {run.status}")
        if run.status == DELETED:
            return (
                f"archive: run {run.run_id} is already complete; nothing to do ({run.rows} rows archived to "
                f"{run.archive}){settled}"
            )
        result, deleted = _complete(store, run, options, progress)
    digest = result.checksum & 0xFFFFFFFFFFFFFFFF
    return (
        f"archive: run {run.run_id} complete: {result.archived} rows archived to {options.archive}, "
        f"{deleted} deleted from the store, checksum {digest:#018x}, {progress.elapsed():.1f} s{settled}"
    )


def _complete(
    store: Store, run: Run, options: ArchiveOptions, progress: Progress
) -> tuple[Verification, int]:
    """Write (or re-verify) the run, then delete its archived rows from the store."""
    staging = options.archive / "_staging" / run.run_id
    spark = get_spark("msmq-gateway archive")
    if run.status == WRITTEN:  # verified before a crash: check the archive is as it was, go on
        result = _reverify(spark, run, options.archive)
        progress.stage("reverify", f"run {run.run_id}: {_describe(result)}")
    else:
        result = _write_and_verify(store, spark, run, staging, options, progress)
    ids = read_run(spark, options.archive, run.run_id).select("lookup_id").toArrow()
    with store.transaction():
        store.execute("DELETE FROM archive_run_ids WHERE run_id = ?", [run.run_id])
        run_ids = pa.array([run.run_id] * ids.num_rows, pa.string())
        store.ingest("archive_run_ids", pa.table({"run_id": run_ids, "lookup_id": ids["lookup_id"]}))
    progress.stage("stage-ids", f"{ids.num_rows} lookup IDs")
    deleted = _delete(store, run, progress)
    shutil.rmtree(staging, ignore_errors=True)
    return result, deleted


@contextmanager
def _only_job(archive: Path) -> Iterator[None]:
    """An exclusive lock on the archive directory for the whole job (released by the kernel
    when the process dies, so a crashed job never blocks the next)."""
    with (archive / LOCK_FILE).open("a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise PipelineError(
                f"another archive job is running on {archive}; try again when it ends"
            ) from None
        yield


def _settle_unfinished(store: Store, options: ArchiveOptions, run_id: str, progress: Progress) -> str:
    """Finish or roll back the other unfinished runs (a crashed night); a note for the summary."""
    found = store.execute(
        "SELECT run_id, archive_path, status FROM archive_runs WHERE status IN (?, ?) AND run_id <> ? "
        "ORDER BY started_at, run_id",
        [CLAIMED, WRITTEN, run_id],
    )
    store.commit()
    elsewhere = [row[0] for row in found if Path(row[1]) != options.archive]
    if elsewhere:
        raise PipelineError(
            f"unfinished archive runs in another archive directory: {', '.join(elsewhere)}; "
            "finish them there first (the same --archive and --run-id)"
        )
    notes = []
    for earlier_id, _path, status in found:
        earlier = _claim(store, options, earlier_id)
        if status == WRITTEN:
            result, deleted = _complete(store, earlier, options, progress)
            notes.append(f"finished crashed run {earlier_id} ({result.archived} rows, {deleted} deleted)")
        else:
            _roll_back(store, options.archive, earlier_id)
            notes.append(f"rolled back crashed run {earlier_id} (nothing had been deleted)")
        progress.stage("settle", notes[-1])
    return "".join(f"; {note}" for note in notes)


def _roll_back(store: Store, archive: Path, run_id: str) -> None:
    """A run that never got verified deleted nothing from the store: drop what it wrote."""
    for partition in archive.glob(f"queue=*/dt=*/run_id={run_id}"):
        shutil.rmtree(partition)
    shutil.rmtree(archive / "_staging" / run_id, ignore_errors=True)
    _remove_stale_spark_staging(archive)
    with store.transaction():
        store.execute("DELETE FROM archive_run_ids WHERE run_id = ?", [run_id])
        store.execute(
            "UPDATE archive_runs SET status = ?, finished_at = ? WHERE run_id = ? AND status = ?",
            [ABANDONED, times.now_us(), run_id, CLAIMED],
        )


def _write_and_verify(
    store: Store, spark: SparkSession, run: Run, staging: Path, options: ArchiveOptions, progress: Progress
) -> Verification:
    _remove_stale_spark_staging(options.archive)
    where = f"location IN {_sql_list(ARCHIVED_LOCATIONS)} AND stored_time < {run.cutoff_us:d}"
    selected, extracted = _extract(store, spark, where, staging / "export.parquet", options, progress)
    progress.stage("extract", f"{extracted} rows ({options.extract})")
    rows = archive_rows(selected, run.run_id, run.body_mode)
    rows.repartition("queue", "dt").write.mode("overwrite").partitionBy(*PARTITION_COLUMNS).parquet(
        str(options.archive)
    )
    progress.stage("write", f"{extracted} rows to {options.archive}")
    result = _verify(store, spark, run, where, staging, options)
    progress.stage("verify", _describe(result))
    return result


def _reverify(spark: SparkSession, run: Run, archive: Path) -> Verification:
    """The run's archive still holds exactly the rows verified against the store."""
    rows, distinct_ids, total = checksum(read_run(spark, archive, run.run_id).drop("dt", "run_id"))
    if run.verified != (rows, total) or rows != distinct_ids:
        raise PipelineError(
            f"run {run.run_id}: the archive changed since it was verified "
            f"({rows} rows, checksum {total}; verified {run.verified}); nothing deleted"
        )
    return Verification(rows, distinct_ids, total, 0, 0)


def read_run(spark: SparkSession, archive: Path, run_id: str) -> DataFrame:
    """One run's rows read back from the archive (partition pruning on run_id)."""
    return spark.read.option("basePath", str(archive)).parquet(str(archive)).where(F.col("run_id") == run_id)


def _claim(store: Store, options: ArchiveOptions, run_id: str) -> Run:
    """The run's ledger row; the first attempt freezes cutoff and body mode (an abandoned
    run, named again, starts over with them)."""
    found = store.execute(
        "SELECT cutoff, body_mode, status, archive_path, row_count, checksum FROM archive_runs "
        "WHERE run_id = ?",
        [run_id],
    )
    if found:
        cutoff_us, body_mode, status, path, rows, total = found[0]
        if status != DELETED and Path(path) != options.archive:
            raise PipelineError(f"run {run_id} was started with archive {path}; finish it there")
        store.commit()
        if status == ABANDONED:
            with store.transaction():
                store.execute("UPDATE archive_runs SET status = ? WHERE run_id = ?", [CLAIMED, run_id])
            status = CLAIMED
        verified = (int(rows), int(total)) if status == WRITTEN else None
        done = int(rows) if status == DELETED and rows is not None else 0
        return Run(run_id, int(cutoff_us), str(body_mode), str(status), verified, done, Path(path))
    cutoff_us = times.to_us(options.cutoff)
    with store.transaction():
        store.execute(
            "INSERT INTO archive_runs (run_id, cutoff, archive_path, body_mode, status, started_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            [run_id, cutoff_us, str(options.archive), options.body_mode, CLAIMED, times.now_us()],
        )
    return Run(run_id, cutoff_us, options.body_mode, CLAIMED, archive=options.archive)


def _extract(
    store: Store,
    spark: SparkSession,
    where: str,
    staged: Path,
    options: ArchiveOptions,
    progress: Progress | None = None,
) -> tuple[DataFrame, int]:
    """The selected rows of the export view, typed, and how many there are."""
    if options.extract == "jdbc":
        rows = read_view_jdbc(store, spark, where, options.partitions)
        return rows, rows.count()
    count = store.export_to_parquet(where, [], staged, progress.ticker("extract") if progress else None)
    return typed(spark.read.schema(export_spark_schema()).parquet(str(staged))), count


def _verify(
    store: Store, spark: SparkSession, run: Run, where: str, staging: Path, options: ArchiveOptions
) -> Verification:
    """Read the run back and compare it with the store's rows, read again; record `written`."""
    again = archive_rows(
        _extract(store, spark, where, staging / "verify.parquet", options)[0], run.run_id, run.body_mode
    )
    archived = read_run(spark, options.archive, run.run_id).drop("dt", "run_id")
    result = verify(archived, again.drop("dt", "run_id"))
    if not result.ok:
        raise PipelineError(f"run {run.run_id}: the archive does not match the store ({_describe(result)})")
    with store.transaction():
        store.execute(
            "UPDATE archive_runs SET status = ?, row_count = ?, checksum = ? WHERE run_id = ?",
            [WRITTEN, result.archived, result.checksum, run.run_id],
        )
    return result


def _delete(store: Store, run: Run, progress: Progress) -> int:
    """One transaction: delete by archived ID, keep queue totals, mark the run done."""
    with store.transaction():
        gone = store.execute(
            "DELETE FROM messages WHERE lookup_id IN "
            "(SELECT lookup_id FROM archive_run_ids WHERE run_id = ?) RETURNING queue_id, body_size",
            [run.run_id],
        )
        _subtract_from_totals(store, gone)
        progress.checkpoint("delete")
        store.execute("DELETE FROM archive_run_ids WHERE run_id = ?", [run.run_id])
        store.execute(
            "UPDATE archive_runs SET status = ?, finished_at = ? WHERE run_id = ?",
            [DELETED, times.now_us(), run.run_id],
        )
    progress.stage("delete", f"{len(gone)} rows deleted from the store")
    return len(gone)


def _subtract_from_totals(store: Store, gone: list[tuple[Any, ...]]) -> None:
    """Queue rows carry message and byte totals; keep them equal to what the queues hold."""
    totals: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for queue_id, body_size in gone:
        totals[int(queue_id)][0] += 1
        totals[int(queue_id)][1] += int(body_size)
    for queue_id in sorted(totals):  # id order, as the gateway locks queues: no deadlocks
        count, size = totals[queue_id]
        store.execute(
            "UPDATE queues SET message_count = message_count - ?, byte_count = byte_count - ? WHERE id = ?",
            [count, size, queue_id],
        )


def _remove_stale_spark_staging(archive: Path) -> None:
    """A killed write leaves `.spark-staging-*` behind; readers skip it, but it wastes space."""
    for leftover in archive.glob(".spark-staging-*"):
        shutil.rmtree(leftover, ignore_errors=True)


def _describe(result: Verification) -> str:
    return (
        f"{result.archived} rows, {result.distinct_ids} distinct IDs, {result.mismatched} mismatched, "
        f"{result.gone_from_store} gone from the store meanwhile"
    )


def _sql_list(values: tuple[str, ...]) -> str:
    return "(" + ", ".join(f"'{value}'" for value in values) + ")"
