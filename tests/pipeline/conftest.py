"""Pipeline fixtures: one local SparkSession for the whole run, and plain SQL on the store.

The session settings are those the Spark probe measured as fastest for small tests
(local[2], UI off, two shuffle partitions, C1-only JIT with SerialGC, UTC).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa

pytest.importorskip("pyspark", reason="the pipeline extra is not installed")

from pyspark.sql import SparkSession


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("msmq-gateway tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.sources.partitionOverwriteMode", "dynamic")
        .config("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
        .config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC -XX:TieredStopAtLevel=1")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


class Sql:
    """Synchronous SQL on a test store, to check end states the way an operator would."""

    def __init__(self, database_url: str) -> None:
        url = sa.engine.make_url(database_url)
        driver = "sqlite" if url.get_backend_name() == "sqlite" else "postgresql+psycopg"
        self._engine = sa.create_engine(url.set(drivername=driver), poolclass=sa.pool.NullPool)

    def rows(self, statement: str, **parameters: Any) -> list[tuple[Any, ...]]:
        with self._engine.connect() as connection:
            return [tuple(row) for row in connection.execute(sa.text(statement), parameters)]

    def value(self, statement: str, **parameters: Any) -> Any:
        return self.rows(statement, **parameters)[0][0]

    def totals_agree(self) -> bool:
        """Every queue's message count and bytes equal what it holds."""
        return not self.rows(
            "SELECT q.id FROM queues q WHERE q.message_count <> "
            "(SELECT count(*) FROM messages m WHERE m.queue_id = q.id) OR q.byte_count <> "
            "(SELECT coalesce(sum(m.body_size), 0) FROM messages m WHERE m.queue_id = q.id)"
        )

    @property
    def dialect(self) -> str:
        return self._engine.dialect.name

    def columns(self, table_or_view: str) -> list[tuple[str, str]]:
        """(name, type name) of each column, in order."""
        found = sa.inspect(self._engine).get_columns(table_or_view)
        return [(column["name"], type(column["type"]).__name__.upper()) for column in found]

    def close(self) -> None:
        self._engine.dispose()


@pytest.fixture
def sql(database_url: str) -> Iterator[Sql]:
    found = Sql(database_url)
    yield found
    found.close()
