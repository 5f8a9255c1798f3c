"""MSMQ transactions as database rows: begin, look up, keep alive, commit or abort."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from qm.store import TransactionRecord
from storage import rows
from storage.consequences import Consequences
from storage.database import Database
from storage.tables import transactions
from storage.transaction_ends import TransactionEnds

t = transactions.c


class SqlTransactions:
    def __init__(self, db: Database, ends: TransactionEnds) -> None:
        self._db = db
        self._ends = ends

    async def create_transaction(self, record: TransactionRecord) -> None:
        async with self._db.transaction() as connection:
            await connection.execute(
                sa.insert(transactions).values(
                    id=record.id,
                    created_at=rows.to_us(record.created_at),
                    expires_at=rows.to_us(record.expires_at),
                )
            )

    async def get_transaction(self, transaction_id: str) -> TransactionRecord | None:
        async with self._db.engine.connect() as connection:
            statement = sa.select(transactions).where(t.id == transaction_id)
            row = (await connection.execute(statement)).mappings().first()
        return None if row is None else rows.transaction_from_row(row)

    async def touch_transaction(self, transaction_id: str, expires_at: datetime) -> bool:
        async with self._db.transaction() as connection:
            result = await connection.execute(
                sa.update(transactions)
                .where(t.id == transaction_id)
                .values(expires_at=rows.to_us(expires_at))
            )
        return bool(result.rowcount)

    async def transaction_ttbr(self, transaction_id: str, seconds: int) -> int:
        async with self._db.transaction() as connection:
            await connection.execute(
                sa.update(transactions)
                .where(t.id == transaction_id, t.first_ttbr_seconds.is_(None))
                .values(first_ttbr_seconds=seconds)
            )
            first = await connection.execute(sa.select(t.first_ttbr_seconds).where(t.id == transaction_id))
            value = first.scalar()
        return seconds if value is None else int(value)

    async def finish_transaction(
        self, transaction_id: str, commit: bool, now: datetime
    ) -> frozenset[int] | None:
        async with self._db.transaction() as connection:
            return await self._finish(connection, transaction_id, commit, now)

    async def _finish(
        self, connection: AsyncConnection, transaction_id: str, commit: bool, now: datetime
    ) -> frozenset[int] | None:
        consequences = Consequences(self._db, connection, now)
        ended = await self._ends.end_rows(connection, transaction_id, commit, consequences, now)
        if ended is None:
            return None
        touched, gone, placements = ended
        await consequences.settle(gone, placements)
        return touched
