"""redrive: choose dead letters (live and archived) -> manifest -> with --execute, re-send them.

Re-sending goes through `redrive_staging` and `redrive_ledger` (probe §3): the ledger's
primary key is the dead letter's lookup ID, so a dead letter is redriven at most once
whatever crashes or re-runs happen; each chunk of the merge is one transaction.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pipeline import classes
from pipeline.errors import PipelineError
from pipeline.progress import Progress
from pipeline.redrive_merge import (
    STAGED_COLUMNS,
    Target,
    merge_chunk,
    pending,
    require_queue,
    resolve_targets,
)
from pipeline.schemas import DEAD_LETTER_LOCATIONS, EXPORT_COLUMNS, export_spark_schema, typed
from pipeline.session import get_spark
from pipeline.store import Store
from pipeline.transforms import Selection, select_dead_letters


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
    rate: float
    chunk: int
    time_to_be_received: int | None = None
    """Seconds for the re-sent messages (default: each one's original); one that died of its
    timer would die again as soon as it is re-sent."""


def run_redrive(store: Store, options: RedriveOptions, progress: Progress) -> str:
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
    manifest_path = options.manifest / "manifest"
    chosen.write.mode("overwrite").parquet(str(manifest_path))
    counts = ", ".join(
        f"{classes.class_name(value)} ({classes.class_hex(value)}): {count}"
        for value, count in sorted(by_class.items())
    )
    progress.stage("manifest", f"{manifest_path}: {counts or 'none'}")
    if not options.execute:
        return (
            f"redrive: {total} dead letters selected ({counts or 'none'}); manifest {manifest_path}; "
            "add --execute to re-send"
        )
    moved = _execute(store, spark.read.parquet(str(manifest_path)), fixed_target, options, progress)
    elapsed = progress.elapsed()
    return f"redrive: {moved} of {total} dead letters re-sent; manifest {manifest_path}; {elapsed:.1f} s"


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
) -> int:
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
    with store.transaction():
        store.ingest("redrive_staging", _staging_types(staged))
    progress.stage("stage", f"{rows.num_rows} rows staged as batch {batch}")
    moved = _merge(store, batch, options, progress)
    with store.transaction():
        store.execute("DELETE FROM redrive_staging WHERE batch_id = ?", [batch])
    return moved


def _merge(store: Store, batch: str, options: RedriveOptions, progress: Progress) -> int:
    """Chunk by chunk, each in one transaction, at most `rate` messages per second."""
    started = time.monotonic()
    moved = 0
    while chunk := pending(store, batch, options.chunk):
        moved += merge_chunk(store, batch, chunk, progress)
        progress.stage("merge", f"{moved} re-sent")
        if options.rate > 0:
            time.sleep(max(0.0, moved / options.rate - (time.monotonic() - started)))
    return moved


def _staging_types(staged: pa.Table) -> pa.Table:
    """Match the staging table's column types exactly (PostgreSQL's COPY wants them)."""
    types = {"priority": pa.int16(), "delivery": pa.int16(), "body_type": pa.int32()}
    for name, wanted in types.items():
        index = staged.schema.get_field_index(name)
        staged = staged.set_column(index, name, staged[name].cast(wanted))
    return staged
