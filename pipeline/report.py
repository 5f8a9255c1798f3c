"""report: per queue and day, from the archive and the live store -> Parquet, JSON, one HTML page.

Every message row counts once where it sits: arrivals are distinct message IDs per original
queue and day of arrival; receives are journal copies (so only queues with their journal on
report receives); expiries and dead letters are dead-letter copies. Archived runs count only
once complete (`deleted`): until then their rows are still in the store.
"""

from __future__ import annotations

import json
import shutil
from datetime import timedelta
from pathlib import Path

import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from pipeline import classes, report_context
from pipeline.progress import Progress
from pipeline.report_html import render
from pipeline.schemas import DEAD_LETTER_LOCATIONS, EXPORT_COLUMNS, export_spark_schema, typed
from pipeline.session import get_spark
from pipeline.store import Store

TOP = 10
STAGING = "_staging"
HOUR, DAY = "hour", "day"
HOURLY_UP_TO = timedelta(days=3)
"""A history this short is shown per hour; a longer one per day."""
NEVER_ARRIVED = 0x8002
"""NACK_REACH_QUEUE_TIMEOUT: the message died on its way, before its queue."""


def run_report(store: Store, archive: Path | None, out: Path, progress: Progress) -> str:
    try:
        return _report(store, archive, out, progress)
    finally:  # the live export holds every body: never leave it next to the report
        shutil.rmtree(out / STAGING, ignore_errors=True)


def _report(store: Store, archive: Path | None, out: Path, progress: Progress) -> str:
    spark = get_spark("msmq-gateway report")
    rows = history(store, spark, archive, out).cache()
    sources = {str(row["source"]): int(row["count"]) for row in rows.groupBy("source").count().collect()}
    total = sum(sources.values())
    progress.stage(
        "read", f"{total} message rows ({sources.get('live', 0)} live, {sources.get('archive', 0)} archived)"
    )
    span = rows.agg(F.min("arrived_time").alias("first"), F.max("stored_time").alias("last")).first()
    first, last = (span["first"], span["last"]) if span is not None else (None, None)
    resolution = HOUR if first is not None and last - first <= HOURLY_UP_TO else DAY
    # The results are small: one Spark job each, then Parquet, JSON and HTML from Arrow.
    results = {name: frame.toArrow() for name, frame in report_frames(rows, resolution).items()}
    rows.unpersist()
    tables = {name: result.to_pylist() for name, result in results.items()}
    progress.stage("aggregate", ", ".join(f"{name}: {len(values)}" for name, values in tables.items()))
    for name, result in results.items():
        pq.write_table(result, out / f"{name}.parquet")
    operations = report_context.read(store, archive)
    document = {
        "summary": report_context.summary(tables, sources, first, last, resolution),
        "warnings": report_context.warnings(tables, operations),
        **tables,
        **operations.tables(),
    }
    (out / "report.json").write_text(json.dumps(document, indent=2, default=str), encoding="utf-8")
    (out / "report.html").write_text(render(document), encoding="utf-8")
    elapsed = progress.elapsed()
    return f"report: {total} message rows -> {out / 'report.html'}, report.json, Parquet; {elapsed:.1f} s"


def history(store: Store, spark: SparkSession, archive: Path | None, out: Path) -> DataFrame:
    """Every row of the export view, plus the rows of completed archive runs."""
    staged = out / STAGING / "live.parquet"
    store.export_to_parquet("1 = 1", [], staged)
    live = typed(spark.read.schema(export_spark_schema()).parquet(str(staged))).withColumn(
        "source", F.lit("live")
    )
    if archive is None:
        return live
    done = [row[0] for row in store.execute("SELECT run_id FROM archive_runs WHERE status = 'deleted'")]
    store.commit()
    if not done:
        return live
    archived = (
        spark.read.option("basePath", str(archive))
        .parquet(str(archive))
        .where(F.col("run_id").isin(*done))
        .select(*[column.name for column in EXPORT_COLUMNS])
        .withColumn("source", F.lit("archive"))
    )
    return live.unionByName(archived)


def report_frames(rows: DataFrame, resolution: str = DAY) -> dict[str, DataFrame]:
    """The report's tables (small: per queue and period, or top-N)."""
    return {
        "daily": daily(rows),
        "timeline": counts_per(rows, resolution),
        "dead_letters_by_class": dead_letters_by_class(rows),
        "dead_letter_classes_over_time": classes_over_time(rows, resolution),
        "latency": latency(rows),
        "top_dead_letter_sources": top_dead_letters(rows, F.col("source_machine")),
        "top_dead_letter_labels": top_dead_letters(rows, label_pattern()),
    }


def label_pattern() -> Column:
    """Labels with their numbers and GUIDs replaced by `#`: `order 1234` and `order 77` are
    one kind of label; a top list of labels that each carry an ID says nothing."""
    guid = "[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}"
    return F.regexp_replace(F.regexp_replace(F.col("label"), guid, "#"), "#?[0-9]+", "#")


def _origin() -> Column:
    """The queue a row is about: its original queue for copies, else where it sits."""
    return F.coalesce(F.col("original_queue"), F.col("queue"))


def daily(rows: DataFrame) -> DataFrame:
    """Per queue and day: arrivals, receives, expiries, dead letters."""
    return counts_per(rows, DAY).withColumnRenamed("period", "day")


