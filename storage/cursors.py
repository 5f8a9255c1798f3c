"""Cursors as database rows (any process on the database can use them)."""

from __future__ import annotations

import sqlalchemy as sa

from qm.store import CursorRecord
from storage import rows
from storage.database import Database
from storage.tables import cursors


class SqlCursors:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def create_cursor(self, record: CursorRecord) -> None:
        async with self._db.transaction() as connection:
            await connection.execute(sa.insert(cursors).values(rows.cursor_values(record)))

    async def get_cursor(self, cursor_id: str) -> CursorRecord | None:
        async with self._db.engine.connect() as connection:
            statement = sa.select(cursors).where(cursors.c.id == cursor_id)
            row = (await connection.execute(statement)).mappings().first()
        return None if row is None else rows.cursor_from_row(row)

    async def save_cursor(self, record: CursorRecord) -> None:
        async with self._db.transaction() as connection:
            await connection.execute(
                sa.update(cursors).where(cursors.c.id == record.id).values(rows.cursor_values(record))
            )

    async def delete_cursor(self, cursor_id: str) -> bool:
        async with self._db.transaction() as connection:
            result = await connection.execute(sa.delete(cursors).where(cursors.c.id == cursor_id))
        return bool(result.rowcount)
