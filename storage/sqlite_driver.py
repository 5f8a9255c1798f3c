"""SQLite statements in one trip to aiosqlite's thread instead of four.

aiosqlite runs each SQLite connection in a thread of its own; every call is a trip there and
back (a queue put, a thread wake-up, a wake-up of the event loop). SQLAlchemy's aiosqlite
adapter makes four trips per statement: open a cursor, execute, fetch the rows, close the
cursor. Measured through SQLAlchemy on the development machine: about 450 us of CPU per
statement, against about 75 us for aiosqlite's own one-trip `execute_fetchall`; a small send
transaction has seven statements. `OneTripCursor` does the four steps in the thread, in one
trip (about 245 us per statement through SQLAlchemy).

It relies on the adapter's and aiosqlite's internals, as SQLAlchemy's own adapter does
(`_execute`, `_conn`, the adapter's execute lock); the versions are bounded in pyproject.toml
and every SQLite test runs through it.
"""

from __future__ import annotations

import sqlite3
from collections import deque
from typing import Any

from sqlalchemy.dialects.sqlite.aiosqlite import AsyncAdapt_aiosqlite_connection, AsyncAdapt_aiosqlite_cursor
from sqlalchemy.util import EMPTY_DICT
from sqlalchemy.util.concurrency import await_

_Outcome = tuple[Any, list[Any] | None, int, int | None]
"""description, rows (None: the statement returns none), rowcount, lastrowid"""


class OneTripCursor(AsyncAdapt_aiosqlite_cursor):
    """A DB-API cursor over aiosqlite whose execute opens, runs, fetches and closes an SQLite
    cursor in aiosqlite's thread, and keeps what it learnt."""

    __slots__ = ("_arraysize", "_description", "_lastrowid", "_rowcount")

    def __init__(self, adapt_connection: AsyncAdapt_aiosqlite_connection) -> None:
        # No aiosqlite cursor is opened here (that was a trip of its own).
        self._adapt_connection = adapt_connection
        self._connection = adapt_connection._connection
        self._soft_closed_memoized = EMPTY_DICT
        self._rows = deque()
        self._arraysize = 1
        self._description: Any = None
        self._rowcount = -1
        self._lastrowid: int | None = None

    @property
    def description(self) -> Any:
        return self._description

    @property
    def rowcount(self) -> int:
        return self._rowcount

    @property
    def lastrowid(self) -> Any:
        return self._lastrowid

    @property
    def arraysize(self) -> int:
        return self._arraysize

    @arraysize.setter
    def arraysize(self, value: int) -> None:
        self._arraysize = value

    def close(self) -> None:
        self._rows.clear()

    async def _async_soft_close(self) -> None:
        """The SQLite cursor was closed in the thread already."""

    def execute(self, operation: Any, parameters: Any = None) -> Any:
        self._take(self._in_one_trip(operation, parameters, many=False))

    def executemany(self, operation: Any, seq_of_parameters: Any) -> Any:
        self._take(self._in_one_trip(operation, seq_of_parameters, many=True))

    def _take(self, trip: Any) -> None:
        try:
            outcome: _Outcome = await_(trip)
        except Exception as error:
            self._adapt_connection._handle_exception(error)
        self._description, rows, self._rowcount, self._lastrowid = outcome
        self._rows = deque(rows) if rows is not None else deque()

    async def _in_one_trip(self, operation: str, parameters: Any, many: bool) -> _Outcome:
        connection = self._connection

        def run() -> _Outcome:
            cursor: sqlite3.Cursor = connection._conn.cursor()
            try:
                if many:
                    cursor.executemany(operation, parameters)
                elif parameters is None:
                    cursor.execute(operation)
                else:
                    cursor.execute(operation, parameters)
                rows = cursor.fetchall() if cursor.description else None
                return cursor.description, rows, cursor.rowcount, cursor.lastrowid
            finally:
                cursor.close()

        async with self._adapt_connection._execute_mutex:
            outcome: _Outcome = await connection._execute(run)
            return outcome


class OneTripConnection(AsyncAdapt_aiosqlite_connection):
    """SQLAlchemy's aiosqlite connection adapter, with `OneTripCursor` for its cursors."""

    __slots__ = ()
    _cursor_cls: type[AsyncAdapt_aiosqlite_cursor] = OneTripCursor

    def rollback(self) -> None:
        # The pool rolls back every connection it takes back, mostly just after a commit:
        # outside a transaction that is a trip to aiosqlite's thread for nothing.
        if self._connection._connection is None or self._connection.in_transaction:
            super().rollback()


def use_one_trip_cursors(dbapi_connection: Any) -> None:
    """Make a freshly connected adapter hand out `OneTripCursor`s (the pool's connect event).
    The adapter class takes no cursor class per instance, and the two classes share their
    layout, so the instance changes class."""
    if type(dbapi_connection) is AsyncAdapt_aiosqlite_connection:
        dbapi_connection.__class__ = OneTripConnection
