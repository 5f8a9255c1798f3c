"""redrive: choose dead letters (live and archived) -> manifest -> with --execute, stage them
for the gateway.

The pipeline never sends: it writes the chosen dead letters to `redrive_staging` and one row
to `redrive_batches` (`staging`, then `staged` once every row is in). The gateway applies a
staged batch through its queue manager's send path (quotas, throttle, wake-ups, a duplicate
key from each dead letter's lookup ID; `redrive_ledger` keeps each dead letter redriven at
most once): by its background pass within MSMQGW_REDRIVE_INTERVAL_S, or at once when
`--gateway URL` asks it to (POST /api/redrives/{batch}/apply).
"""

from __future__ import annotations

import json
import shutil
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pipeline import classes, times
from pipeline.errors import PipelineError
from pipeline.progress import Progress
from pipeline.schemas import DEAD_LETTER_LOCATIONS, EXPORT_COLUMNS, export_spark_schema, typed
from pipeline.session import get_spark
from pipeline.store import Store
from pipeline.transforms import Selection, select_dead_letters

STAGED_COLUMNS = (
    "label", "body", "body_type", "priority", "correlation_id", "app_specific",
    "delivery", "ttbr_seconds", "ttrq_seconds", "sent_time", "source_machine",
)  # fmt: skip
"""What the gateway keeps of a dead letter when it re-sends it (docs/pipeline.md)."""
STAGING_CHUNK = 5000
"""Rows per staging transaction: a live SQLite gateway waits for each (its busy timeout)."""
WRITABLE_KINDS = ("private", "public")
GATEWAY_TIMEOUT_S = 600.0


@dataclass(frozen=True, slots=True)
class Target:
    path: str
    queue_id: int


@dataclass(frozen=True, slots=True)
class RedriveOptions:
    archive: Path | None
    manifest: Path
    classes: tuple[str, ...]
    queue: str | None
    since: datetime | None
    until: datetime | None
    label: str | None
    source_machine: str | None
    execute: bool
    target: str | None
    gateway: str | None = None
    """Base URL of a gateway on this store: ask it to apply the batch now and wait for it."""
    time_to_be_received: int | None = None
    """Seconds for the re-sent messages (default: each one's original); one that died of its
    timer would die again as soon as it is re-sent."""


def run_redrive(store: Store, options: RedriveOptions, progress: Progress) -> str:
    try:
        return _redrive(store, options, progress)
    finally:  # the live export holds every dead letter's body: never leave it behind
        shutil.rmtree(options.manifest / "_staging", ignore_errors=True)


def _redrive(store: Store, options: RedriveOptions, progress: Progress) -> str:
    if options.queue:
        require_queue(store, options.queue)
    selection = _selection(options)
    fixed_target = resolve_targets(store, [options.target])[options.target] if options.target else None
    spark = get_spark("msmq-gateway redrive")
    chosen = _candidates(store, spark, options).transform(lambda rows: select_dead_letters(rows, selection))
    chosen = chosen.join(_already_redriven(store, spark), "lookup_id", "left_anti")
    by_class = Counter(
        {
            int(row["message_class"]): int(row["count"])
            for row in chosen.groupBy("message_class").count().collect()
        }
    )
    total = sum(by_class.values())
    progress.stage("select", f"{total} dead letters")
    if options.execute and fixed_target is None:  # every original queue, before any change
        resolve_targets(store, [str(row[0]) for row in chosen.select("original_queue").distinct().collect()])
    manifest_path = options.manifest / "manifest"
    chosen.write.mode("overwrite").parquet(str(manifest_path))
    counts = ", ".join(
        f"{classes.class_name(value)} ({classes.class_hex(value)}): {count}"
        for value, count in sorted(by_class.items())
    )
    progress.stage("manifest", f"{manifest_path}: {counts or 'none'}")
    if options.execute and total == 0:
        return (
            f"redrive: no dead letters to re-send (already redriven or none chosen); manifest {manifest_path}"
        )
    if not options.execute:
        return (
            f"redrive: {total} dead letters selected ({counts or 'none'}); manifest {manifest_path}; "
            "add --execute to re-send"
        )
    return _execute(store, spark.read.parquet(str(manifest_path)), fixed_target, options, progress)


