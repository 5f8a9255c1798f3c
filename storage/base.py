"""What every part of the store shares: transactions, counters, inserts and the queue totals."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import Counter, defaultdict
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from qm import rules
from qm.disposal import DisposalPolicy
from qm.errors import MqError, MqErrorCode
from qm.model import INFINITE, NewMessage
from qm.rules import COUNTER_MASK
from qm.wakeups import WakeUps
from storage import driver_sql, rows, statements
from storage.engine import BEGUN_ON_DRIVER, SYNCHRONOUS
from storage.tables import AVAILABLE, TXN_ENQUEUE, messages, queue_manager, queues, transactions

m = messages.c
q = queues.c


@dataclass(slots=True)
class QueueRoom:
    """A destination queue's bytes and quota during an enqueue transaction."""

    byte_count: int
    quota_kb: int


@dataclass(slots=True)
class MachineRoom:
    """The queue manager's limits and bytes during an enqueue transaction."""

    quota_kb: int
    throttled: bool
    byte_count: int


class StoreBase:
    """One database, one queue manager. Every public method of the store is one transaction."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._sqlite = engine.dialect.name == "sqlite"
        # SQLite has one writer; queueing writers here is cheaper than busy-waiting.
        self._write_lock = asyncio.Lock()
        self._guid: uuid.UUID | None = None
        self._policy: DisposalPolicy | None = None
        self._wakeups: WakeUps | None = None
        self._fence = CommitFence()
        self._expected: dict[int, int] = {}
        """Per queue ID, how many messages this process expects to be available there: what it
        made available, less what it received, and what it last counted (MessageStore.take
        counts before it claims where it expects none). A hint that saves work, never trusted
        for an answer."""
        self._none_left: set[int] = set()
        """Queues whose last plain receive here read from the database that it left no message
        available, with no message made available here since (may_have_more)."""

    def attach(self, policy: DisposalPolicy, wakeups: WakeUps) -> None:
        self._policy = policy
        self._wakeups = wakeups

    @property
    def policy(self) -> DisposalPolicy | None:
        return self._policy

    @asynccontextmanager
    async def _transaction(self, relaxed: bool = False) -> AsyncIterator[AsyncConnection]:
        """A write transaction; queues it changed for readers are signalled after the commit.

        `relaxed`: commit without waiting for the disk (express messages only; see
        docs/performance.md): PostgreSQL's synchronous_commit=off for this transaction,
        SQLite's synchronous=NORMAL (set before BEGIN, as SQLite requires)."""
        changed: Counter[int] = Counter()
        async with contextlib.AsyncExitStack() as stack:
            if self._sqlite:
                await stack.enter_async_context(self._write_lock)
            connection = await stack.enter_async_context(self.engine.connect())
            if self._sqlite:
                connection.info[BEGUN_ON_DRIVER] = True
                connection.info[SYNCHRONOUS] = "NORMAL" if relaxed else "FULL"
            await stack.enter_async_context(connection.begin())
            stack.callback(driver_sql.end, connection)
            await driver_sql.begin(connection)
            if relaxed and not self._sqlite:
                await driver_sql.execute_text(connection, "SET LOCAL synchronous_commit = off")
            connection.info["changed_queues"] = changed
            yield connection
        self._committed(changed)

    def _committed(self, changed: Counter[int]) -> None:
        """After a commit that made messages available (a queue ID per message): expect them,
        and wake one reader per message."""
        for queue_id, count in changed.items():
            self._expect(queue_id, self._expected.get(queue_id, 0) + count)
        self._none_left.difference_update(changed)
        if changed and self._wakeups is not None:
            self._wakeups.signal(changed.elements())

    @asynccontextmanager
    async def _reading(self) -> AsyncIterator[AsyncConnection]:
        """A connection for one read statement outside any transaction. On PostgreSQL in
        autocommit: the statement is its own transaction, which saves the BEGIN and ROLLBACK
        round trips (about 100 µs of CPU each read). Not for several statements that must
        see one snapshot."""
        async with self.engine.connect() as connection:
            if self._sqlite:
                yield connection
            else:
                yield await connection.execution_options(isolation_level="AUTOCOMMIT")

    def _expect(self, queue_id: int, count: int) -> None:
        if len(self._expected) >= MAX_EXPECTED and queue_id not in self._expected:
            self._expected.clear()  # a hint only: forgetting costs one count per queue
        self._expected[queue_id] = count

    def may_have_more(self, queue_id: int) -> bool:
        """False only where this process's last receive of the queue read from the database
        that it left nothing available then, and nothing was made available here since: any
        message that came later brings a wake-up of its own."""
        return queue_id not in self._none_left

    def _drained(self, queue_id: int, none_left: bool) -> None:
        if none_left and len(self._none_left) < MAX_EXPECTED:
            self._none_left.add(queue_id)
        else:
            self._none_left.discard(queue_id)

    @staticmethod
    def changed(connection: AsyncConnection, queue_ids: Iterable[int]) -> None:
        """Note queues that gained available messages (a queue ID per message), to wake their
        readers after the commit: one reader per message (qm.wakeups)."""
        connection.info.setdefault("changed_queues", Counter()).update(queue_ids)

    async def close(self) -> None:
        await self.engine.dispose()

    def _identity(self) -> uuid.UUID:
        if self._guid is None:
            raise RuntimeError("open_queue_manager() must run before messages are stored")
        return self._guid

    async def insert_messages(
        self,
        connection: AsyncConnection,
        batch: Sequence[NewMessage],
        counters: Sequence[int] | None = None,
        queues_held: bool = False,
    ) -> list[dict[str, Any]]:
        """Assign counters and lookup IDs, insert, and add to the queues' totals; return the rows.

        `counters`: taken already, ascending, at least one per message (`_room`); the first
        ones are used. `queues_held`: the transaction holds every target queue's row lock
        (`_room`), so the insert and the totals may be one statement on PostgreSQL."""
        if not batch:
            return []
        if counters is None:
            counters = await self._allocate_counters(connection, len(batch))
        values = []
        for item, counter in zip(batch, counters[: len(batch)], strict=True):
            lookup_id = rules.lookup_id_for(item.properties.priority, counter)
            message_id = item.message_id or rules.message_id_for(self._identity(), counter)
            values.append(rows.message_values(item, lookup_id, message_id))
        if self._sqlite or not (queues_held or len({value["queue_id"] for value in values}) == 1):
            await driver_sql.execute_many(connection, statements.INSERT_MESSAGES, values)
            await add_to_totals(connection, values, sign=1)
        elif len(values) <= statements.ROWS_AS_VALUES:
            merged = statements.insert_values_adding_to_totals(len(values), tuple(values[0]))
            await driver_sql.fetch(connection, merged, driver_sql.numbered(values))
        else:
            columns = {column: [value[column] for value in values] for column in values[0]}
            await driver_sql.fetch(connection, statements.INSERT_ARRAYS_ADDING_TO_TOTALS, columns)
        self.changed(connection, (value["queue_id"] for value in values if value["state"] == AVAILABLE))
        return values

    async def _allocate_counters(self, connection: AsyncConnection, count: int) -> list[int]:
        if self._sqlite:
            [top] = await driver_sql.scalars(connection, statements.RAISE_COUNTER, {"count": count})
            return list(range(top - count + 1, top + 1))
        return sorted(await driver_sql.scalars(connection, statements.NEXT_COUNTERS, {"count": count}))

    async def new_message_id(self) -> str:
        async with self._transaction() as connection:
            [counter] = await self._allocate_counters(connection, 1)
        return rules.message_id_for(self._identity(), counter)

    async def counter_high_water(self) -> int:
        """A settled counter (qm.store.Store): SQLite commits in counter order (one writer),
        PostgreSQL needs the commit fence; either way, not at or above a message that is
        still waiting for its transaction's commit."""
        async with self.engine.connect() as connection:
            if self._sqlite:
                settled = int((await connection.execute(sa.select(queue_manager.c.counter))).scalar_one())
            else:
                settled = await self._fence.settled(connection)
            pending = (await connection.execute(_PENDING_SENDS)).scalar()
        return settled if pending is None else min(settled, int(pending) - 1)

    async def arrived_since(self, queue_id: int, counter: int) -> frozenset[int]:
        values = statements.arrived_after_values(counter) | {"queue": queue_id}
        async with self._reading() as connection:
            return frozenset((await connection.execute(_ARRIVED_SINCE, values)).scalars())

    async def _room(
        self, connection: AsyncConnection, items: Sequence[NewMessage]
    ) -> tuple[dict[int, QueueRoom], MachineRoom, list[int] | None]:
        """Lock the destinations' rows in id order (no deadlocks); return what each holds, and
        the queue manager's quota and throttle as stored now (one statement) with its bytes
        when a quota is set. On PostgreSQL the same statement takes a counter per message,
        returned ascending (those of messages refused later stay unused: gaps are normal);
        SQLite's come with the insert (None).

        A message whose queue was deleted meanwhile (its ID gone, or reused by a newer queue
        under another name) fails the batch with MQ_ERROR_QUEUE_NOT_FOUND; the group commit
        then retries each request alone, so only the messages for that queue fail."""
        values: dict[str, Any] = {"queue_ids": sorted({item.queue_id for item in items})}
        if self._sqlite:
            statement = statements.QUEUE_ROOM
        else:
            statement, values["count"] = statements.QUEUE_ROOM_WITH_COUNTERS, len(items)
        found = {row["id"]: row for row in await driver_sql.fetch(connection, statement, values)}
        for item in items:  # every message: two in a batch may name one ID by different paths
            row = found.get(item.queue_id)
            if row is None or (item.queue_key is not None and row["path_key"] != item.queue_key):
                raise MqError(MqErrorCode.MQ_ERROR_QUEUE_NOT_FOUND, "the queue was deleted meanwhile")
        limits = next(iter(found.values()))
        byte_count = 0  # nothing to check against without a quota: skip the sum
        if limits["machine_quota_kb"] != INFINITE:
            byte_count = int((await connection.execute(statements.MACHINE_BYTES)).scalar() or 0)
        machine = MachineRoom(limits["machine_quota_kb"], bool(limits["throttled"]), byte_count)
        counters = None if self._sqlite else sorted(limits[statements.COUNTERS])
        totals = {row["id"]: QueueRoom(row["byte_count"], row["quota_kb"]) for row in found.values()}
        return totals, machine, counters

    @staticmethod
    async def _delete_rows(connection: AsyncConnection, leaving: Iterable[Mapping[Any, Any]]) -> None:
        ids = [row["lookup_id"] for row in leaving]
        if ids:
            await connection.execute(sa.delete(messages).where(m.lookup_id.in_(ids)))

    async def _hold_transactions(self, connection: AsyncConnection, transaction_ids: Iterable[str]) -> None:
        """Hold the MSMQ transactions' rows for the rest of this database transaction (FOR KEY
        SHARE on PostgreSQL; SQLite has one writer), or fail with MQ_ERROR_TRANSACTION_SEQUENCE
        if one has ended. The queue manager looks a transaction up before a receive or send in
        it, in a database transaction of its own; one committed, aborted or timed out between
        that look and the claim or insert left its message held by nobody, for ever (the
        stress: a message locked for a transaction with no row). Its end deletes its row
        first (TransactionStore._end_rows), so it now waits for this, and then sees the row."""
        wanted = sorted(set(transaction_ids))
        if not wanted:
            return
        statement = (
            sa.select(transactions.c.id).where(transactions.c.id.in_(wanted)).order_by(transactions.c.id)
        )
        if not self._sqlite:
            statement = statement.with_for_update(key_share=True)
        found = set((await connection.execute(statement)).scalars().all())
        for transaction_id in wanted:
            if transaction_id not in found:
                raise MqError(
                    MqErrorCode.MQ_ERROR_TRANSACTION_SEQUENCE,
                    f"no active transaction {transaction_id!r} (it ended or timed out)",
                )

    async def _unlock(self, connection: AsyncConnection, held: Sequence[Mapping[Any, Any]]) -> None:
        """End two-phase locks: the messages are available again at their places."""
        if held:
            await connection.execute(
                sa.update(messages)
                .where(m.lookup_id.in_([row["lookup_id"] for row in held]))
                .values(state=AVAILABLE, lock_tag=None, lock_expires_at=None)
            )
            self.changed(connection, (row["queue_id"] for row in held))


