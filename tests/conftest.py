"""Shared fixtures: a settable clock, and a migrated database per test on each store."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import hypothesis
import pytest

from qm.clock import SettableClock
from qm.config import ManagerConfig
from qm.cursors import CursorService
from qm.manager import QueueManager
from qm.reading import QueueReader
from qm.wakeups import WakeUps
from storage.engine import make_engine
from storage.store import SqlStore
from storage.wakeups import LocalWakeUps
from tests.browser import chromium  # noqa: F401  (the fixture, for every test)
from tests.databases import PostgresDatabases, SqliteDatabases, memory_backed_directory, postgres_available

STORES = ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]

# Property tests check results, not speed: a busy 2-core CI machine must not fail them for
# slow example generation or a slow example.
hypothesis.settings.register_profile(
    "msmq-gateway", deadline=None, suppress_health_check=[hypothesis.HealthCheck.too_slow]
)
hypothesis.settings.load_profile("msmq-gateway")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="session")
def sqlite_databases(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SqliteDatabases]:
    with memory_backed_directory() as directory:
        yield SqliteDatabases(directory or tmp_path_factory.mktemp("sqlite"))


@pytest.fixture(scope="session")
def postgres_databases() -> Iterator[PostgresDatabases]:
    if not postgres_available():
        if os.environ.get("CI") == "true":
            pytest.fail("PostgreSQL at 127.0.0.1:5432 is down; under CI=true that is a failure")
        pytest.skip("PostgreSQL at 127.0.0.1:5432 is down")
    databases = PostgresDatabases()
    yield databases
    databases.close()


@pytest.fixture(params=STORES)
def database_url(request: pytest.FixtureRequest, sqlite_databases: SqliteDatabases) -> Iterator[str]:
    """A freshly migrated, empty database of each kind, dropped after the test."""
    if request.param == "sqlite":
        with sqlite_databases.database() as url:
            yield url
    else:
        databases: PostgresDatabases = request.getfixturevalue("postgres_databases")
        with databases.database() as url:
            yield url


@pytest.fixture
def clock() -> SettableClock:
    return SettableClock()


@pytest.fixture
def manager_config() -> ManagerConfig:
    return ManagerConfig()


@pytest.fixture
def wakeups() -> WakeUps:
    return LocalWakeUps(poll_interval=0.5)


@pytest.fixture
async def manager(
    database_url: str, clock: SettableClock, manager_config: ManagerConfig, wakeups: WakeUps
) -> AsyncIterator[QueueManager]:
    store = SqlStore(make_engine(database_url))
    queue_manager = QueueManager(store, wakeups, clock, manager_config)
    await queue_manager.start()
    yield queue_manager
    await store.close()


@pytest.fixture
def reader(manager: QueueManager) -> QueueReader:
    return QueueReader(manager)


@pytest.fixture
def cursors(manager: QueueManager) -> CursorService:
    return CursorService(manager)


def repository_root() -> Path:
    return Path(__file__).resolve().parent.parent
