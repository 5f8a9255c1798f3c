"""Queue manager identity and machine quota; queues: create, find, update, purge, delete."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import AsyncConnection

from qm.disposal import DisposalPolicy, Placement, Reason
from qm.errors import MqError, MqErrorCode
from qm.model import INFINITE, JournalFlags, Queue, QueueChanges, QueueManagerInfo, QueueSettings
from qm.paths import QueueKind, QueuePath, SystemQueue, system_queue_path
from storage import rows, statements
from storage.base import StoreBase
from storage.consequences import Consequences
from storage.tables import (
    AVAILABLE,
    LOCKED,
    cursors,
    messages,
    queue_manager,
    queues,
    srmp_streams,
    transactions,
)
from storage.transaction_store import TransactionStore

m = messages.c
q = queues.c
_JOURNAL = queues.alias("journal_queue")
"""Built once: building an alias's column collection costs more than the query it serves
(a profile of SRMP sends showed 8 % of the gateway's time there)."""
_WITH_JOURNAL = sa.select(queues, _JOURNAL.c.id.label("journal_queue_id")).outerjoin(
    _JOURNAL, _JOURNAL.c.journal_of == q.id
)
_QUEUE_BY_KEY = _WITH_JOURNAL.where(q.path_key == sa.bindparam("wanted", type_=q.path_key.type))
_QUEUE_BY_ID = _WITH_JOURNAL.where(q.id == sa.bindparam("wanted", type_=sa.Integer))
"""A queue and its journal queue's ID, built once (statements.py says why)."""
Settlement = tuple[list[Mapping[Any, Any]], list[Placement]]
"""Rows removed and what their removal earns, for Consequences.settle."""
_MANAGER_ROW = 1
_BATCH = 500
_COMPUTER_JOURNAL_KEY = system_queue_path(SystemQueue.JOURNAL).key


class QueueStore(StoreBase):
    # -- queue manager ----------------------------------------------------------------

    async def open_queue_manager(self, candidate: QueueManagerInfo) -> QueueManagerInfo:
        async with self._transaction() as connection:
            row = await self._manager_row(connection)
            if row is None:  # the first start on this database, perhaps of several processes at once
                values = {
                    "id": _MANAGER_ROW,
                    "guid": str(candidate.guid),
                    "quota_kb": candidate.quota_kb,
                    "throttled": candidate.throttled,
                    "counter": 0,
                    "created_at": rows.to_us(datetime.now(UTC)),
                }
                # Whoever inserts first names the queue manager; the others read its row. A plain
                # INSERT failed the second of two processes started together on a fresh database.
                created: sa.Insert = (
                    sa.insert(queue_manager).prefix_with("OR IGNORE").values(values)
                    if self._sqlite
                    else postgresql.insert(queue_manager).values(values).on_conflict_do_nothing()
                )
                await connection.execute(created)
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
            journal_quota = (
                await connection.execute(sa.select(q.quota_kb).where(q.path_key == _COMPUTER_JOURNAL_KEY))
            ).scalar()
        if row is None:
            raise MqError(MqErrorCode.MQ_ERROR_SERVICE_NOT_AVAILABLE, "the store is not initialised")
        return rows.manager_from_row(row, totals, journal_quota if journal_quota is not None else INFINITE)

    async def update_queue_manager(
        self, quota_kb: int | None, throttled: bool | None, journal_quota_kb: int | None = None
    ) -> QueueManagerInfo:
        values: dict[str, Any] = {}
        if quota_kb is not None:
            values["quota_kb"] = quota_kb
        if throttled is not None:
            values["throttled"] = throttled
        async with self._transaction() as connection:
            if values:
                await connection.execute(sa.update(queue_manager).values(**values))
            if journal_quota_kb is not None:
                computer_journal = q.path_key == _COMPUTER_JOURNAL_KEY
                await connection.execute(
                    sa.update(queues).where(computer_journal).values(quota_kb=journal_quota_kb)
                )
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
        return await self._one_queue(_QUEUE_BY_KEY, path.key)

    async def get_queue(self, queue_id: int) -> Queue | None:
        return await self._one_queue(_QUEUE_BY_ID, queue_id)

    async def _one_queue(self, statement: sa.Select[Any], wanted: str | int) -> Queue | None:
        async with self._reading() as connection:
            row = (await connection.execute(statement, {"wanted": wanted})).mappings().first()
        return None if row is None else rows.queue_from_row(row, row["journal_queue_id"])

    async def list_queues(self) -> list[Queue]:
        statement = (
            sa.select(queues, _JOURNAL.c.id.label("journal_queue_id"))
            .outerjoin(_JOURNAL, _JOURNAL.c.journal_of == q.id)
            .where(q.kind != QueueKind.OUTGOING.value)  # listed on their own, with delivery state
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

    async def delete_queue(self, queue_id: int, now: datetime) -> int:
        """Every message of the queue leaves with reason QUEUE_DELETED, then the queue and journal go."""
        async with self._transaction() as connection:
            family = sa.select(q.id).where(sa.or_(q.id == queue_id, q.journal_of == queue_id))
            leaving = m.queue_id == queue_id
            consequences = Consequences(self, connection, now)
            aborted = await self._close(connection, queue_id, m.queue_id.in_(family), consequences, now)
            await consequences.settle(*aborted)
            followed = await self._remove_followed(connection, leaving, consequences, Reason.QUEUE_DELETED)
            dropped = await connection.execute(sa.delete(messages).where(m.queue_id.in_(family)))
            await connection.execute(sa.delete(cursors).where(cursors.c.queue_id.in_(family)))
            await connection.execute(sa.delete(queues).where(q.journal_of == queue_id))
            await connection.execute(sa.delete(queues).where(q.id == queue_id))
        return followed + int(dropped.rowcount)

    async def purge_queue(self, queue_id: int, now: datetime, reason: Reason = Reason.PURGED) -> int:
        """Available messages leave with reason PURGED; locked ones when their lock ends.
        Messages that arrive while the purge runs stay."""
        async with self._transaction() as connection:
            await self._mark_purged(connection, queue_id)
            available = sa.and_(m.queue_id == queue_id, m.state == AVAILABLE, m.purge_pending)
            await self._lock_removal_targets(connection, queue_id, available, reason)
            consequences = Consequences(self, connection, now)
            followed = await self._remove_followed(connection, available, consequences, reason)
            if self._sqlite:  # one writer: the rows counted are the rows deleted
                number, size = (await connection.execute(_count_and_size(m.body_size, available))).one()
                await connection.execute(sa.delete(messages).where(available))
            else:
                gone = sa.delete(messages).where(available).returning(m.body_size).cte("gone")
                number, size = (await connection.execute(_count_and_size(gone.c.body_size))).one()
            await connection.execute(
                sa.update(queues)
                .where(q.id == queue_id)
                .values(message_count=q.message_count - number, byte_count=q.byte_count - size)
            )
        return followed + int(number)

    async def _close(
        self,
        connection: AsyncConnection,
        queue_id: int,
        in_family: sa.ColumnElement[bool],
        consequences: Consequences,
        now: datetime,
    ) -> Settlement:
        """Abort the open transactions that hold a message of the queue or its journal, then
        (PostgreSQL) lock the queue's row FOR UPDATE with the queues the deletion and the
        aborts change or place into; what the aborts leave and earn, for Consequences.settle.

        PostgreSQL, in lock order: the transactions' rows (a commit takes its own first), every
        message row of the queue, its journal and those transactions, then the queue rows. A
        message sent, or claimed by another transaction, between the first statements and the
        queue's row is not held; a receive holding it waits for the queue's row while the
        deletion would wait for the message. So when one is found once the queue's row is
        taken, everything is given back (to a savepoint) and taken again, until nothing came
        in between: after the queue's row no send commits into the queue."""
        if self._sqlite:  # one writer: nothing comes in between, no row waits
            holders = await self._holders(connection, in_family)
            return await self._abort_holders(connection, holders, consequences, now)
        changed: Counter[int] = connection.info.setdefault("changed_queues", Counter())
        woken = changed.copy()
        while True:
            attempt = await connection.begin_nested()
            holders = await self._holders(connection, in_family, lock=True)
            await self._hold_messages(connection, sa.or_(in_family, m.transaction_id.in_(holders)))
            gone, placements = await self._abort_holders(connection, holders, consequences, now)
            await self._lock_removal_targets(
                connection,
                queue_id,
                m.queue_id == queue_id,
                Reason.QUEUE_DELETED,
                closing=True,
                also=(sorted({row["queue_id"] for row in gone}), {p.target.key for p in placements}),
            )
            if await _all_held(connection, in_family) and not await self._holders(connection, in_family):
                await attempt.commit()
                return gone, placements
            await attempt.rollback()
            changed.clear()
            changed.update(woken)  # the aborts' wake-ups were rolled back with them

    @staticmethod
    async def _holders(
        connection: AsyncConnection, in_family: sa.ColumnElement[bool], lock: bool = False
    ) -> list[str]:
        """The open MSMQ transactions that sent or received a message of the queue or its
        journal; `lock`: their rows locked FOR UPDATE, in ID order (PostgreSQL)."""
        holding = sa.select(m.transaction_id).where(in_family, m.transaction_id.is_not(None))
        statement = sa.select(transactions.c.id).where(transactions.c.id.in_(holding))
        if lock:
            statement = statement.order_by(transactions.c.id).with_for_update(of=transactions)
        return list((await connection.execute(statement)).scalars().all())

    async def _abort_holders(
        self, connection: AsyncConnection, holders: Sequence[str], consequences: Consequences, now: datetime
    ) -> Settlement:
        """Abort each transaction as its abort would (TransactionStore._end_rows), message rows
        only: a message it sent into the queue never reached it; one it received from the queue
        is back in it, to be deleted with it (reason QUEUE_DELETED); its work elsewhere is
        undone too, a transaction being one unit. Its commit then fails with
        MQ_ERROR_TRANSACTION_SEQUENCE, as after a timeout (docs/concepts.md, Purge and delete)."""
        assert isinstance(self, TransactionStore)
        gone: list[Mapping[Any, Any]] = []
        placements: list[Placement] = []
        for transaction_id in holders:
            ended = await self._end_rows(connection, transaction_id, False, consequences, now)
            if ended is not None:
                gone.extend(ended[1])
                placements.extend(ended[2])
        return gone, placements

    @staticmethod
    async def _mark_purged(connection: AsyncConnection, queue_id: int) -> None:
        """Mark the queue's available and locked messages as the purge's, before any queue row
        is locked: the update locks their rows (message rows first, as every removal does), the
        available ones are removed below, the locked ones when their lock ends. A message that
        arrives meanwhile is not marked, so the purge never waits for its row while it holds
        queue rows (a receive may hold it and wait for the queue's row)."""
        purged = sa.and_(m.queue_id == queue_id, m.state.in_([AVAILABLE, LOCKED]), m.purge_pending.is_(False))
        await connection.execute(sa.update(messages).where(purged).values(purge_pending=True))

    async def _hold_messages(self, connection: AsyncConnection, where: sa.ColumnElement[bool]) -> None:
        """PostgreSQL: lock every message row the removal will touch before any queue row, as
        every other removal does. Removing in batches locks queue rows (totals, dead-letter
        copies, acknowledgments) between the batches; a receive holding a message row of a
        later batch would wait for those while the removal waits for its message: a deadlock."""
        if not self._sqlite:
            held = sa.select(m.lookup_id).where(where).with_for_update().subquery()
            await connection.execute(sa.select(sa.func.count()).select_from(held))

    async def _lock_removal_targets(
        self,
        connection: AsyncConnection,
        queue_id: int,
        leaving: sa.ColumnElement[bool],
        reason: Reason,
        closing: bool = False,
        also: tuple[Sequence[int], Iterable[str]] = ((), ()),
    ) -> None:
        """PostgreSQL: the queue's row and those of every queue its removed messages may place
        into (dead-letter queues, admin queues), in one sweep in ID order, before the first
        batch: each batch's own sweep would otherwise lock a lower admin queue after the queue.
        `closing` (a deletion): the queue's row FOR UPDATE, so that no send commits into it
        after this (a message sent meanwhile would go with the bulk delete, without the dead
        letter or acknowledgment it asks for). `also`: more queues (IDs) and targets (path keys)
        to take in the same sweep (what the transactions a deletion aborts change)."""
        policy = self.policy
        if self._sqlite or (policy is None and not closing):
            return
        found = []
        if policy is not None:
            asking = sa.select(m.admin_queue, m.acknowledge).where(leaving, _has_consequences()).distinct()
            found = list((await connection.execute(asking)).all())
        if not found and not closing:
            return
        targets = set(also[1])
        if found:
            dead_letter_queues = (SystemQueue.DEADLETTER, SystemQueue.DEADXACT)
            targets.update(system_queue_path(kind).key for kind in dead_letter_queues)
        for admin_queue, acknowledge in found:
            target = (
                None if policy is None else policy.acknowledgment_target(admin_queue, acknowledge, reason)
            )
            if target is not None:
                targets.add(target.key)
        if found and policy is not None:  # a final receipt is asked for with MQMSG_DEADLETTER
            targets |= await self._final_receipt_targets(connection, leaving, policy)
        lock = (
            statements.QUEUES_LOCKED_WITH_TARGETS if closing else statements.QUEUES_LOCKED_WITH_TARGETS_NO_KEY
        )
        await connection.execute(lock, {"queue_ids": [queue_id, *also[0]], "target_keys": sorted(targets)})

    @staticmethod
    async def _final_receipt_targets(
        connection: AsyncConnection, leaving: sa.ColumnElement[bool], policy: DisposalPolicy
    ) -> set[str]:
        """The outgoing queues the final receipts (reference §4.4) of the leaving messages go
        to: each batch's sweep takes them with the rest (Consequences.settle), and one of a lower
        ID than the queue taken there, after the queue's row, would deadlock with a receive that
        earns a receipt into it and then waits for the queue's row."""
        streams = srmp_streams.c
        asking = (
            sa.select(streams.send_receipts_to)
            .where(
                streams.stream_id.in_(
                    sa.select(m.srmp_stream_id).where(leaving, m.transactional, _asks_dead_letter())
                )
            )
            .distinct()
        )
        urls = (await connection.execute(asking)).scalars().all()
        found = (policy.remote_queue(f"DIRECT={url}") for url in urls if url)
        return {target.key for target in found if target is not None}

    async def _remove_followed(
        self,
        connection: AsyncConnection,
        where: sa.ColumnElement[bool],
        consequences: Consequences,
        reason: Reason,
    ) -> int:
        """Remove, in batches, the messages whose removal has consequences (dead-letter copies,
        negative acknowledgments); the caller removes the rest in bulk. The queue manager's own
        queues (journals, dead-letter queues) have none."""
        if self.policy is None:
            return 0
        followed = 0
        while True:
            batch = sa.select(m.lookup_id).where(where, _has_consequences(), _in_application_queue())
            statement = sa.delete(messages).where(m.lookup_id.in_(batch.limit(_BATCH)))
            gone = (await connection.execute(statement.returning(*messages.c))).mappings().all()
            await consequences.removed(gone, reason)
            followed += len(gone)
            if len(gone) < _BATCH:
                return followed


async def _all_held(connection: AsyncConnection, held: sa.ColumnElement[bool]) -> bool:
    """Whether this transaction holds every message row `held` selects: those no one else
    holds are taken now (SKIP LOCKED skips only other transactions' rows), then all counted."""
    free = sa.select(m.lookup_id).where(held).with_for_update(skip_locked=True).subquery()
    taken = (await connection.execute(sa.select(sa.func.count()).select_from(free))).scalar_one()
    present = sa.select(sa.func.count()).select_from(messages).where(held)
    return int(taken) >= int((await connection.execute(present)).scalar_one())


def _in_application_queue() -> sa.ColumnElement[bool]:
    application = sa.select(q.id).where(q.kind != "system", q.journal_of.is_(None))
    return m.queue_id.in_(application)


def _asks_dead_letter() -> sa.ColumnElement[bool]:
    return m.journal.op("&")(int(JournalFlags.DEADLETTER)) != 0


def _has_consequences() -> sa.ColumnElement[bool]:
    """Asked for a dead-letter copy (MQMSG_DEADLETTER) or a negative receive acknowledgment."""
    dead_letter = _asks_dead_letter()
    negative_ack = sa.and_(m.acknowledge.op("&")(8) != 0, m.admin_queue.is_not(None))
    return sa.or_(dead_letter, negative_ack)


def _count_and_size(body_size: sa.ColumnElement[int], *where: sa.ColumnElement[bool]) -> sa.Select[int, int]:
    return sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(body_size), 0)).where(*where)


def _changed(changes: QueueChanges) -> dict[str, Any]:
    fields = ("label", "quota_kb", "journal", "journal_quota_kb", "base_priority")
    return {name: getattr(changes, name) for name in fields if getattr(changes, name) is not None}
