"""Pure DataFrame transforms shared by the jobs (tested on tiny frames built in code)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from pipeline.schemas import DEAD_LETTER_LOCATIONS, EXPORT_COLUMNS

BODY_MODES = ("keep", "sha256")
PARTITION_COLUMNS = ("queue", "dt", "run_id")
ARCHIVE_COLUMNS = (*(column.name for column in EXPORT_COLUMNS), "body_sha256")
"""Archived rows: the typed view's columns plus the body's SHA-256 (hex), then the partitions."""


def archive_rows(typed_rows: DataFrame, run_id: str, body_mode: str) -> DataFrame:
    """Rows as archived: partitioned by queue and the day they were stored; body kept or hashed."""
    if body_mode not in BODY_MODES:
        raise ValueError(f"body mode {body_mode!r}: use one of {', '.join(BODY_MODES)}")
    with_hash = typed_rows.withColumn("body_sha256", F.sha2(F.col("body"), 256))
    if body_mode == "sha256":
        with_hash = with_hash.withColumn("body", F.lit(None).cast("binary"))
    return with_hash.select(
        *ARCHIVE_COLUMNS,
        F.date_format(F.col("stored_time"), "yyyy-MM-dd").alias("dt"),
        F.lit(run_id).alias("run_id"),
    )


def row_hash() -> Column:
    """One 64-bit hash over every archived column (partitions excluded)."""
    return F.xxhash64(*[F.col(name) for name in ARCHIVE_COLUMNS])


@dataclass(frozen=True, slots=True)
class Verification:
    archived: int
    distinct_ids: int
    checksum: int
    mismatched: int
    """Rows whose lookup ID is in both the archive and the store but whose contents differ."""
    gone_from_store: int
    """Archived rows no longer in the store (received from a journal or redriven meanwhile)."""

    @property
    def ok(self) -> bool:
        return self.archived == self.distinct_ids and self.mismatched == 0


def checksum(rows: DataFrame) -> tuple[int, int, int]:
    """(rows, distinct lookup IDs, XOR of row hashes): order-free, and overflow-free."""
    result = rows.agg(
        F.count(F.lit(1)).alias("rows"),
        F.count_distinct("lookup_id").alias("ids"),
        F.coalesce(F.bit_xor(row_hash()), F.lit(0)).alias("checksum"),
    ).first()
    assert result is not None
    return int(result["rows"]), int(result["ids"]), int(result["checksum"])


def verify(archived: DataFrame, store_rows: DataFrame) -> Verification:
    """Compare the archive read back with the same rows read again from the store."""
    count, distinct_ids, total = checksum(archived)
    left = archived.select("lookup_id", row_hash().alias("archived_hash"))
    right = store_rows.select("lookup_id", row_hash().alias("store_hash"))
    joined = left.join(right, "lookup_id", "left")
    result = joined.agg(
        F.sum(F.when(F.col("store_hash").isNull(), 1).otherwise(0)).alias("gone"),
        F.sum(
            F.when(
                F.col("store_hash").isNotNull() & (F.col("store_hash") != F.col("archived_hash")), 1
            ).otherwise(0)
        ).alias("mismatched"),
    ).first()
    assert result is not None
    return Verification(count, distinct_ids, total, int(result["mismatched"] or 0), int(result["gone"] or 0))


@dataclass(frozen=True, slots=True)
class Selection:
    """Which dead letters to redrive; None (or empty) means any."""

    classes: tuple[int, ...] = ()
    original_queue: str | None = None
    """A path name (`private$\\orders`), compared case-insensitively."""
    since: datetime | None = None
    until: datetime | None = None
    label_pattern: str | None = None
    source_machine: str | None = None


def select_dead_letters(rows: DataFrame, selection: Selection) -> DataFrame:
    """Dead-letter rows (typed view columns) matching every given criterion. Time is when
    the message was dead-lettered (or, when that is unknown, stored in the dead-letter queue)."""
    died = F.coalesce(F.col("dead_lettered_time"), F.col("stored_time"))
    condition = F.col("location").isin(*DEAD_LETTER_LOCATIONS)
    if selection.classes:
        condition &= F.col("message_class").isin(*selection.classes)
    if selection.original_queue is not None:
        condition &= F.lower(F.col("original_queue")) == selection.original_queue.lower()
    if selection.since is not None:
        condition &= died >= F.lit(selection.since)
    if selection.until is not None:
        condition &= died < F.lit(selection.until)
    if selection.label_pattern is not None:
        condition &= F.col("label").rlike(selection.label_pattern)
    if selection.source_machine is not None:
        condition &= F.lower(F.col("source_machine")) == selection.source_machine.lower()
    return rows.where(condition)
