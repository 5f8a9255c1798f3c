"""report: per queue and day, from the archive and the live store -> Parquet, JSON, one HTML page.

Every message row counts once where it sits: arrivals are distinct message IDs per original
queue and day of arrival; receives are journal copies (so only queues with their journal on
report receives); expiries and dead letters are dead-letter copies. Archived runs count only
once complete (`deleted`): until then their rows are still in the store.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from pipeline import classes
from pipeline.progress import Progress
from pipeline.report_html import render
from pipeline.schemas import DEAD_LETTER_LOCATIONS, EXPORT_COLUMNS, export_spark_schema, typed
from pipeline.session import get_spark
from pipeline.store import Store

TOP = 10
STAGING = "_staging"


def run_report(store: Store, archive: Path | None, out: Path, progress: Progress) -> str:
    try:
        return _report(store, archive, out, progress)
    finally:  # the live export holds every body: never leave it next to the report
        shutil.rmtree(out / STAGING, ignore_errors=True)


def _report(store: Store, archive: Path | None, out: Path, progress: Progress) -> str:
    spark = get_spark("msmq-gateway report")
    rows = history(store, spark, archive, out).cache()
    total = rows.count()
    progress.stage("read", f"{total} message rows")
    # The results are small: one Spark job each, then Parquet, JSON and HTML from Arrow.
    results = {name: frame.toArrow() for name, frame in report_frames(rows).items()}
    tables = {name: result.to_pylist() for name, result in results.items()}
    progress.stage("aggregate", ", ".join(f"{name}: {len(values)}" for name, values in tables.items()))
    for name, result in results.items():
        pq.write_table(result, out / f"{name}.parquet")
    (out / "report.json").write_text(json.dumps(tables, indent=2, default=str), encoding="utf-8")
    (out / "report.html").write_text(render(tables), encoding="utf-8")
    rows.unpersist()
    elapsed = progress.elapsed()
    return f"report: {total} message rows -> {out / 'report.html'}, report.json, Parquet; {elapsed:.1f} s"


def history(store: Store, spark: SparkSession, archive: Path | None, out: Path) -> DataFrame:
    """Every row of the export view, plus the rows of completed archive runs."""
    staged = out / STAGING / "live.parquet"
    store.export_to_parquet("1 = 1", [], staged)
    live = typed(spark.read.schema(export_spark_schema()).parquet(str(staged)))
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
    )
    return live.unionByName(archived)


def report_frames(rows: DataFrame) -> dict[str, DataFrame]:
    """The report's tables (small: per queue and day, or top-N)."""
    return {
        "daily": daily(rows),
        "dead_letters_by_class": dead_letters_by_class(rows),
        "latency": latency(rows),
        "top_dead_letter_sources": top_dead_letters(rows, "source_machine"),
        "top_dead_letter_labels": top_dead_letters(rows, "label"),
    }


def _origin() -> Column:
    """The queue a row is about: its original queue for copies, else where it sits."""
    return F.coalesce(F.col("original_queue"), F.col("queue"))


def daily(rows: DataFrame) -> DataFrame:
    """Per queue and day: arrivals, receives, expiries, dead letters."""
    dead = F.col("location").isin(*DEAD_LETTER_LOCATIONS)
    keyed = rows.withColumn("queue_of", _origin())
    arrivals = keyed.groupBy("queue_of", F.to_date("arrived_time").alias("day")).agg(
        F.count_distinct("message_id").alias("arrivals")
    )
    events = (
        keyed.withColumn("day", F.to_date("stored_time"))
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
        F.date_format("day", "yyyy-MM-dd").alias("day"),
        "arrivals",
        "receives",
        "expiries",
        "dead_letters",
    ).orderBy("queue", "day")


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


def top_dead_letters(rows: DataFrame, column: str) -> DataFrame:
    return (
        rows.where(F.col("location").isin(*DEAD_LETTER_LOCATIONS))
        .groupBy(column)
        .count()
        .orderBy(F.desc("count"), column)
        .limit(TOP)
        .select(F.col(column).alias("value"), F.col("count").alias("dead_letters"))
    )
