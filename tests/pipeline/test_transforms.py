"""The jobs' DataFrame transforms on tiny frames built in code."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import SparkSession
from pyspark.testing import assertDataFrameEqual, assertSchemaEqual

from pipeline.report import daily, dead_letters_by_class
from pipeline.schemas import export_arrow_schema, export_spark_schema, typed, typed_spark_schema
from pipeline.transforms import Selection, archive_rows, select_dead_letters, verify
from tests.pipeline.frames import JANUARY, frame, row

pytestmark = pytest.mark.spark


def test_staged_rows_read_back_typed_with_the_declared_schema(spark: SparkSession, tmp_path: Path) -> None:
    micros = 1_767_225_600_000_001  # 2026-01-01T00:00:00.000001Z: microseconds survive
    columns: dict[str, list[object]] = {field.name: [None] for field in export_arrow_schema()}
    columns |= {name: [micros] for name in ("sent_time", "arrived_time", "stored_time")}
    columns |= {
        "lookup_id": [1],
        "queue": ["q"],
        "location": ["queue"],
        "message_class": [0],
        "priority": [3],
    }
    columns |= {"message_id": ["m"], "label": [""], "body_type": [0], "app_specific": [0], "delivery": [1]}
    columns |= {"transactional": [False], "body_length": [0], "body": [b""], "ttbr_seconds": [1]}
    columns |= {"ttrq_seconds": [1], "source_machine": ["s"]}
    pq.write_table(pa.table(columns, schema=export_arrow_schema()), tmp_path / "staged.parquet")
    found = typed(spark.read.schema(export_spark_schema()).parquet(str(tmp_path / "staged.parquet")))
    assertSchemaEqual(found.schema, typed_spark_schema())
    first = found.first()
    assert first is not None
    assert first["sent_time"] == (JANUARY + timedelta(microseconds=1)).replace(tzinfo=None)


def test_archive_rows_replace_the_body_by_its_sha256_when_asked(spark: SparkSession) -> None:
    rows = archive_rows(frame(spark, [row(1)]), "run-1", "sha256")
    found = rows.select("body", "body_sha256", "dt", "run_id", "queue")
    expected = spark.createDataFrame(
        [(None, hashlib.sha256(b"hello").hexdigest(), "2026-01-01", "run-1", "system$;deadletter")],
        found.schema,
    )
    assertDataFrameEqual(found, expected)


def test_verify_accepts_rows_gone_from_the_store_and_refuses_changed_or_doubled_rows(
    spark: SparkSession,
) -> None:
    archived = archive_rows(frame(spark, [row(1), row(2), row(3)]), "r", "keep").drop("dt", "run_id")
    same_but_one_gone = archive_rows(frame(spark, [row(1), row(2)]), "r", "keep").drop("dt", "run_id")
    good = verify(archived, same_but_one_gone)
    assert (good.ok, good.archived, good.gone_from_store, good.mismatched) == (True, 3, 1, 0)
    changed = archive_rows(frame(spark, [row(1), row(2, label="edited")]), "r", "keep").drop("dt", "run_id")
    doubled = archived.unionByName(archived.where("lookup_id = 3"))
    bad = verify(doubled, changed)
    assert (bad.ok, bad.archived, bad.distinct_ids, bad.mismatched) == (False, 4, 3, 1)


def test_dead_letters_are_selected_by_class_queue_time_label_and_source(spark: SparkSession) -> None:
    rows = frame(
        spark,
        [
            row(1),
            row(2, message_class=0xC001),
            row(3, original_queue="private$\\billing"),
            row(4, label="refund 4"),
            row(5, dead_lettered_time=JANUARY + timedelta(days=40)),
            row(6, source_machine="00000000-0000-0000-0000-000000000001"),
            row(7, location="journal"),
        ],
    )
    selection = Selection(
        classes=(0xC002,),
        original_queue="PRIVATE$\\Orders",
        since=JANUARY,
        until=JANUARY + timedelta(days=30),
        label_pattern="^order",
        source_machine=row(1)["source_machine"].upper(),
    )
    chosen = select_dead_letters(rows, selection).select("lookup_id")
    assertDataFrameEqual(chosen, spark.createDataFrame([(1,)], "lookup_id BIGINT"))
    assert select_dead_letters(rows, Selection()).count() == 6


def test_daily_counts_arrivals_once_per_message_and_dead_letters_by_class(spark: SparkSession) -> None:
    received = JANUARY + timedelta(seconds=5)
    rows = frame(
        spark,
        [
            row(1, location="queue", queue="private$\\orders", original_queue=None, dead_lettered_time=None),
            row(2, location="journal", message_id="m2", received_time=received, stored_time=received),
            row(3, message_id="m3"),
            row(4, message_id="m3", location="journal", received_time=received),  # same message: one arrival
            row(5, message_id="m5", message_class=0xC001),
        ],
    )
    found = daily(rows).select("queue", "day", "arrivals", "receives", "expiries", "dead_letters")
    expected = spark.createDataFrame([("private$\\orders", "2026-01-01", 4, 2, 1, 2)], found.schema)
    assertDataFrameEqual(found, expected)
    classes = dead_letters_by_class(rows).select("class_name", "class_hex", "dead_letters")
    assertDataFrameEqual(
        classes,
        spark.createDataFrame(
            [("NACK_Q_PURGED", "0xC001", 1), ("NACK_RECEIVE_TIMEOUT", "0xC002", 1)], classes.schema
        ),
    )
