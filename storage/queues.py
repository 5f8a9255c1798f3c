"""Queue manager identity and machine quota; queues: create, find, list, update."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql
from sqlalchemy.ext.asyncio import AsyncConnection

from qm.disposal import Reason
from qm.errors import MqError, MqErrorCode
from qm.model import INFINITE, Queue, QueueChanges, QueueManagerInfo, QueueSettings
from qm.paths import QueueKind, QueuePath, SystemQueue, system_queue_path
from storage import rows
from storage.database import Database
from storage.removal import Removal
from storage.tables import queue_manager, queues

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
_MANAGER_ROW = 1
_COMPUTER_JOURNAL_KEY = system_queue_path(SystemQueue.JOURNAL).key


class SqlQueues:
    """The queue manager's identity and machine quota; queues: create, find, list, update. Purge
    and deletion are storage/removal.py's."""

    def __init__(self, db: Database, removal: Removal) -> None:
        self._db = db
        self._removal = removal

    # -- queue manager ----------------------------------------------------------------

    async def open_queue_manager(self, candidate: QueueManagerInfo) -> QueueManagerInfo:
        async with self._db.transaction() as connection:
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
                    if self._db.sqlite
                    else postgresql.insert(queue_manager).values(values).on_conflict_do_nothing()
                )
                await connection.execute(created)
                row = await self._manager_row(connection)
            assert row is not None
            info = rows.manager_from_row(row)
        self._db.guid = info.guid
        return info

    async def queue_manager_info(self) -> QueueManagerInfo:
        async with self._db.engine.connect() as connection:
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
        async with self._db.transaction() as connection:
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
            async with self._db.transaction() as connection:
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
        async with self._db.reading() as connection:
            row = (await connection.execute(statement, {"wanted": wanted})).mappings().first()
        return None if row is None else rows.queue_from_row(row, row["journal_queue_id"])

    async def list_queues(self) -> list[Queue]:
        statement = (
            sa.select(queues, _JOURNAL.c.id.label("journal_queue_id"))
            .outerjoin(_JOURNAL, _JOURNAL.c.journal_of == q.id)
            .where(q.kind != QueueKind.OUTGOING.value)  # listed on their own, with delivery state
            .order_by(q.path_key)
        )
        async with self._db.engine.connect() as connection:
            found = (await connection.execute(statement)).mappings().all()
        return [rows.queue_from_row(row, row["journal_queue_id"]) for row in found]

    async def update_queue(self, queue_id: int, changes: QueueChanges, now: datetime) -> Queue:
        values = {name: value for name, value in _changed(changes).items()}
        async with self._db.transaction() as connection:
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
        return await self._removal.delete_queue(queue_id, now)

    async def purge_queue(self, queue_id: int, now: datetime, reason: Reason = Reason.PURGED) -> int:
        """Available messages leave with reason PURGED; locked ones when their lock ends.
        Messages that arrive while the purge runs stay."""
        return await self._removal.purge_queue(queue_id, now, reason)


def _changed(changes: QueueChanges) -> dict[str, Any]:
    fields = ("label", "quota_kb", "journal", "journal_quota_kb", "base_priority")
    return {name: getattr(changes, name) for name in fields if getattr(changes, name) is not None}
