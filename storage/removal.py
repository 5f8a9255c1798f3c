"""The common tail of every removal (reference §7.6): totals, and target journaling."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from qm import rules
from qm.paths import QueueKind, QueuePath
from storage.tables import AVAILABLE, messages, queues

if TYPE_CHECKING:
    from storage.store import SqlStore

q = queues.c
m = messages.c
_RESET_ON_COPY = {
    "state": AVAILABLE,
    "transaction_id": None,
    "txn_op": None,
    "lock_tag": None,
    "lock_expires_at": None,
    "purge_pending": False,
}


class Removal:
    """Bookkeeping for rows just deleted from `messages` inside one transaction."""

    def __init__(self, store: SqlStore, connection: AsyncConnection) -> None:
        self._store = store
        self._connection = connection

    async def removed(self, gone: Sequence[Mapping[Any, Any]], journal: bool = True) -> None:
        """Subtract from the totals; received messages go on to their queue's journal."""
        if not gone:
            return
        await self.add_to_totals(self._connection, gone, sign=-1)
        if journal:
            await self._journal(gone)

    async def _journal(self, gone: Sequence[Mapping[Any, Any]]) -> None:
        targets = await self._journal_targets({row["queue_id"] for row in gone})
        copies = []
        for row in gone:
            target = targets.get(row["queue_id"])
            if target is None:
                continue
            journal_id, journal_bytes, quota_kb, path = target
            if rules.exceeds(journal_bytes + row["body_size"], quota_kb):
                continue  # over the journal quota: the copy is dropped, as MSMQ does
            targets[row["queue_id"]] = (journal_id, journal_bytes + row["body_size"], quota_kb, path)
            copies.append(dict(row) | _RESET_ON_COPY | {"queue_id": journal_id, "destination_queue": path})
        await self._insert_copies(copies)

    async def _journal_targets(self, queue_ids: Iterable[int]) -> dict[int, tuple[int, int, int, str]]:
        parent = queues.alias("parent")
        statement = (
            sa.select(
                q.id, q.byte_count, q.quota_kb, parent.c.id.label("parent_id"), parent.c.kind, parent.c.name
            )
            .join(parent, parent.c.id == q.journal_of)
            .where(parent.c.id.in_(list(queue_ids)), parent.c.journal.is_(True))
        )
        found = await self._connection.execute(statement)
        return {
            row.parent_id: (
                row.id,
                row.byte_count,
                row.quota_kb,
                QueuePath(QueueKind(row.kind), row.name).pathname,
            )
            for row in found
        }

    async def _insert_copies(self, copies: list[dict[str, Any]]) -> None:
        if not copies:
            return
        counters = await self._store._allocate_counters(self._connection, len(copies))
        for copy, counter in zip(copies, counters, strict=True):
            copy["lookup_id"] = rules.lookup_id_for(copy["priority"], counter)
        await self._connection.execute(sa.insert(messages), copies)
        await self.add_to_totals(self._connection, copies, sign=1)

    @staticmethod
    async def add_to_totals(
        connection: AsyncConnection, changed: Iterable[Mapping[Any, Any]], sign: int
    ) -> None:
        counts: dict[int, list[int]] = defaultdict(lambda: [0, 0])
        for row in changed:
            counts[row["queue_id"]][0] += 1
            counts[row["queue_id"]][1] += row["body_size"]
        for queue_id in sorted(counts):
            number, size = counts[queue_id]
            await connection.execute(
                sa.update(queues)
                .where(q.id == queue_id)
                .values(message_count=q.message_count + sign * number, byte_count=q.byte_count + sign * size)
            )

    @staticmethod
    async def recount(connection: AsyncConnection, queue_ids: Iterable[int]) -> None:
        for queue_id in queue_ids:
            remaining = sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(m.body_size), 0)).where(
                m.queue_id == queue_id
            )
            number, size = (await connection.execute(remaining)).one()
            await connection.execute(
                sa.update(queues).where(q.id == queue_id).values(message_count=number, byte_count=size)
            )
