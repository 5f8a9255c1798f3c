"""Administration of chosen messages (qm.administration): a move of messages by lookup ID to
other queues, and an all-or-nothing insert of imported messages, each in one transaction.

Lock order (docs/store.md): the chosen message rows FOR UPDATE in lookup-ID order, then the
queue rows of the source and every target in one sweep in ID order, before any total
changes. A move earns nothing (no journal copy, no acknowledgment): the message is not
received, it changes queue."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from qm import rules
from qm.errors import MqError, MqErrorCode, QuotaExceeded
from qm.model import INFINITE, Message, NewMessage
from qm.store import Moved, Reshape
from storage import rows, send_statements
from storage.database import Database
from storage.inserts import insert_messages
from storage.tables import AVAILABLE, messages, queue_manager, queues
from storage.totals import add_to_totals

m = messages.c
q = queues.c


class Relocation:
    """Moves and imports (SqlMessages hands them here)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    async def move(
        self, queue_id: int, lookup_ids: Sequence[int], reshape: Reshape, now: datetime
    ) -> list[Moved]:
        """Take the chosen available messages out of the queue and store what `reshape` makes of
        each, all or none: a message missing, expired or locked, a target deleted meanwhile or
        over its quota, and nothing changes."""
        async with self._db.transaction() as connection:
            gone = await self._take_chosen(connection, queue_id, lookup_ids, now)
            batch = [reshape(rows.message_from_row(row)) for row in gone]
            stored = await self._store(connection, batch, gone, machine=False)
        return [Moved(row["lookup_id"], message) for row, message in zip(gone, stored, strict=True)]

    async def insert_all(self, batch: Sequence[NewMessage]) -> list[Message]:
        """Store every message or none (the queues' and the machine's quotas checked on the
        whole batch)."""
        async with self._db.transaction() as connection:
            return await self._store(connection, batch, [], machine=True)

    async def _take_chosen(
        self, connection: AsyncConnection, queue_id: int, lookup_ids: Sequence[int], now: datetime
    ) -> list[Mapping[Any, Any]]:
        chosen = sorted(set(lookup_ids))
        statement = sa.select(messages).where(m.lookup_id.in_(chosen), m.queue_id == queue_id)
        statement = statement.order_by(m.lookup_id)
        if not self._db.sqlite:
            statement = statement.with_for_update()
        found = {row["lookup_id"]: row for row in (await connection.execute(statement)).mappings()}
        for lookup_id in chosen:
            _check_available(lookup_id, found.get(lookup_id), rows.to_us(now))
        await connection.execute(sa.delete(messages).where(m.lookup_id.in_(chosen)))
        return [found[lookup_id] for lookup_id in chosen]

    async def _store(
        self,
        connection: AsyncConnection,
        batch: Sequence[NewMessage],
        gone: Sequence[Mapping[Any, Any]],
        machine: bool,
    ) -> list[Message]:
        if not batch:
            return []
        room = await self._lock_queues(connection, {row["queue_id"] for row in gone}, batch)
        _admit(batch, room, gone)
        if machine:
            await self._admit_machine(connection, batch)
        if gone:
            await add_to_totals(connection, gone, sign=-1)
        values = await insert_messages(self._db, connection, batch, queues_held=True)
        return [rows.message_from_row(value) for value in values]

    async def _lock_queues(
        self, connection: AsyncConnection, sources: set[int], batch: Sequence[NewMessage]
    ) -> dict[int, Mapping[Any, Any]]:
        """The rows of the sources and targets in one sweep, in ID order; a target whose ID no
        longer names a queue with its path (deleted, perhaps re-created) fails the batch."""
        wanted = sorted(sources | {item.queue_id for item in batch})
        columns = (q.id, q.path_key, q.byte_count, q.quota_kb)
        statement = sa.select(*columns).where(q.id.in_(wanted)).order_by(q.id)
        if not self._db.sqlite:
            statement = statement.with_for_update(key_share=True)
        found: dict[int, Mapping[Any, Any]] = {
            row["id"]: row for row in (await connection.execute(statement)).mappings()
        }
        for item in batch:
            row = found.get(item.queue_id)
            if row is None or (item.queue_key is not None and row["path_key"] != item.queue_key):
                raise MqError(MqErrorCode.MQ_ERROR_QUEUE_NOT_FOUND, "the target queue was deleted meanwhile")
        return found

    async def _admit_machine(self, connection: AsyncConnection, batch: Sequence[NewMessage]) -> None:
        limits = (
            await connection.execute(sa.select(queue_manager.c.quota_kb, queue_manager.c.throttled))
        ).one()
        if limits.throttled:
            raise QuotaExceeded("the queue manager is throttled", machine=True)
        if limits.quota_kb == INFINITE:
            return
        stored = int((await connection.execute(send_statements.MACHINE_BYTES)).scalar() or 0)
        if rules.exceeds(stored + sum(rules.stored_size(item.properties) for item in batch), limits.quota_kb):
            raise QuotaExceeded("the queue manager's quota would be exceeded", machine=True)


def _check_available(lookup_id: int, row: Mapping[Any, Any] | None, now_us: int) -> None:
    deadline = None if row is None else row["ttbr_deadline"]
    if row is None or (deadline is not None and deadline <= now_us):
        raise MqError(
            MqErrorCode.MQ_ERROR_MESSAGE_NOT_FOUND, f"the queue holds no message with lookup ID {lookup_id}"
        )
    if row["state"] != AVAILABLE or row["purge_pending"]:
        raise MqError(
            MqErrorCode.MQ_ERROR_MESSAGE_LOCKED_UNDER_TRANSACTION,
            f"message {lookup_id} is locked by a transaction or a two-phase read",
        )


def _admit(
    batch: Sequence[NewMessage], room: Mapping[int, Mapping[Any, Any]], gone: Sequence[Mapping[Any, Any]]
) -> None:
    """Each target's quota, on what it holds once the batch is in (less what leaves it)."""
    added: dict[int, int] = {}
    for item in batch:
        added[item.queue_id] = added.get(item.queue_id, 0) + rules.stored_size(item.properties)
    for row in gone:
        added[row["queue_id"]] = added.get(row["queue_id"], 0) - row["body_size"]
    for queue_id, size in added.items():
        target = room[queue_id]
        if size > 0 and rules.exceeds(target["byte_count"] + size, target["quota_kb"]):
            raise QuotaExceeded(
                f"the quota of the target queue ({target['quota_kb']} KB) would be exceeded", machine=False
            )
