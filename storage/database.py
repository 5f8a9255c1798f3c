"""What every repository of the store shares, passed to each explicitly: the engine, the
dialect, SQLite's write lock, the queue manager's identity and rules, and the wake-ups a
commit sends. No repository reaches into another's state."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from qm.disposal import DisposalPolicy
from qm.wakeups import WakeUps
from storage import driver_sql
from storage.engine import BEGUN_ON_DRIVER, SYNCHRONOUS

CHANGED_QUEUES = "changed_queues"
"""Connection info key: the queues a transaction made messages available in (a queue ID per
message), signalled once it committed."""

DROPPED = "dropped_placements"
"""Connection info key: placements a transaction dropped, by (kind, reason), reported once it
committed (Database.on_dropped)."""

CommitListener = Callable[[Counter[int]], None]
DropListener = Callable[[str, str, int], None]
"""Told (placement kind, reason, how many) of what a committed transaction dropped."""


class Database:
    """One database, one queue manager."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self.sqlite = engine.dialect.name == "sqlite"
        # SQLite has one writer; queueing writers here is cheaper than busy-waiting.
        self.write_lock = asyncio.Lock()
        self.guid: uuid.UUID | None = None
        self.policy: DisposalPolicy | None = None
        self.wakeups: WakeUps | None = None
        self._listeners: list[CommitListener] = []
        self._drop_listeners: list[DropListener] = []

    def attach(self, policy: DisposalPolicy, wakeups: WakeUps) -> None:
        self.policy = policy
        self.wakeups = wakeups

    def on_commit(self, listener: CommitListener) -> None:
        """Call `listener` with the queues (a queue ID per message) each commit made messages
        available in, before their readers are woken."""
        self._listeners.append(listener)

    def on_dropped(self, listener: DropListener) -> None:
        """Call `listener` with what each commit dropped (Database.dropped)."""
        self._drop_listeners.append(listener)

    def identity(self) -> uuid.UUID:
        if self.guid is None:
            raise RuntimeError("open_queue_manager() must run before messages are stored")
        return self.guid

    @asynccontextmanager
    async def transaction(self, relaxed: bool = False) -> AsyncIterator[AsyncConnection]:
        """A write transaction; queues it changed for readers are signalled after the commit.

        `relaxed`: commit without waiting for the disk (express messages only; see
        docs/performance.md): PostgreSQL's synchronous_commit=off for this transaction,
        SQLite's synchronous=NORMAL (set before BEGIN, as SQLite requires)."""
        changed: Counter[int] = Counter()
        dropped: Counter[tuple[str, str]] = Counter()
        async with contextlib.AsyncExitStack() as stack:
            if self.sqlite:
                await stack.enter_async_context(self.write_lock)
            connection = await stack.enter_async_context(self.engine.connect())
            if self.sqlite:
                connection.info[BEGUN_ON_DRIVER] = True
                connection.info[SYNCHRONOUS] = "NORMAL" if relaxed else "FULL"
            await stack.enter_async_context(connection.begin())
            stack.callback(driver_sql.end, connection)
            await driver_sql.begin(connection)
            if relaxed and not self.sqlite:
                await driver_sql.execute_text(connection, "SET LOCAL synchronous_commit = off")
            connection.info[CHANGED_QUEUES] = changed
            connection.info[DROPPED] = dropped
            yield connection
        self.committed(changed)
        for (kind, reason), count in dropped.items():
            for listener in self._drop_listeners:
                listener(kind, reason, count)

    def committed(self, changed: Counter[int]) -> None:
        """After a commit that made messages available (a queue ID per message): tell the
        listeners, and wake one reader per message."""
        for listener in self._listeners:
            listener(changed)
        if changed and self.wakeups is not None:
            self.wakeups.signal(changed.elements())

    @asynccontextmanager
    async def reading(self) -> AsyncIterator[AsyncConnection]:
        """A connection for one read statement outside any transaction. On PostgreSQL in
        autocommit: the statement is its own transaction, which saves the BEGIN and ROLLBACK
        round trips (about 100 µs of CPU each read). Not for several statements that must
        see one snapshot."""
        async with self.engine.connect() as connection:
            if self.sqlite:
                yield connection
            else:
                yield await connection.execution_options(isolation_level="AUTOCOMMIT")

    @staticmethod
    def changed(connection: AsyncConnection, queue_ids: Iterable[int]) -> None:
        """Note queues that gained available messages (a queue ID per message), to wake their
        readers after the commit: one reader per message (qm.wakeups)."""
        connection.info.setdefault(CHANGED_QUEUES, Counter()).update(queue_ids)

    @staticmethod
    def dropped(connection: AsyncConnection, kind: str, reason: str) -> None:
        """Note a message the queue manager made and did not place, to count it once the
        transaction committed (a rolled-back one dropped nothing)."""
        connection.info.setdefault(DROPPED, Counter())[kind, reason] += 1

    async def close(self) -> None:
        await self.engine.dispose()