_ARRIVED_SINCE = sa.select(m.lookup_id).where(
    m.queue_id == sa.bindparam("queue", type_=sa.Integer),
    statements.arrived_after(),
    sa.or_(m.txn_op.is_(None), m.txn_op != TXN_ENQUEUE),
)

_PENDING_SENDS = sa.select(sa.func.min(m.lookup_id.op("&")(COUNTER_MASK))).where(
    m.transaction_id.is_not(None), m.txn_op == TXN_ENQUEUE
)
"""The lowest counter of a message sent in a transaction that is still open (via the
transaction_id index): it becomes available at that commit, under its old lookup ID."""

_LAST_COUNTER = sa.text("SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM message_counter")
_SNAPSHOT = sa.text(
    "SELECT CAST(pg_current_snapshot() AS text) AS taken,"
    " NOT EXISTS (SELECT FROM pg_snapshot_xip(pg_current_snapshot())) AS idle,"
    " (SELECT coalesce(bool_and(pg_visible_in_snapshot(x, pg_current_snapshot())), true)"
    "  FROM pg_snapshot_xip(CAST(CAST(:before AS text) AS pg_snapshot)) AS x) AS ended"
)


MAX_EXPECTED = 65536
"""Queues with an expected count (StoreBase._expected), at most."""

