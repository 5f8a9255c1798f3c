"""The export contract: the columns of `message_export_v1`, and how Spark types them.

The view keeps the store's integer microseconds (UTC); `typed()` turns the time columns
into TimestampType, which is why every session runs with spark.sql.session.timeZone=UTC.
tests/pipeline/test_schema_drift.py fails when the migrations and this module disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

EXPORT_VIEW = "message_export_v1"


@dataclass(frozen=True, slots=True)
class Column:
    name: str
    kind: str
    """integer, text, bytes, boolean or time (integer microseconds since the epoch, UTC)."""
    nullable: bool = False


EXPORT_COLUMNS: tuple[Column, ...] = (
    Column("lookup_id", "integer"),
    Column("queue", "text"),
    Column("location", "text"),
    Column("original_queue", "text", nullable=True),
    Column("message_class", "integer"),
    Column("priority", "integer"),
    Column("message_id", "text"),
    Column("correlation_id", "bytes", nullable=True),
    Column("label", "text"),
    Column("body_type", "integer"),
    Column("app_specific", "integer"),
    Column("delivery", "integer"),
    Column("transactional", "boolean"),
    Column("body_length", "integer"),
    Column("body", "bytes"),
    Column("sent_time", "time"),
    Column("arrived_time", "time"),
    Column("stored_time", "time"),
    Column("received_time", "time", nullable=True),
    Column("dead_lettered_time", "time", nullable=True),
    Column("ttbr_seconds", "integer"),
    Column("ttrq_seconds", "integer"),
    Column("ttbr_deadline", "time", nullable=True),
    Column("ttrq_deadline", "time", nullable=True),
    Column("source_machine", "text"),
)
"""In the view's order. Locations: queue, journal, deadletter, deadxact, outgoing."""

LOCATIONS = ("queue", "journal", "deadletter", "deadxact", "outgoing")
DEAD_LETTER_LOCATIONS = ("deadletter", "deadxact")
ARCHIVED_LOCATIONS = ("journal", *DEAD_LETTER_LOCATIONS)
TIME_COLUMNS = tuple(column.name for column in EXPORT_COLUMNS if column.kind == "time")
NULLABLE_BYTES_OR_TEXT = {"correlation_id": "X''", "original_queue": "''"}
"""Nullable columns a SQLite result could mistype; the value each is defaulted to, with a flag."""
INFINITE_SECONDS = 0xFFFFFFFF

_ARROW_TYPES = {
    "integer": pa.int64(),
    "text": pa.string(),
    "bytes": pa.binary(),
    "boolean": pa.bool_(),
    "time": pa.int64(),
}


def export_arrow_schema() -> pa.Schema:
    """The view's rows as staged Parquet: times still integer microseconds."""
    return pa.schema(
        [pa.field(column.name, _ARROW_TYPES[column.kind], column.nullable) for column in EXPORT_COLUMNS]
    )


def export_spark_schema() -> StructType:
    """The staged Parquet as Spark reads it (explicit: no inference)."""
    from pyspark.sql import types as T

    spark_types = {
        "integer": T.LongType(),
        "text": T.StringType(),
        "bytes": T.BinaryType(),
        "boolean": T.BooleanType(),
        "time": T.LongType(),
    }
    return T.StructType(
        [T.StructField(column.name, spark_types[column.kind], column.nullable) for column in EXPORT_COLUMNS]
    )


def typed_spark_schema() -> StructType:
    """The view's schema in Spark terms, times as TimestampType: what `typed()` returns."""
    from pyspark.sql import types as T

    fields = [
        T.StructField(field.name, T.TimestampType(), field.nullable) if field.name in TIME_COLUMNS else field
        for field in export_spark_schema().fields
    ]
    return T.StructType(fields)


def typed(frame: DataFrame) -> DataFrame:
    """Microsecond columns -> timestamps (UTC session), every other column as exported."""
    from pyspark.sql import functions as F

    return frame.select(
        *[
            F.timestamp_micros(F.col(column.name)).alias(column.name)
            if column.kind == "time"
            else F.col(column.name)
            for column in EXPORT_COLUMNS
        ]
    )
