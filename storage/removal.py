"""Purge and deletion of a queue: every message leaves with what its removal earns, in one
transaction, messages sent meanwhile either stay (purge) or wait and are refused (deletion)."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from qm.disposal import DisposalPolicy, Placement, Reason
from qm.errors import MqError, MqErrorCode
from qm.paths import SystemQueue, system_queue_path
from storage import send_statements, sql_rules
from storage.consequences import Consequences
from storage.database import CHANGED_QUEUES, Database
from storage.holds import locked_in_lookup_order, locking_in_lookup_order
from storage.tables import AVAILABLE, LOCKED, cursors, messages, queues, srmp_streams, transactions
from storage.totals import change_totals
from storage.transaction_ends import TransactionEnds

m = messages.c
q = queues.c
Settlement = tuple[list[Mapping[Any, Any]], list[Placement]]
"""Rows removed and what their removal earns, for Consequences.settle."""
_BATCH = 500
CLOSE_ATTEMPTS = 8
"""How often a queue deletion on PostgreSQL locks the queue's messages and row again after a
message came in between (Removal._close) before it gives up with a clear error."""
CLOSE_BACKOFF_S = 0.005
CLOSE_BACKOFF_MAX_S = 0.25


class Removal:
    """Purge and deletion of queues (SqlQueues hands them here)."""

    def __init__(self, db: Database, ends: TransactionEnds) -> None:
        self._db = db
        self._ends = ends

    async def delete_queue(self, queue_id: int, now: datetime) -> int:
        """Every message of the queue leaves with reason QUEUE_DELETED, then the queue and journal go."""
        async with self._db.transaction() as connection:
            family = sa.select(q.id).where(sa.or_(q.id == queue_id, q.journal_of == queue_id))
            leaving = m.queue_id == queue_id
            consequences = Consequences(self._db, connection, now)
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
        async with self._db.transaction() as connection:
            await self._mark_purged(connection, queue_id)
            available = sa.and_(m.queue_id == queue_id, m.state == AVAILABLE, m.purge_pending)
            await self._lock_removal_targets(connection, queue_id, available, reason)
            consequences = Consequences(self._db, connection, now)
            followed = await self._remove_followed(connection, available, consequences, reason)
            if self._db.sqlite:  # one writer: the rows counted are the rows deleted
                number, size = (await connection.execute(_count_and_size(m.body_size, available))).one()
                await connection.execute(sa.delete(messages).where(available))
            else:
                gone = sa.delete(messages).where(available).returning(m.body_size).cte("gone")
                number, size = (await connection.execute(_count_and_size(gone.c.body_size))).one()
            await change_totals(connection, {queue_id: (-int(number), -int(size))})
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
        taken, everything is given back (to a savepoint) and taken again after a short backoff,
        until nothing came in between (after the queue's row no send commits into the queue), at
        most CLOSE_ATTEMPTS times: a steady stream of sends into each window would otherwise
        keep the deletion retrying for ever (MQ_ERROR_SERVICE_NOT_AVAILABLE, nothing deleted)."""
        if self._db.sqlite:  # one writer: nothing comes in between, no row waits
            holders = await self._holders(connection, in_family)
            return await self._abort_holders(connection, holders, consequences, now)
        changed: Counter[int] = connection.info.setdefault(CHANGED_QUEUES, Counter())
        woken = changed.copy()
        for attempt in range(CLOSE_ATTEMPTS):
            if attempt:
                await asyncio.sleep(min(CLOSE_BACKOFF_S * 2**attempt, CLOSE_BACKOFF_MAX_S))
            savepoint = await connection.begin_nested()
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
                await savepoint.commit()
                return gone, placements
            await savepoint.rollback()  # its locks go with it: the backoff holds nothing
            changed.clear()
            changed.update(woken)  # the aborts' wake-ups were rolled back with them
        raise MqError(
            MqErrorCode.MQ_ERROR_SERVICE_NOT_AVAILABLE,
            f"the queue's deletion gave up after {CLOSE_ATTEMPTS} attempts: messages kept arriving"
            " or being claimed while it locked them; nothing was deleted, try again",
        )

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
        """Abort each transaction as its abort would (TransactionEnds.end_rows), message rows
        only: a message it sent into the queue never reached it; one it received from the queue
        is back in it, to be deleted with it (reason QUEUE_DELETED); its work elsewhere is
        undone too, a transaction being one unit. Its commit then fails with
        MQ_ERROR_TRANSACTION_SEQUENCE, as after a timeout (docs/concepts.md, Purge and delete)."""
        gone: list[Mapping[Any, Any]] = []
        placements: list[Placement] = []
        for transaction_id in holders:
            ended = await self._ends.end_rows(connection, transaction_id, False, consequences, now)
            if ended is not None:
                gone.extend(ended[1])
                placements.extend(ended[2])
        return gone, placements

    async def _mark_purged(self, connection: AsyncConnection, queue_id: int) -> None:
        """Mark the queue's available and locked messages as the purge's, before any queue row
        is locked: the update locks their rows (message rows first, as every removal does; on
        PostgreSQL in lookup-ID order, as a commit locks its own: holds.locked_in_lookup_order),
        the available ones are removed below, the locked ones when their lock ends. A message
        that arrives meanwhile is not marked, so the purge never waits for its row while it
        holds queue rows (a receive may hold it and wait for the queue's row)."""
        purged = sa.and_(m.queue_id == queue_id, m.state.in_([AVAILABLE, LOCKED]), m.purge_pending.is_(False))
        if not self._db.sqlite:  # one writer: no row locks
            purged = locked_in_lookup_order(purged, keeps_key=True)
        await connection.execute(sa.update(messages).where(purged).values(purge_pending=True))

    async def _hold_messages(self, connection: AsyncConnection, where: sa.ColumnElement[bool]) -> None:
        """PostgreSQL: lock every message row the removal will touch before any queue row, as
        every other removal does. Removing in batches locks queue rows (totals, dead-letter
        copies, acknowledgments) between the batches; a receive holding a message row of a
        later batch would wait for those while the removal waits for its message: a deadlock.
        In lookup-ID order, as a commit locks its own (holds.locked_in_lookup_order says why)."""
        if not self._db.sqlite:
            held = locking_in_lookup_order(where).subquery()
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
        policy = self._db.policy
        if self._db.sqlite or (policy is None and not closing):
            return
        found = []
        if policy is not None:
            asking = (
                sa.select(m.admin_queue, m.acknowledge)
                .where(leaving, sql_rules.removal_may_follow())
                .distinct()
            )
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
            send_statements.QUEUES_LOCKED_WITH_TARGETS
            if closing
            else send_statements.QUEUES_LOCKED_WITH_TARGETS_NO_KEY
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
                    sa.select(m.srmp_stream_id).where(leaving, m.transactional, sql_rules.asks_dead_letter())
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
        if self._db.policy is None:
            return 0
        followed = 0
        while True:
            batch = sa.select(m.lookup_id).where(
                where, sql_rules.removal_may_follow(), _in_application_queue()
            )
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


def _count_and_size(body_size: sa.ColumnElement[int], *where: sa.ColumnElement[bool]) -> sa.Select[int, int]:
    return sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(body_size), 0)).where(*where)
