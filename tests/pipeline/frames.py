"""Tiny typed export rows built in code, for the transform tests."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from pipeline.schemas import typed_spark_schema

JANUARY = datetime(2026, 1, 1, tzinfo=UTC)
SOURCE = "60dff86d-3aea-4102-b557-e79e48080cf4"


def row(lookup_id: int, location: str = "deadletter", **changes: Any) -> dict[str, Any]:
    """One export row (typed); by default a dead letter of private$\\orders from January."""
    values: dict[str, Any] = {
        "lookup_id": lookup_id,
        "queue": "system$;deadletter" if location == "deadletter" else "private$\\orders;journal",
        "location": location,
        "original_queue": "private$\\orders",
        "message_class": 0xC002 if location == "deadletter" else 0,
        "priority": 3,
        "message_id": f"{{{SOURCE}}}\\{lookup_id}",
        "correlation_id": None,
        "label": f"order {lookup_id}",
        "body_type": 0,
        "app_specific": 0,
        "delivery": 1,
        "transactional": False,
        "body_length": 5,
        "body": b"hello",
        "sent_time": JANUARY,
        "arrived_time": JANUARY,
        "stored_time": JANUARY,
        "received_time": None,
        "dead_lettered_time": JANUARY if location == "deadletter" else None,
        "ttbr_seconds": 10,
        "ttrq_seconds": 10,
        "ttbr_deadline": None,
        "ttrq_deadline": None,
        "source_machine": SOURCE,
    }
    values.update(changes)
    return values


def frame(spark: SparkSession, rows: list[dict[str, Any]]) -> DataFrame:
    schema = typed_spark_schema()
    return spark.createDataFrame([tuple(item[name] for name in schema.names) for item in rows], schema)
