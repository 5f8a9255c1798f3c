"""The store as the pipeline sees it: one ADBC connection, the export view, its own ledgers.

The gateway's SQLAlchemy URLs are accepted as they are (`sqlite+aiosqlite:///path`,
`postgresql+asyncpg://user@host/db`); the driver part is dropped. ADBC streams the view
into Arrow with no JDBC driver and no JVM, which the probe measured as the fastest way
off the database on one machine.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.errors import PipelineError
from pipeline.schemas import EXPORT_VIEW, NULLABLE_BYTES_OR_TEXT, export_arrow_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

DEFAULT_STORE_URL = "sqlite+aiosqlite:///./var/msmq-gateway.db"
STORE_URL_VARIABLE = "MSMQGW_DATABASE_URL"
SQLITE_BUSY_TIMEOUT_MS = 30_000
_PLACEHOLDER = re.compile(r"\?")


@dataclass(frozen=True, slots=True)
class StoreUrl:
    """Where the store is: a SQLite file or a PostgreSQL database (libpq URI)."""

    sqlite_path: Path | None
    postgres_uri: str | None

    @property
    def is_sqlite(self) -> bool:
        return self.sqlite_path is not None

    def display(self) -> str:
        if self.sqlite_path is not None:
            return f"sqlite:///{self.sqlite_path}"
        parts = urlsplit(self.postgres_uri or "")
        host = parts.hostname or ""
        user = f"{parts.username}@" if parts.username else ""
        port = f":{parts.port}" if parts.port else ""
        return urlunsplit((parts.scheme, f"{user}{host}{port}", parts.path, "", ""))

    @property
    def jdbc_url(self) -> str:
        """For the cluster extract: `jdbc:postgresql://host:port/db` (credentials go in options)."""
        if self.postgres_uri is None:
            raise PipelineError("the JDBC extract reads PostgreSQL only: SQLite is local-mode only")
        parts = urlsplit(self.postgres_uri)
        return f"jdbc:postgresql://{parts.hostname}:{parts.port or 5432}{parts.path}"

    @property
    def postgres_user(self) -> str:
        return urlsplit(self.postgres_uri or "").username or ""


def store_url(text: str | None) -> StoreUrl:
    """Parse `--store` (or $MSMQGW_DATABASE_URL, or the gateway's default SQLite file)."""
    raw = text or os.environ.get(STORE_URL_VARIABLE) or DEFAULT_STORE_URL
    scheme, separator, rest = raw.partition("://")
    backend = scheme.split("+", 1)[0]
    if not separator or backend not in ("sqlite", "postgresql", "postgres"):
        raise PipelineError(f"unsupported store URL {raw!r}: use sqlite:///path or postgresql://host/db")
    if backend == "sqlite":
        path = rest[1:] if rest.startswith("/") else rest
        if not path or path == ":memory:":
            raise PipelineError("the SQLite store must be a file")
        return StoreUrl(Path(path), None)
    return StoreUrl(None, f"postgresql://{rest}")


class Store:
    """An open ADBC connection (autocommit off): every write is an explicit transaction."""

    def __init__(self, url: StoreUrl) -> None:
        self.url = url
        self._connection = _connect(url)

    def close(self) -> None:
        self._connection.close()

    def execute(self, sql: str, parameters: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run one statement (`?` placeholders) and return its rows, if any."""
        with self._cursor() as cursor:
            cursor.execute(self._native(sql), list(parameters) if parameters else None)
            if cursor.description is None:
                return []
            return [tuple(row) for row in cursor.fetchall()]

    def ingest(self, table: str, data: pa.Table) -> None:
        """Append Arrow rows to one of the pipeline's own tables (within the transaction)."""
        if data.num_rows:
            with self._cursor() as cursor:
                cursor.adbc_ingest(table, data, mode="append")

    def commit(self) -> None:
        self._connection.commit()

    def rollback(self) -> None:
        self._connection.rollback()

    @contextmanager
    def transaction(self) -> Iterator[Store]:
        """Commit on success; roll back on any exception (an injected crash included)."""
        try:
            yield self
        except BaseException:
            self.rollback()
            raise
        self.commit()

    def export_to_parquet(
        self,
        where: str,
        parameters: Sequence[Any],
        target: Path,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """Stream `SELECT * FROM <export view> WHERE <where>` into one Parquet file; count rows
        (told to `progress` after each batch)."""
        schema = export_arrow_schema()
        target.parent.mkdir(parents=True, exist_ok=True)
        rows = 0
        with self._cursor() as cursor, pq.ParquetWriter(target, schema) as writer:
            cursor.execute(self._native(self._export_query(where)), list(parameters) or None)
            for batch in cursor.fetch_record_batch():
                table = _restore_nulls(pa.Table.from_batches([batch])).cast(schema)
                writer.write_table(table)
                rows += table.num_rows
                if progress is not None:
                    progress(rows)
        self.commit()  # ends the read snapshot (PostgreSQL) and releases the shared lock (SQLite)
        return rows

    def _export_query(self, where: str) -> str:
        if not self.url.is_sqlite:
            return f"SELECT * FROM {EXPORT_VIEW} WHERE {where} ORDER BY lookup_id"
        # ADBC's SQLite driver infers a column's type from its first rows: a column that
        # starts with NULLs would be typed int64 and fail later. Select such columns with a
        # NULL flag and an empty default instead, and put the NULLs back in Arrow.
        columns = [
            f"COALESCE({name}, {empty}) AS {name}, {name} IS NULL AS {name}__null"
            if (empty := NULLABLE_BYTES_OR_TEXT.get(name))
            else name
            for name in export_arrow_schema().names
        ]
        return f"SELECT {', '.join(columns)} FROM {EXPORT_VIEW} WHERE {where} ORDER BY lookup_id"

    def _native(self, sql: str) -> str:
        if self.url.is_sqlite:
            return sql
        numbers = iter(range(1, 10_000))
        return _PLACEHOLDER.sub(lambda _match: f"${next(numbers)}", sql)

    @contextmanager
    def _cursor(self) -> Iterator[Any]:
        cursor = self._connection.cursor()
        try:
            yield cursor
        finally:
            cursor.close()


def _connect(url: StoreUrl) -> Any:
    """Connect and touch the export view, so a missing or old store fails before any work."""
    try:
        if url.sqlite_path is not None:
            if not url.sqlite_path.is_file():
                raise PipelineError(f"no SQLite store at {url.sqlite_path}")
            import adbc_driver_sqlite.dbapi as sqlite_dbapi

            connection = sqlite_dbapi.connect(str(url.sqlite_path))
            cursor = connection.cursor()
            cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
            cursor.close()
        else:
            import adbc_driver_postgresql.dbapi as postgres_dbapi

            connection = postgres_dbapi.connect(url.postgres_uri)
        cursor = connection.cursor()
        cursor.execute(f"SELECT count(*) FROM {EXPORT_VIEW} WHERE 1 = 0")
        cursor.fetchall()
        cursor.close()
        connection.commit()
        return connection
    except PipelineError:
        raise
    except Exception as error:
        raise PipelineError(
            f"cannot use the store {url.display()} (is it reachable and migrated?): {error}"
        ) from error


def _restore_nulls(table: pa.Table) -> pa.Table:
    """Undo the SQLite NULL flags of `_export_query` (no-op for PostgreSQL's typed result)."""
    import pyarrow.compute as pc

    for name in NULLABLE_BYTES_OR_TEXT:
        flag = f"{name}__null"
        if flag not in table.column_names:
            continue
        values = table[name]
        nulls = pc.not_equal(table[flag], 0)
        restored = pc.if_else(nulls, pa.scalar(None, values.type), values)
        table = table.set_column(table.schema.get_field_index(name), name, restored).drop_columns([flag])
    return table


def read_view_jdbc(store: Store, spark: SparkSession, where: str, partitions: int) -> DataFrame:
    """The cluster extract: Spark's JDBC source on PostgreSQL, `partitions` lookup-ID ranges
    read in parallel by the executors (the driver jar comes from `--jars` or `--packages`)."""
    from pyspark.sql import functions as F

    from pipeline.schemas import export_spark_schema, typed

    bounds = store.execute(f"SELECT min(lookup_id), max(lookup_id) FROM {EXPORT_VIEW} WHERE {where}")
    store.commit()
    low, high = bounds[0] if bounds and bounds[0][0] is not None else (0, 0)
    frame = (
        spark.read.format("jdbc")
        .option("url", store.url.jdbc_url)
        .option("user", store.url.postgres_user)
        .option("driver", "org.postgresql.Driver")
        .option("dbtable", f"(SELECT * FROM {EXPORT_VIEW} WHERE {where}) AS export")
        .option("partitionColumn", "lookup_id")
        .option("lowerBound", int(low))
        .option("upperBound", int(high) + 1)
        .option("numPartitions", partitions)
        .option("fetchsize", 10_000)
        .load()
    )
    schema = export_spark_schema()
    return typed(frame.select(*[F.col(field.name).cast(field.dataType) for field in schema.fields]))