def _selection(options: RedriveOptions) -> Selection:
    if options.label is not None:
        import re

        try:
            re.compile(options.label)
        except re.error as error:
            raise PipelineError(f"--label {options.label!r} is not a regular expression: {error}") from None
    return Selection(
        classes=tuple(classes.parse_class(text) for text in options.classes),
        original_queue=_pathname(options.queue) if options.queue else None,
        since=options.since,
        until=options.until,
        label_pattern=options.label,
        source_machine=options.source_machine,
    )


def _pathname(text: str) -> str:
    """`private$/orders` (URL form) -> `private$\\orders` (the path name the view carries)."""
    return text.strip().replace("/", "\\")


def _candidates(store: Store, spark: SparkSession, options: RedriveOptions) -> DataFrame:
    """Live dead letters, plus those archived by completed runs (live rows win a tie)."""
    staged = options.manifest / "_staging" / "live.parquet"
    store.export_to_parquet(
        f"location IN ('{DEAD_LETTER_LOCATIONS[0]}', '{DEAD_LETTER_LOCATIONS[1]}')", [], staged
    )
    live = typed(spark.read.schema(export_spark_schema()).parquet(str(staged)))
    if options.archive is None:
        return live
    done = [row[0] for row in store.execute("SELECT run_id FROM archive_runs WHERE status = 'deleted'")]
    store.commit()
    if not done:
        return live
    archived = (
        spark.read.option("basePath", str(options.archive))
        .parquet(str(options.archive))
        .where(F.col("run_id").isin(*done) & F.col("body").isNotNull())
        .select(*[column.name for column in EXPORT_COLUMNS])
    )
    return live.unionByName(archived.join(live.select("lookup_id"), "lookup_id", "left_anti"))


def _already_redriven(store: Store, spark: SparkSession) -> DataFrame:
    ids = [(int(row[0]),) for row in store.execute("SELECT source_lookup_id FROM redrive_ledger")]
    store.commit()
    return spark.createDataFrame(ids, "lookup_id BIGINT")


def _execute(
    store: Store,
    manifest: DataFrame,
    fixed_target: Target | None,
    options: RedriveOptions,
    progress: Progress,
) -> str:
    columns = [
        F.unix_micros(name).alias(name) if name == "sent_time" else F.col(name) for name in STAGED_COLUMNS
    ]
    rows = manifest.select("lookup_id", "original_queue", *columns).toArrow()
    paths = (
        [fixed_target.path]
        if fixed_target
        else sorted({str(path) for path in rows["original_queue"].to_pylist()})
    )
    targets = resolve_targets(store, paths)
    target_ids = [
        (fixed_target or targets[str(path)]).queue_id for path in rows["original_queue"].to_pylist()
    ]
    batch = uuid.uuid4().hex
    if options.time_to_be_received is not None:
        rows = rows.set_column(
            rows.schema.get_field_index("ttbr_seconds"),
            "ttbr_seconds",
            pa.array([options.time_to_be_received] * rows.num_rows, pa.int64()),
        )
    staged = pa.table(
        {
            "batch_id": pa.array([batch] * rows.num_rows, pa.string()),
            "source_lookup_id": rows["lookup_id"],
            "target_queue_id": pa.array(target_ids, pa.int32()),
            **{name: rows[name] for name in STAGED_COLUMNS},
        }
    )
    _stage(store, batch, _staging_types(staged), progress)
    progress.stage("stage", f"{rows.num_rows} rows staged as batch {batch}")
    if options.gateway is None:
        return (
            f"redrive: {rows.num_rows} dead letters staged as batch {batch}; the gateway re-sends them "
            f"within MSMQGW_REDRIVE_INTERVAL_S (5 s by default): GET /api/redrives/{batch} shows the outcome"
        )
    return _applied_by(options.gateway, batch)


