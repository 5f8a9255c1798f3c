"""Several gateway processes started at once on a fresh PostgreSQL database (`serve --workers
2` the first time): each opens the queue manager, and whichever inserts its row first names it
for all. Orchestrated: the first looks, finds no row and pauses; the second opens it; the first
goes on. SQLite runs the look and the insert under one write lock, so nothing comes between."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from qm.model import QueueManagerInfo
from storage.engine import make_engine
from storage.store import SqlStore
from tests.contract.test_lock_order import _postgres_only, _within_limit, pause_after

pytestmark = pytest.mark.anyio


async def test_two_processes_opening_a_fresh_database_at_once_share_one_queue_manager(
    database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _postgres_only(database_url)
    first, second = SqlStore(make_engine(database_url)), SqlStore(make_engine(database_url))
    try:
        look = pause_after(monkeypatch, first.queues, "_manager_row")
        opening = asyncio.create_task(
            first.queues.open_queue_manager(QueueManagerInfo(uuid.uuid4(), 1000, False))
        )
        await _within_limit(look.reached.wait())  # no row yet
        opened_second = await second.queues.open_queue_manager(QueueManagerInfo(uuid.uuid4(), 1000, False))
        look.go_on.set()
        opened_first = await _within_limit(opening)
    finally:
        for store in (first, second):
            await store.close()
    assert opened_first.guid == opened_second.guid
