"""Turns at a queue's row for this process's one-statement sends and receives (PostgreSQL).

ENQUEUE_PLAIN and TAKE_PLAIN_FIRST each lock their queue's row for the length of their own
statement, commit included. The receive never waits for that row (SKIP LOCKED: a statement
that commits by itself while it waited would take a message for a caller cancelled
meanwhile), so one that meets a send of its queue falls back to the four-round-trip
transaction, which then waits for the send anyway. In the latency benchmark that was more
than half of all receives. Taking turns here, before either statement is sent, makes the
receive wait where waiting is safe (in this process, before anything is taken) for the
send to commit, and then run as the one statement. The two would have run one after the
other in the database all the same; statements of different queues still overlap.
Transactions and other processes are not covered: a receive that meets them falls back
as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager


class QueueTurns:
    """One asyncio lock per queue with a statement under way or waiting; forgotten when idle."""

    def __init__(self) -> None:
        self._locks: dict[int, asyncio.Lock] = {}
        self._callers: dict[int, int] = {}

    @asynccontextmanager
    async def turn(self, queue_id: int) -> AsyncIterator[None]:
        """Wait for the queue's statements of this process begun earlier (first come, first
        served), then hold the turn for the block."""
        lock = self._locks.get(queue_id)
        if lock is None:
            lock = self._locks[queue_id] = asyncio.Lock()
        self._callers[queue_id] = self._callers.get(queue_id, 0) + 1
        try:
            async with lock:
                yield
        finally:
            left = self._callers[queue_id] - 1
            if left:
                self._callers[queue_id] = left
            else:
                del self._callers[queue_id], self._locks[queue_id]

    def callers(self, queue_id: int) -> int:
        """How many statements of this queue hold or wait for their turn."""
        return self._callers.get(queue_id, 0)
