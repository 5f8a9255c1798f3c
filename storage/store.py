"""SqlStore: the queue manager's store port on SQLAlchemy Core (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Iterable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from qm import rules
from qm.errors import MqError, MqErrorCode
from qm.model import (
    INFINITE,
    Message,
    NewMessage,
    Queue,
    QueueChanges,
    QueueManagerInfo,
    QueueSettings,
)
from qm.paths import QueuePath
from qm.store import (
    Claim,
    ClaimKind,
    CursorRecord,
    EnqueueOutcome,
    EnqueueResult,
    PositionState,
    ReleaseReport,
    Selector,
    TransactionRecord,
)
from storage import rows, statements
from storage.removal import Removal
from storage.tables import (
    AVAILABLE,
    LOCKED,
    TXN_DEQUEUE,
    TXN_ENQUEUE,
    cursors,
    message_counter,
    messages,
    queue_manager,
    queues,
    transactions,
)

m = messages.c
q = queues.c
_MANAGER_ROW = 1


class SqlStore:
    """One database, one queue manager. Every public method is one transaction."""

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine
        self._sqlite = engine.dialect.name == "sqlite"
        # SQLite has one writer; queueing writers here is cheaper than busy-waiting.
        self._write_lock = asyncio.Lock()
        self._guid: uuid.UUID | None = None

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[AsyncConnection]:
        if self._sqlite:
            async with self._write_lock, self.engine.begin() as connection:
                yield connection
        else:
            async with self.engine.begin() as connection:
                yield connection

    async def close(self) -> None:
        await self.engine.dispose()

    # -- queue manager ----------------------------------------------------------------

    async def open_queue_manager(self, candidate: QueueManagerInfo) -> QueueManagerInfo:
        async with self._transaction() as connection:
            row = await self._manager_row(connection)
            if row is None:
                await connection.execute(
                    sa.insert(queue_manager)
                    .prefix_with("OR IGNORE", dialect="sqlite")
                    .values(
                        id=_MANAGER_ROW,
                        guid=str(candidate.guid),
                        quota_kb=candidate.quota_kb,
                        throttled=candidate.throttled,
                        counter=0,
                        created_at=rows.to_us(datetime.now().astimezone()),
                    )
                )
                row = await self._manager_row(connection)
            assert row is not None
            info = rows.manager_from_row(row)
        self._guid = info.guid
        return info

    async def queue_manager_info(self) -> QueueManagerInfo:
        async with self.engine.connect() as connection:
            row = await self._manager_row(connection)
            totals = (
                (
                    await connection.execute(
                        sa.select(
                            sa.func.sum(q.message_count).label("message_count"),
                            sa.func.sum(q.byte_count).label("byte_count"),
                        )
                    )
                )
                .mappings()
                .one()
            )
        if row is None:
            raise MqError(MqErrorCode.MQ_ERROR_SERVICE_NOT_AVAILABLE, "the store is not initialised")
        return rows.manager_from_row(row, totals)

    async def update_queue_manager(self, quota_kb: int | None, throttled: bool | None) -> QueueManagerInfo:
        values: dict[str, Any] = {}
        if quota_kb is not None:
            values["quota_kb"] = quota_kb
        if throttled is not None:
            values["throttled"] = throttled
        if values:
            async with self._transaction() as connection:
                await connection.execute(sa.update(queue_manager).values(**values))
        return await self.queue_manager_info()

    @staticmethod
    async def _manager_row(connection: AsyncConnection) -> sa.RowMapping | None:
        result = await connection.execute(sa.select(queue_manager).where(queue_manager.c.id == _MANAGER_ROW))
        return result.mappings().first()

    # -- queues -----------------------------------------------------------------------

    async def create_queue(self, path: QueuePath, settings: QueueSettings, now: datetime) -> Queue:
        try:
            async with self._transaction() as connection:
                values = rows.queue_values(path, settings, now)
                queue_id = (
                    await connection.execute(sa.insert(queues).values(values).returning(q.id))
                ).scalar_one()
                journal_id = None
                if path.writable:
                    journal_id = await self._create_journal(connection, queue_id, path, settings, now)
        except sa.exc.IntegrityError:
            raise MqError(MqErrorCode.MQ_ERROR_QUEUE_EXISTS, f"{path.url_path} already exists") from None
        created = await self.get_queue(queue_id)
        assert created is not None and (journal_id is None or created.journal_queue_id == journal_id)
        return created

    @staticmethod
    async def _create_journal(
        connection: AsyncConnection, queue_id: int, path: QueuePath, settings: QueueSettings, now: datetime
    ) -> int:
        journal_path = QueuePath(path.kind, path.name, journal=True)
        journal_settings = QueueSettings(quota_kb=settings.journal_quota_kb)
        values = rows.queue_values(journal_path, journal_settings, now) | {"journal_of": queue_id}
        return int((await connection.execute(sa.insert(queues).values(values).returning(q.id))).scalar_one())

    async def find_queue(self, path: QueuePath) -> Queue | None:
        return await self._one_queue(q.path_key == path.key)

    async def get_queue(self, queue_id: int) -> Queue | None:
        return await self._one_queue(q.id == queue_id)

    async def _one_queue(self, condition: sa.ColumnElement[bool]) -> Queue | None:
        journal = queues.alias("journal_queue")
        statement = (
            sa.select(queues, journal.c.id.label("journal_queue_id"))
            .outerjoin(journal, journal.c.journal_of == q.id)
            .where(condition)
        )
        async with self.engine.connect() as connection:
            row = (await connection.execute(statement)).mappings().first()
        return None if row is None else rows.queue_from_row(row, row["journal_queue_id"])

    async def list_queues(self) -> list[Queue]:
        journal = queues.alias("journal_queue")
        statement = (
            sa.select(queues, journal.c.id.label("journal_queue_id"))
            .outerjoin(journal, journal.c.journal_of == q.id)
            .order_by(q.path_key)
        )
        async with self.engine.connect() as connection:
            found = (await connection.execute(statement)).mappings().all()
        return [rows.queue_from_row(row, row["journal_queue_id"]) for row in found]

    async def update_queue(self, queue_id: int, changes: QueueChanges, now: datetime) -> Queue:
        values = {name: value for name, value in _changed(changes).items()}
        async with self._transaction() as connection:
            await connection.execute(
                sa.update(queues).where(q.id == queue_id).values(**values, modified_at=rows.to_us(now))
            )
            if changes.journal_quota_kb is not None:
                await connection.execute(
                    sa.update(queues)
                    .where(q.journal_of == queue_id)
                    .values(quota_kb=changes.journal_quota_kb, modified_at=rows.to_us(now))
                )
        updated = await self.get_queue(queue_id)
        if updated is None:
            raise MqError(MqErrorCode.MQ_ERROR_QUEUE_NOT_FOUND, "the queue was deleted meanwhile")
        return updated

    async def delete_queue(self, queue_id: int) -> int:
        async with self._transaction() as connection:
            family = sa.select(q.id).where(sa.or_(q.id == queue_id, q.journal_of == queue_id))
            dropped = await connection.execute(sa.delete(messages).where(m.queue_id.in_(family)))
            await connection.execute(sa.delete(cursors).where(cursors.c.queue_id.in_(family)))
            await connection.execute(sa.delete(queues).where(q.journal_of == queue_id))
            await connection.execute(sa.delete(queues).where(q.id == queue_id))
        return int(dropped.rowcount)

    async def purge_queue(self, queue_id: int) -> int:
        # Message rows first and the queue's totals last, as every other removal does:
        # locking the queue row first deadlocked with a receive holding a message row.
        available = sa.and_(m.queue_id == queue_id, m.state == AVAILABLE)
        async with self._transaction() as connection:
            if self._sqlite:  # one writer: the rows counted are the rows deleted
                totals = _count_and_size(m.body_size, available)
                number, size = (await connection.execute(totals)).one()
                await connection.execute(sa.delete(messages).where(available))
            else:
                gone = sa.delete(messages).where(available).returning(m.body_size).cte("gone")
                number, size = (await connection.execute(_count_and_size(gone.c.body_size))).one()
            locked = sa.and_(m.queue_id == queue_id, m.state == LOCKED)
            await connection.execute(sa.update(messages).where(locked).values(purge_pending=True))
            await connection.execute(
                sa.update(queues)
                .where(q.id == queue_id)
                .values(message_count=q.message_count - number, byte_count=q.byte_count - size)
            )
        return int(number)

    # -- enqueue ----------------------------------------------------------------------

    async def enqueue(
        self, batch: Sequence[NewMessage], quota_kb: int, throttled: bool
    ) -> list[EnqueueResult]:
        async with self._transaction() as connection:
            totals = await self._lock_queues(connection, sorted({item.queue_id for item in batch}))
            machine_bytes = await self._machine_bytes(connection, quota_kb)
            outcomes = []
            for item in batch:
                size = rules.stored_size(item.properties)
                queue_bytes, queue_quota = totals[item.queue_id]
                outcome = rules.admit(size, queue_bytes, queue_quota, machine_bytes, quota_kb, throttled)
                if outcome is EnqueueOutcome.ACCEPTED:
                    totals[item.queue_id] = (queue_bytes + size, queue_quota)
                    machine_bytes += size
                outcomes.append(outcome)
            accepted = [
                item
                for item, outcome in zip(batch, outcomes, strict=True)
                if outcome is EnqueueOutcome.ACCEPTED
            ]
            placed = await self.insert_messages(connection, accepted)
        placed_iter = iter(placed)
        return [
            next(placed_iter) if outcome is EnqueueOutcome.ACCEPTED else EnqueueResult(outcome)
            for outcome in outcomes
        ]

    async def insert_messages(
        self, connection: AsyncConnection, batch: Sequence[NewMessage]
    ) -> list[EnqueueResult]:
        """Assign counters and lookup IDs, insert, and add to the queues' totals."""
        if not batch:
            return []
        counters = await self._allocate_counters(connection, len(batch))
        results, values = [], []
        for item, counter in zip(batch, counters, strict=True):
            lookup_id = rules.lookup_id_for(item.properties.priority, counter)
            message_id = item.message_id or rules.message_id_for(self._identity(), counter)
            values.append(rows.message_values(item, lookup_id, message_id))
            results.append(EnqueueResult(EnqueueOutcome.ACCEPTED, lookup_id, message_id))
        await connection.execute(sa.insert(messages), values)
        await Removal.add_to_totals(connection, values, sign=1)
        return results

    def _identity(self) -> uuid.UUID:
        if self._guid is None:
            raise RuntimeError("open_queue_manager() must run before messages are stored")
        return self._guid

    async def _allocate_counters(self, connection: AsyncConnection, count: int) -> list[int]:
        if self._sqlite:
            top = (
                await connection.execute(
                    sa.update(queue_manager)
                    .values(counter=queue_manager.c.counter + count)
                    .returning(queue_manager.c.counter)
                )
            ).scalar_one()
            return list(range(top - count + 1, top + 1))
        series = sa.select(message_counter.next_value()).select_from(sa.func.generate_series(1, count))
        return sorted((await connection.execute(series)).scalars().all())

    async def counter_high_water(self) -> int:
        statement: sa.Executable
        if self._sqlite:
            statement = sa.select(queue_manager.c.counter)
        else:
            statement = sa.text("SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM message_counter")
        async with self.engine.connect() as connection:
            return int((await connection.execute(statement)).scalar_one())

    async def _lock_queues(
        self, connection: AsyncConnection, queue_ids: Sequence[int]
    ) -> dict[int, tuple[int, int]]:
        """Lock the queues' rows in id order (no deadlocks); return bytes and quota of each."""
        statement = sa.select(q.id, q.byte_count, q.quota_kb).where(q.id.in_(queue_ids)).order_by(q.id)
        if not self._sqlite:
            statement = statement.with_for_update()
        found = {row.id: (row.byte_count, row.quota_kb) for row in await connection.execute(statement)}
        missing = set(queue_ids) - found.keys()
        if missing:
            raise MqError(MqErrorCode.MQ_ERROR_QUEUE_NOT_FOUND, "the queue was deleted meanwhile")
        return found

    @staticmethod
    async def _machine_bytes(connection: AsyncConnection, quota_kb: int) -> int:
        if quota_kb == INFINITE:
            return 0  # nothing to check against: skip the sum
        total = (await connection.execute(sa.select(sa.func.sum(q.byte_count)))).scalar()
        return int(total or 0)

    # -- reading ----------------------------------------------------------------------

    async def peek(self, queue_id: int, selector: Selector, now: datetime) -> Message | None:
        target = statements.select_target(queue_id, selector, rows.to_us(now), lock_rows=False)
        async with self.engine.connect() as connection:
            row = (
                (await connection.execute(sa.select(messages).where(m.lookup_id == target.scalar_subquery())))
                .mappings()
                .first()
            )
        return None if row is None else rows.message_from_row(row)

    async def browse(self, queue_id: int, after: int, limit: int, now: datetime) -> list[Message]:
        statement = (
            sa.select(messages)
            .where(statements.available_in(queue_id, rows.to_us(now)), m.lookup_id > after)
            .order_by(m.lookup_id)
            .limit(limit)
        )
        async with self.engine.connect() as connection:
            found = (await connection.execute(statement)).mappings().all()
        return [rows.message_from_row(row) for row in found]

    async def take(self, queue: Queue, selector: Selector, now: datetime, claim: Claim) -> Message | None:
        now_us = rows.to_us(now)
        target = statements.select_target(
            queue.id, selector, now_us, lock_rows=not self._sqlite
        ).scalar_subquery()
        async with self._transaction() as connection:
            if claim.kind is ClaimKind.RECEIVE:
                row = (
                    (
                        await connection.execute(
                            sa.delete(messages).where(m.lookup_id == target).returning(*messages.c)
                        )
                    )
                    .mappings()
                    .first()
                )
                if row is not None:
                    await Removal(self, connection).removed([row])
            else:
                row = (
                    (
                        await connection.execute(
                            sa.update(messages)
                            .where(m.lookup_id == target)
                            .values(**_hold(claim))
                            .returning(*messages.c)
                        )
                    )
                    .mappings()
                    .first()
                )
        return None if row is None else rows.message_from_row(row)

    async def position_state(self, queue_id: int, lookup_id: int, now: datetime) -> PositionState:
        statement = sa.select(m.state, m.ttbr_deadline).where(
            m.lookup_id == lookup_id, m.queue_id == queue_id
        )
        async with self.engine.connect() as connection:
            row = (await connection.execute(statement)).first()
        if row is None:
            return PositionState.MISSING
        if row.state == LOCKED:
            return PositionState.LOCKED
        if row.ttbr_deadline is not None and row.ttbr_deadline <= rows.to_us(now):
            return PositionState.EXPIRED
        return PositionState.AVAILABLE

    async def end_lock(
        self, lookup_id: int, tag: str, commit: bool, now: datetime
    ) -> tuple[PositionState, int]:
        async with self._transaction() as connection:
            statement = sa.select(messages).where(m.lookup_id == lookup_id)
            if not self._sqlite:
                statement = statement.with_for_update()
            row = (await connection.execute(statement)).mappings().first()
            if row is None:
                return PositionState.MISSING, 0
            if row["lock_tag"] != tag:
                return PositionState.AVAILABLE, row["queue_id"]
            if row["lock_expires_at"] <= rows.to_us(now):
                await self._unlock(connection, [lookup_id])
                return PositionState.EXPIRED, row["queue_id"]
            if commit or row["purge_pending"]:
                await connection.execute(sa.delete(messages).where(m.lookup_id == lookup_id))
                await Removal(self, connection).removed([row], journal=commit)
            else:
                await self._unlock(connection, [lookup_id])
            return PositionState.LOCKED, row["queue_id"]

    @staticmethod
    async def _unlock(connection: AsyncConnection, lookup_ids: Sequence[int]) -> None:
        await connection.execute(
            sa.update(messages)
            .where(m.lookup_id.in_(lookup_ids))
            .values(state=AVAILABLE, lock_tag=None, lock_expires_at=None)
        )

    # -- transactions -----------------------------------------------------------------

    async def create_transaction(self, record: TransactionRecord) -> None:
        async with self._transaction() as connection:
            await connection.execute(
                sa.insert(transactions).values(
                    id=record.id,
                    created_at=rows.to_us(record.created_at),
                    expires_at=rows.to_us(record.expires_at),
                )
            )

    async def get_transaction(self, transaction_id: str) -> TransactionRecord | None:
        async with self.engine.connect() as connection:
            row = (
                (await connection.execute(sa.select(transactions).where(transactions.c.id == transaction_id)))
                .mappings()
                .first()
            )
        return None if row is None else rows.transaction_from_row(row)

    async def touch_transaction(self, transaction_id: str, expires_at: datetime) -> bool:
        async with self._transaction() as connection:
            result = await connection.execute(
                sa.update(transactions)
                .where(transactions.c.id == transaction_id)
                .values(expires_at=rows.to_us(expires_at))
            )
        return bool(result.rowcount)

    async def finish_transaction(self, transaction_id: str, commit: bool) -> frozenset[int] | None:
        async with self._transaction() as connection:
            return await self._finish(connection, transaction_id, commit)

    async def _finish(
        self, connection: AsyncConnection, transaction_id: str, commit: bool
    ) -> frozenset[int] | None:
        gone = await connection.execute(sa.delete(transactions).where(transactions.c.id == transaction_id))
        if not gone.rowcount:
            return None
        held = (
            (await connection.execute(sa.select(messages).where(m.transaction_id == transaction_id)))
            .mappings()
            .all()
        )
        removal = Removal(self, connection)
        if commit:
            await self._commit_rows(connection, held, removal)
        else:
            await self._abort_rows(connection, held, removal)
        return frozenset(row["queue_id"] for row in held)

    async def _commit_rows(
        self, connection: AsyncConnection, held: Sequence[sa.RowMapping], removal: Removal
    ) -> None:
        """Received messages leave (journaled); sent ones become available, first/last marked."""
        leaving = [row for row in held if row["txn_op"] == TXN_DEQUEUE or row["purge_pending"]]
        staying = sorted(row["lookup_id"] for row in held if row not in leaving)
        await self._delete_rows(connection, leaving)
        await removal.removed([row for row in leaving if row["txn_op"] == TXN_DEQUEUE], journal=True)
        await removal.removed([row for row in leaving if row["txn_op"] != TXN_DEQUEUE], journal=False)
        if staying:
            await connection.execute(
                sa.update(messages)
                .where(m.lookup_id.in_(staying))
                .values(
                    state=AVAILABLE,
                    transaction_id=None,
                    txn_op=None,
                    first_in_xact=m.lookup_id == staying[0],
                    last_in_xact=m.lookup_id == staying[-1],
                )
            )

    async def _abort_rows(
        self, connection: AsyncConnection, held: Sequence[sa.RowMapping], removal: Removal
    ) -> None:
        """Sent messages vanish; received ones return to their place, abort count + 1."""
        leaving = [row for row in held if row["txn_op"] == TXN_ENQUEUE or row["purge_pending"]]
        returning = [row["lookup_id"] for row in held if row not in leaving]
        await self._delete_rows(connection, leaving)
        await removal.removed(leaving, journal=False)
        if returning:
            await connection.execute(
                sa.update(messages)
                .where(m.lookup_id.in_(returning))
                .values(state=AVAILABLE, transaction_id=None, txn_op=None, abort_count=m.abort_count + 1)
            )

    @staticmethod
    async def _delete_rows(connection: AsyncConnection, leaving: Iterable[sa.RowMapping]) -> None:
        ids = [row["lookup_id"] for row in leaving]
        if ids:
            await connection.execute(sa.delete(messages).where(m.lookup_id.in_(ids)))

    # -- cursors ----------------------------------------------------------------------

    async def create_cursor(self, record: CursorRecord) -> None:
        async with self._transaction() as connection:
            await connection.execute(sa.insert(cursors).values(rows.cursor_values(record)))

    async def get_cursor(self, cursor_id: str) -> CursorRecord | None:
        async with self.engine.connect() as connection:
            row = (
                (await connection.execute(sa.select(cursors).where(cursors.c.id == cursor_id)))
                .mappings()
                .first()
            )
        return None if row is None else rows.cursor_from_row(row)

    async def save_cursor(self, record: CursorRecord) -> None:
        async with self._transaction() as connection:
            await connection.execute(
                sa.update(cursors).where(cursors.c.id == record.id).values(rows.cursor_values(record))
            )

    async def delete_cursor(self, cursor_id: str) -> bool:
        async with self._transaction() as connection:
            result = await connection.execute(sa.delete(cursors).where(cursors.c.id == cursor_id))
        return bool(result.rowcount)

    # -- housekeeping -----------------------------------------------------------------

    async def release_expired(self, now: datetime) -> ReleaseReport:
        now_us = rows.to_us(now)
        async with self._transaction() as connection:
            locked = (
                (
                    await connection.execute(
                        sa.select(messages).where(m.lock_tag.is_not(None), m.lock_expires_at <= now_us)
                    )
                )
                .mappings()
                .all()
            )
            purged = [row for row in locked if row["purge_pending"]]
            await self._delete_rows(connection, purged)
            await Removal(self, connection).removed(purged, journal=False)
            await self._unlock(connection, [row["lookup_id"] for row in locked if not row["purge_pending"]])
            expired = (
                (
                    await connection.execute(
                        sa.select(transactions.c.id).where(transactions.c.expires_at <= now_us)
                    )
                )
                .scalars()
                .all()
            )
            touched = {row["queue_id"] for row in locked}
            for transaction_id in expired:
                touched |= await self._finish(connection, transaction_id, commit=False) or set()
            closed = await connection.execute(sa.delete(cursors).where(cursors.c.expires_at <= now_us))
        return ReleaseReport(len(locked), len(expired), int(closed.rowcount), frozenset(touched))


def _hold(claim: Claim) -> dict[str, Any]:
    if claim.kind is ClaimKind.TRANSACTION:
        return {"state": LOCKED, "transaction_id": claim.owner, "txn_op": TXN_DEQUEUE}
    assert claim.expires_at is not None
    return {"state": LOCKED, "lock_tag": claim.owner, "lock_expires_at": rows.to_us(claim.expires_at)}


def _count_and_size(body_size: sa.ColumnElement[int], *where: sa.ColumnElement[bool]) -> sa.Select[int, int]:
    return sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(body_size), 0)).where(*where)


def _changed(changes: QueueChanges) -> dict[str, Any]:
    fields = ("label", "quota_kb", "journal", "journal_quota_kb", "base_priority")
    return {name: getattr(changes, name) for name in fields if getattr(changes, name) is not None}