def _bucket(column: str, resolution: str) -> Column:
    return F.date_format(column, "yyyy-MM-dd HH:00" if resolution == HOUR else "yyyy-MM-dd")


def counts_per(rows: DataFrame, resolution: str) -> DataFrame:
    """Per queue and period (hour or day): arrivals, receives, expiries, dead letters. A
    message that never reached its queue (NACK_REACH_QUEUE_TIMEOUT) is no arrival there."""
    dead = F.col("location").isin(*DEAD_LETTER_LOCATIONS)
    keyed = rows.withColumn("queue_of", _origin())
    arrivals = (
        keyed.where(F.col("message_class") != NEVER_ARRIVED)
        .groupBy("queue_of", _bucket("arrived_time", resolution).alias("day"))
        .agg(F.count_distinct("message_id").alias("arrivals"))
    )
    events = (
        keyed.withColumn("day", _bucket("stored_time", resolution))
        .groupBy("queue_of", "day")
        .agg(
            F.sum(F.when(F.col("received_time").isNotNull(), 1).otherwise(0)).alias("receives"),
            F.sum(F.when(dead & F.col("message_class").isin(*classes.EXPIRY_CLASSES), 1).otherwise(0)).alias(
                "expiries"
            ),
            F.sum(F.when(dead, 1).otherwise(0)).alias("dead_letters"),
        )
    )
    joined = arrivals.join(events, ["queue_of", "day"], "full_outer").na.fill(0)
    return joined.select(
        F.col("queue_of").alias("queue"),
        F.col("day").alias("period"),
        "arrivals",
        "receives",
        "expiries",
        "dead_letters",
    ).orderBy("queue", "period")


def classes_over_time(rows: DataFrame, resolution: str) -> DataFrame:
    """Dead letters of every queue per period and class: is a kind of failure growing?"""
    names = F.create_map(*[F.lit(item) for pair in classes.CLASS_NAMES.items() for item in pair])
    return (
        rows.where(F.col("location").isin(*DEAD_LETTER_LOCATIONS))
        .groupBy(_bucket("stored_time", resolution).alias("period"), "message_class")
        .count()
        .select(
            "period",
            F.coalesce(names[F.col("message_class")], F.lit("UNKNOWN")).alias("class_name"),
            F.format_string("0x%04X", F.col("message_class")).alias("class_hex"),
            F.col("count").alias("dead_letters"),
        )
        .orderBy("period", "class_hex")
    )


def dead_letters_by_class(rows: DataFrame) -> DataFrame:
    names = F.create_map(*[F.lit(item) for pair in classes.CLASS_NAMES.items() for item in pair])
    return (
        rows.where(F.col("location").isin(*DEAD_LETTER_LOCATIONS))
        .groupBy(
            _origin().alias("queue"), F.date_format("stored_time", "yyyy-MM-dd").alias("day"), "message_class"
        )
        .count()
        .select(
            "queue",
            "day",
            F.coalesce(names[F.col("message_class")], F.lit("UNKNOWN")).alias("class_name"),
            F.format_string("0x%04X", F.col("message_class")).alias("class_hex"),
            F.col("count").alias("dead_letters"),
        )
        .orderBy("queue", "day", "class_hex")
    )


def latency(rows: DataFrame) -> DataFrame:
    """Per queue: sent->arrived and arrived->received (ms), remaining TTBR at receive (s)."""
    millis = (F.unix_micros("arrived_time") - F.unix_micros("sent_time")) / 1000
    waited = (F.unix_micros("received_time") - F.unix_micros("arrived_time")) / 1000
    ttbr_end = F.unix_micros("sent_time") + F.col("ttbr_seconds") * 1_000_000
    remaining = F.when(
        F.col("received_time").isNotNull() & (F.col("ttbr_seconds") < 0xFFFFFFFF),
        (ttbr_end - F.unix_micros("received_time")) / 1_000_000,
    )
    # one row per message for sent->arrived (a message and its copies share their times)
    per_message = rows.withColumn("queue_of", _origin()).dropDuplicates(["message_id", "queue_of"])
    arrivals = per_message.groupBy(F.col("queue_of").alias("queue")).agg(
        *_percentiles(millis, "sent_to_arrived_ms")
    )
    receipts = (
        rows.where(F.col("received_time").isNotNull())
        .groupBy(_origin().alias("queue"))
        .agg(
            *_percentiles(waited, "arrived_to_received_ms"),
            *_percentiles(remaining, "ttbr_left_at_receive_s"),
        )
    )
    return arrivals.join(receipts, "queue", "left").orderBy("queue")


def _percentiles(value: Column, name: str) -> list[Column]:
    found = F.percentile_approx(value, [0.5, 0.9, 0.99])
    return [found[index].alias(f"{name}_{label}") for index, label in enumerate(("p50", "p90", "p99"))]


def top_dead_letters(rows: DataFrame, column: Column) -> DataFrame:
    return (
        rows.where(F.col("location").isin(*DEAD_LETTER_LOCATIONS))
        .groupBy(column.alias("value"))
        .count()
        .orderBy(F.desc("count"), "value")
        .limit(TOP)
        .select("value", F.col("count").alias("dead_letters"))
    )
