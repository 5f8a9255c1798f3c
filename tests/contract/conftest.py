"""Contract-suite fixtures: wake-ups a test can observe, on top of tests/conftest.py."""

from __future__ import annotations

import pytest

from qm.manager import QueueManager
from qm.wakeups import WakeUps
from tests.contract.support import WatchedWakeUps


@pytest.fixture
def wakeups() -> WakeUps:
    return WatchedWakeUps()


@pytest.fixture
def watched(manager: QueueManager) -> WatchedWakeUps:
    """The manager's wake-ups, to wait until a reader is blocked."""
    assert isinstance(manager.wakeups, WatchedWakeUps)
    return manager.wakeups
