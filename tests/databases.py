"""Per-test databases: SQLite files and PostgreSQL databases cloned from a migrated template.

Each test gets a database of its own, created from a template that was migrated once per
session, and dropped afterwards. PostgreSQL is the real server on 127.0.0.1:5432; when it
is down the tests that need it are skipped, except under CI=true, where they fail.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import sqlalchemy as sa

from storage.migrate import upgrade
from storage.schema import metadata

POSTGRES_ADMIN_URL = os.environ.get(
    "MSMQ_GATEWAY_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)
_TEMPLATE = f"msmqgw_template_{os.getpid()}"


def postgres_available() -> bool:
    try:
        engine = _admin_engine()
        with engine.connect():
            pass
        engine.dispose()
        return True
    except sa.exc.OperationalError:
        return False
    except ModuleNotFoundError:
        return False


def _admin_engine() -> sa.Engine:
    url = sa.engine.make_url(POSTGRES_ADMIN_URL).set(drivername="postgresql+psycopg")
    return sa.create_engine(url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)


def async_url(database: str) -> str:
    url = sa.engine.make_url(POSTGRES_ADMIN_URL).set(drivername="postgresql+asyncpg", database=database)
    return url.render_as_string(hide_password=False)


LARGE_TABLE_ROWS = 1000
"""A table holding more rows than this is emptied by TRUNCATE, a smaller one by DELETE."""


class PostgresDatabases:
    """One migrated database per test session, emptied before each test, plus dedicated
    databases on request.

    Emptying takes about 10 ms: the tables a test filled are found in one query, the small
    ones emptied by DELETE in one transaction, and the sequences it used set back to their
    start. A TRUNCATE of every table took 100-150 ms (a new file for each of the 89 tables
    and indexes), more than creating the database from the template (about 60 ms). A table
    a test filled with thousands of rows is still truncated, so that no test scans the dead
    rows another left (or is planned by its statistics)."""

    def __init__(self) -> None:
        self._engine = _admin_engine()
        self._execute(f'DROP DATABASE IF EXISTS "{_TEMPLATE}" WITH (FORCE)')
        self._execute(f'CREATE DATABASE "{_TEMPLATE}"')
        upgrade(async_url(_TEMPLATE))
        self._shared = f"{_TEMPLATE}_shared"
        self._execute(f'DROP DATABASE IF EXISTS "{self._shared}" WITH (FORCE)')
        self._execute(f'CREATE DATABASE "{self._shared}" TEMPLATE "{_TEMPLATE}"')
        shared_url = sa.engine.make_url(POSTGRES_ADMIN_URL).set(
            drivername="postgresql+psycopg", database=self._shared
        )
        self._shared_engine = sa.create_engine(
            shared_url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool
        )

    def _execute(self, statement: str) -> None:
        with self._engine.connect() as connection:
            connection.exec_driver_sql(statement)

    @contextmanager
    def database(self) -> Iterator[str]:
        """The session's database, empty and migrated, with no other session connected."""
        self._reset_shared()
        yield async_url(self._shared)

    def _reset_shared(self) -> None:
        with self._shared_engine.connect() as connection:
            connection.exec_driver_sql(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            filled: dict[str, int] = {name: rows for name, rows in connection.exec_driver_sql(_FILLED_TABLES)}
            large = [name for name, rows in filled.items() if rows > LARGE_TABLE_ROWS]
            if large:
                connection.exec_driver_sql(f"TRUNCATE {', '.join(large)} CASCADE")
            # Children before parents, in one transaction (one statement string).
            small = [name for name in _CHILDREN_FIRST if 0 < filled[name] <= LARGE_TABLE_ROWS]
            if small:
                connection.exec_driver_sql("; ".join(f"DELETE FROM {name}" for name in small))
            connection.exec_driver_sql(_RESTART_USED_SEQUENCES)

    @contextmanager
    def dedicated_database(self) -> Iterator[str]:
        """A database of its own, for tests whose servers outlive one test."""
        name = f"msmqgw_test_{uuid.uuid4().hex[:12]}"
        self._execute(f'CREATE DATABASE "{name}" TEMPLATE "{_TEMPLATE}"')
        try:
            yield async_url(name)
        finally:
            self._execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def close(self) -> None:
        self._shared_engine.dispose()
        for name in (self._shared, _TEMPLATE):
            self._execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self._engine.dispose()


_CHILDREN_FIRST = [f'"{table.name}"' for table in reversed(metadata.sorted_tables)]
_FILLED_TABLES = " UNION ALL ".join(
    f"SELECT '{name}', (SELECT count(*) FROM (SELECT FROM {name} LIMIT {LARGE_TABLE_ROWS + 1}) AS t)"
    for name in _CHILDREN_FIRST
)
"""(quoted table name, its rows counted up to LARGE_TABLE_ROWS + 1) for every table."""
_RESTART_USED_SEQUENCES = (
    "SELECT setval(quote_ident(schemaname) || '.' || quote_ident(sequencename), start_value, false) "
    "FROM pg_sequences WHERE schemaname = 'public' AND last_value IS NOT NULL"
)
"""ALTER SEQUENCE ... RESTART (as TRUNCATE ... RESTART IDENTITY did) of the sequences used."""


MEMORY_DIRECTORY = Path("/dev/shm")
MEMORY_FREE_BYTES = 2 * 1024**3
"""The test databases go to tmpfs only while it has this much room."""


@contextmanager
def memory_backed_directory() -> Iterator[Path | None]:
    """A directory of its own on tmpfs (removed afterwards), or None where there is none with
    room. SQLite commits with PRAGMA synchronous=FULL, and an fsync on the disk of the 2-core
    machines took 0.6 ms: the SQLite tests ran about 40 % faster on tmpfs. What is checked
    is the same: no test cuts the power (the crash tests kill processes), and tmpfs keeps
    what a killed process wrote as a disk's page cache does."""
    try:
        roomy = shutil.disk_usage(MEMORY_DIRECTORY).free >= MEMORY_FREE_BYTES
    except OSError:
        roomy = False
    if not roomy:
        yield None
        return
    directory = Path(tempfile.mkdtemp(prefix="msmqgw-tests-", dir=MEMORY_DIRECTORY))
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


class SqliteDatabases:
    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._template = directory / "template.db"
        upgrade(sqlite_url(self._template))

    @contextmanager
    def database(self) -> Iterator[str]:
        path = self._directory / f"{uuid.uuid4().hex[:12]}.db"
        shutil.copyfile(self._template, path)
        try:
            yield sqlite_url(path)
        finally:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{path}{suffix}").unlink(missing_ok=True)

    dedicated_database = database
    """Every SQLite database is a file of its own already."""


def sqlite_url(path: Path) -> str:
    return f"sqlite+aiosqlite:///{path}"