def _stage(store: Store, batch: str, staged: pa.Table, progress: Progress) -> None:
    """The batch row first (`staging`: the gateway leaves it alone), the rows in short
    transactions, then `staged`. A pipeline stopped half-way leaves a `staging` batch, which
    the gateway fails and clears after an hour; a failure here clears it at once."""
    now = times.now_us()
    with store.transaction():
        store.execute(
            "INSERT INTO redrive_batches (batch_id, status, staged_count, resent_count, skipped_count, "
            "staged_at) VALUES (?, 'staging', ?, 0, 0, ?)",
            [batch, staged.num_rows, now],
        )
    try:
        for offset in range(0, staged.num_rows, STAGING_CHUNK):
            with store.transaction():
                store.ingest("redrive_staging", staged.slice(offset, STAGING_CHUNK))
            progress.stage(
                "stage", f"{min(offset + STAGING_CHUNK, staged.num_rows)} of {staged.num_rows} rows"
            )
        with store.transaction():
            store.execute("UPDATE redrive_batches SET status = 'staged' WHERE batch_id = ?", [batch])
    except BaseException:
        with store.transaction():
            store.execute("DELETE FROM redrive_staging WHERE batch_id = ?", [batch])
            store.execute("DELETE FROM redrive_batches WHERE batch_id = ?", [batch])
        raise


def _applied_by(gateway: str, batch: str) -> str:
    """POST /api/redrives/{batch}/apply and say what became of the batch."""
    url = f"{gateway.rstrip('/')}/api/redrives/{batch}/apply"
    request = urllib.request.Request(url, method="POST")  # no body: no form type the edge refuses
    try:
        with urllib.request.urlopen(request, timeout=GATEWAY_TIMEOUT_S) as answer:
            outcome = json.loads(answer.read(1 << 20))
    except (urllib.error.URLError, OSError, ValueError) as error:
        raise PipelineError(
            f"batch {batch} is staged, but the gateway at {gateway} did not apply it ({error}); "
            f"its background pass will: GET /api/redrives/{batch} shows the outcome"
        ) from None
    if outcome.get("status") != "applied":
        raise PipelineError(f"batch {batch} {outcome.get('status')}: {outcome.get('error')}")
    return (
        f"redrive: batch {batch} applied by {gateway}: {outcome['resent_count']} re-sent, "
        f"{outcome['skipped_count']} redriven before"
    )


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _path_key(pathname: str) -> str:
    """queues.path_key of a path name: A-Z lowered and nothing else, as the gateway folds queue
    names (qm.paths.ascii_fold, which the pipeline may not import)."""
    return pathname.translate(_ASCII_LOWER)


def resolve_targets(store: Store, paths: Sequence[str]) -> dict[str, Target]:
    """Every target queue must exist and take messages, or nothing is staged at all; the
    error names every one that does not (with what to do)."""
    found: dict[str, Target] = {}
    missing: list[str] = []
    closed: list[str] = []
    for path in sorted(paths):
        pathname = path.strip().replace("/", "\\")
        query = "SELECT id, kind, journal_of FROM queues WHERE path_key = ?"
        rows = store.execute(query, [_path_key(pathname)])
        if not rows:
            missing.append(f"'{pathname}'")
            continue
        queue_id, kind, journal_of = rows[0]
        if kind not in WRITABLE_KINDS or journal_of is not None:
            closed.append(f"'{pathname}' (a {kind} queue)")
            continue
        found[path] = Target(pathname, int(queue_id))
    store.commit()
    problems = []
    if missing:
        noun = "target does" if len(missing) == 1 else f"{len(missing)} targets do"
        problems.append(f"the redrive {noun} not exist: {', '.join(missing)}")
    if closed:
        problems.append(f"these do not take messages: {', '.join(closed)}")
    if problems:
        raise PipelineError("; ".join(problems) + "; create the queues, or send all to one queue with --to")
    return found


def require_queue(store: Store, path: str) -> str:
    """The `--queue` filter names a queue that exists (a typo would select nothing, silently)."""
    pathname = path.strip().replace("/", "\\")
    found = store.execute("SELECT 1 FROM queues WHERE path_key = ?", [_path_key(pathname)])
    store.commit()
    if not found:
        raise PipelineError(f"unknown queue '{pathname}'")
    return pathname


def _staging_types(staged: pa.Table) -> pa.Table:
    """Match the staging table's column types exactly (PostgreSQL's COPY wants them)."""
    types = {"priority": pa.int16(), "delivery": pa.int16(), "body_type": pa.int32()}
    for name, wanted in types.items():
        index = staged.schema.get_field_index(name)
        staged = staged.set_column(index, name, staged[name].cast(wanted))
    return staged
