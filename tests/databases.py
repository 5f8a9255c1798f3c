"""Per-test databases: SQLite files and PostgreSQL databases cloned from a migrated template.

Each test gets a database of its own, created from a template that was migrated once per
session, and dropped afterwards. PostgreSQL is the real server on 127.0.0.1:5432; when it
is down the tests that need it are skipped, except under CI=true, where they fail.
"""

from __future__ import annotations

import os
import shutil
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


class PostgresDatabases:
    """One migrated database per test session, emptied before each test (a TRUNCATE is about
    fifty times cheaper than creating a database), plus dedicated databases on request."""

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
        tables = ", ".join(f'"{table.name}"' for table in metadata.sorted_tables)
        with self._shared_engine.connect() as connection:
            connection.exec_driver_sql(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            )
            connection.exec_driver_sql(f"TRUNCATE {tables} RESTART IDENTITY CASCADE")
            connection.exec_driver_sql("ALTER SEQUENCE message_counter RESTART")

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