FIRST_SETTLE_TRIES = 100
FIRST_SETTLE_PAUSE_S = 0.01


class CommitFence:
    """PostgreSQL: the highest counter below which no transaction is still in flight.

    The sequence hands out counters before the commit, and transactions commit in any order
    (group-commit batches of two gateway processes, dead-letter and journal copies), so the
    last value handed out may belong to a transaction that commits later, and lower ones
    too. The fence: read the sequence's value V, then take a snapshot S. Every transaction
    that took a counter up to V had its transaction ID by then (`_allocate_counters`, `_room`), so
    it is finished or in S's in-progress list; once all of those have ended, V is settled.
    Nothing is written and senders never wait: a candidate (V, S) is kept until a later
    call sees its transactions ended (usually the next call, milliseconds later), then the
    next candidate is taken, so a steady stream of new transactions cannot starve it."""

    def __init__(self) -> None:
        self._settled = 0
        self._candidate: tuple[int, str] | None = None

    async def settled(self, connection: AsyncConnection) -> int:
        settled = await self._step(connection)
        for _ in range(FIRST_SETTLE_TRIES):  # the first value only: 0 would count every
            if self._settled or self._candidate is None:  # message as possibly new
                break
            await asyncio.sleep(FIRST_SETTLE_PAUSE_S)
            settled = await self._step(connection)
        return settled

    async def _step(self, connection: AsyncConnection) -> int:
        value = int((await connection.execute(_LAST_COUNTER)).scalar_one())
        candidate = self._candidate
        before = "1:1:" if candidate is None else candidate[1]
        row = (await connection.execute(_SNAPSHOT, {"before": before})).one()
        if candidate is not None and row.ended:
            self._settled = max(self._settled, candidate[0])
            if self._candidate == candidate:
                self._candidate = None
        if row.idle:
            self._settled = max(self._settled, value)
        elif self._candidate is None:
            self._candidate = (value, row.taken)
        return self._settled


async def add_to_totals(connection: AsyncConnection, changed: Iterable[Mapping[Any, Any]], sign: int) -> None:
    """Keep each queue's message count and bytes in step with inserts (+1) and deletes (-1);
    one statement, the queues in id order."""
    counts: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for row in changed:
        counts[row["queue_id"]][0] += 1
        counts[row["queue_id"]][1] += row["body_size"]
    totals = [
        {"queue": queue_id, "number": sign * counts[queue_id][0], "bytes": sign * counts[queue_id][1]}
        for queue_id in sorted(counts)
    ]
    if totals:
        await driver_sql.execute_many(connection, statements.ADD_TO_TOTALS, totals)
