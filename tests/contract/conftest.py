"""Contract-suite fixtures, on top of tests/conftest.py: wake-ups a test can observe, and a
second queue manager on the same database."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from qm.clock import SettableClock
from qm.config import ManagerConfig
from qm.manager import QueueManager
from qm.wakeups import WakeUps
from storage.engine import make_engine
from storage.store import SqlStore
from storage.wakeups import LocalWakeUps
from tests.contract.support import WatchedWakeUps


@pytest.fixture
def wakeups() -> WakeUps:
    return WatchedWakeUps()


@pytest.fixture
def watched(manager: QueueManager) -> WatchedWakeUps:
    """The manager's wake-ups, to wait until a reader is blocked."""
    assert isinstance(manager.wakeups, WatchedWakeUps)
    return manager.wakeups


@pytest.fixture
async def other_process(database_url: str, clock: SettableClock) -> AsyncIterator[QueueManager]:
    """A second queue manager on the same database, as another gateway process would be."""
    store = SqlStore(make_engine(database_url))
    other = QueueManager(store, LocalWakeUps(poll_interval=0.5), clock, ManagerConfig())
    await other.start()
    yield other
    await store.close()
