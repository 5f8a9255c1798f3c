"""The hot statements run on the driver connection of SQLAlchemy's transaction.

Through SQLAlchemy's execution layer a prebuilt select cost about 215-290 µs of CPU on
PostgreSQL and 245 µs on SQLite (with the one-trip cursor), against about 72 and 75 µs
straight through asyncpg and aiosqlite; a send runs two to six statements, a receive one
to three (PostgreSQL merges some: see statements.QUEUE_ROOM_WITH_COUNTERS and
storage/claims.py). So the named Core statements of `storage/statements.py` are compiled here once per
dialect (and per length of their IN lists) to the SQL SQLAlchemy would send, the order of
their positional values and the type conversions SQLAlchemy would apply, and run on the
driver connection. SQLAlchemy still owns the connection and the transaction: `begin` makes
sure the driver is inside it (asyncpg's adapter would begin lazily, at its first
statement), and commit and rollback go through SQLAlchemy as before.

Errors are raised as SQLAlchemy raises them (`_raise_as_sqlalchemy`), so the seams of
`storage/errors.py` see the same exceptions. A connection that did not come from `begin`
(another driver, or a caller's own connection) runs the statements through SQLAlchemy, and so
does every connection of an engine made with `make_engine(..., driver_sql=False)`
(MSMQGW_DRIVER_SQL=false), or when the SQLAlchemy internals this module uses are not there
(`INTERNALS_PRESENT`, checked at import: an SQLAlchemy release that changed them is slower,
never wrong). tests/contract/test_driver_sql.py runs every statement the store sends here
both ways and compares the rows and the errors.
"""

from __future__ import annotations

import inspect
import logging
import weakref
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.sql.compiler import SQLCompiler

from storage.driver_forms import multi_row as _multi_row
from storage.driver_forms import prepared as _prepared

Row = dict[str, Any]
log = logging.getLogger(__name__)
ENABLED = "msmqgw_driver_sql"
"""Engine execution option: False runs every statement through SQLAlchemy (storage.engine)."""


class _Driver:
    """The driver connection of one transaction: statements in one call each."""

    def __init__(self, driver_connection: Any, adapter: Any) -> None:
        self.connection = driver_connection
        self.adapter = adapter  # SQLAlchemy's DB-API adapter around it

    async def begin(self) -> None:
        raise NotImplementedError

    async def rows(self, sql: str, values: Sequence[Any]) -> Sequence[Sequence[Any]]:
        raise NotImplementedError

    async def many(self, sql: str, values: Sequence[Sequence[Any]]) -> None:
        raise NotImplementedError


class _Asyncpg(_Driver):
    async def begin(self) -> None:
        # SQLAlchemy's adapter begins at its own first statement; begun through the adapter,
        # the transaction is the one SQLAlchemy's commit and rollback end.
        if self.adapter._transaction is None:
            await self.adapter._start_transaction()
        # Both must hold: a driver transaction the adapter does not track would be one that
        # SQLAlchemy's commit leaves open (its commit only ends the adapter's own).
        if self.adapter._transaction is None or not self.connection.is_in_transaction():
            raise RuntimeError("SQLAlchemy's asyncpg adapter did not begin a transaction")

    async def rows(self, sql: str, values: Sequence[Any]) -> Sequence[Sequence[Any]]:
        found: Sequence[Sequence[Any]] = await self.connection.fetch(sql, *values)
        return found

    async def many(self, sql: str, values: Sequence[Sequence[Any]]) -> None:
        await self.connection.executemany(sql, values)


class _Aiosqlite(_Driver):
    async def begin(self) -> None:
        # The engine's begin event left BEGIN to us (storage/engine.py, BEGUN_ON_DRIVER).
        await self.connection.execute_fetchall("BEGIN IMMEDIATE", ())

    async def rows(self, sql: str, values: Sequence[Any]) -> Sequence[Sequence[Any]]:
        found: Sequence[Sequence[Any]] = await self.connection.execute_fetchall(sql, values)
        return found

    async def many(self, sql: str, values: Sequence[Sequence[Any]]) -> None:
        await self.connection.executemany(sql, values)


_DRIVERS: dict[str, type[_Driver]] = {"asyncpg": _Asyncpg, "aiosqlite": _Aiosqlite}
_BEGUN: weakref.WeakKeyDictionary[AsyncConnection, _Driver] = weakref.WeakKeyDictionary()
"""The driver of each connection's transaction under way (set by `begin`). Not in
`connection.info`: that belongs to the pooled connection, outlives the transaction, and
cannot be read once the connection was invalidated."""


async def begin(connection: AsyncConnection) -> None:
    """Inside `connection.begin()`: make sure the driver's transaction has begun (SQLite:
    BEGIN IMMEDIATE, asked for with engine.BEGUN_ON_DRIVER), and run the hot statements of
    this transaction on the driver. `end` when the transaction is over."""
    driver = _driver_of(connection)
    if driver is None:
        return
    await _call(connection, "BEGIN", (), driver.begin())
    _BEGUN[connection] = driver


def internals_present() -> bool:
    """Whether the SQLAlchemy internals this module relies on are there, as 2.1 has them:
    asyncpg's adapter begins its transaction through `_start_transaction` and tracks it in
    `_transaction`; both adapters translate driver errors with `_handle_exception`; a
    connection wraps DB-API errors with `_handle_dbapi_exception`; a compiled statement expands
    IN lists with `construct_expanded_state`."""
    try:
        from sqlalchemy.dialects.postgresql.asyncpg import AsyncAdapt_asyncpg_connection
        from sqlalchemy.dialects.sqlite.aiosqlite import AsyncAdapt_aiosqlite_connection

        parameters = list(inspect.signature(sa.Connection._handle_dbapi_exception).parameters)
        return (
            inspect.iscoroutinefunction(AsyncAdapt_asyncpg_connection._start_transaction)
            and "_transaction" in AsyncAdapt_asyncpg_connection.__slots__
            and callable(AsyncAdapt_asyncpg_connection._handle_exception)
            and callable(AsyncAdapt_aiosqlite_connection._handle_exception)
            and parameters[:6] == ["self", "e", "statement", "parameters", "cursor", "context"]
            and callable(SQLCompiler.construct_expanded_state)
        )
    except (ImportError, AttributeError, TypeError, ValueError):
        return False


INTERNALS_PRESENT = internals_present()
if not INTERNALS_PRESENT:
    log.warning(
        "SQLAlchemy %s: the driver path is off, every statement runs through SQLAlchemy", sa.__version__
    )


def _driver_of(connection: AsyncConnection) -> _Driver | None:
    """The connection's driver connection, or None: a driver this module does not know, the
    driver path switched off for the engine, or SQLAlchemy's internals not as expected."""
    kind = _DRIVERS.get(connection.dialect.driver)
    if kind is None or not INTERNALS_PRESENT:
        return None
    # Checked out: the pooled connection is at hand without a trip through a greenlet
    # (get_raw_connection makes one).
    sync_connection = connection.sync_connection
    assert sync_connection is not None
    if sync_connection.get_execution_options().get(ENABLED) is False:
        return None
    raw = sync_connection.connection
    return kind(raw.driver_connection, raw.dbapi_connection)


async def read(connection: AsyncConnection, statement: sa.Executable, values: Mapping[str, Any]) -> list[Row]:
    """One statement that is its own transaction, on a connection that has begun none:
    straight on the driver, where on PostgreSQL it commits as it runs (no BEGIN and COMMIT
    round trips) and on SQLite it is an implicit read; through SQLAlchemy (another driver, or
    the driver path off), in a transaction committed at once. It used to be left to roll back
    there, so a plain send or receive through SQLAlchemy changed nothing (found by
    tests/contract/test_driver_sql.py, which runs the store with the driver path off)."""
    driver = None if connection.in_transaction() else _driver_of(connection)
    if driver is None:  # through SQLAlchemy, which begins a transaction: the statement's own
        found = await fetch(connection, statement, values)
        await connection.commit()
        return found
    return await _rows(connection, driver, statement, values)


def end(connection: AsyncConnection) -> None:
    _BEGUN.pop(connection, None)


async def execute_text(connection: AsyncConnection, sql: str) -> None:
    """A fixed statement without values (SET LOCAL ...)."""
    driver: _Driver | None = _BEGUN.get(connection)
    if driver is None:
        await connection.exec_driver_sql(sql)
    else:
        await _call(connection, sql, (), driver.rows(sql, ()))


async def fetch(
    connection: AsyncConnection, statement: sa.Executable, values: Mapping[str, Any]
) -> list[Row]:
    """The statement's rows as dicts keyed as SQLAlchemy keys them (none for a statement
    that returns no rows)."""
    driver: _Driver | None = _BEGUN.get(connection)
    if driver is None:  # as the driver path answers: no rows for a statement that returns none
        result = await connection.execute(statement, values)
        return [dict(row) for row in result.mappings()] if result.returns_rows else []
    return await _rows(connection, driver, statement, values)


async def _rows(
    connection: AsyncConnection, driver: _Driver, statement: sa.Executable, values: Mapping[str, Any]
) -> list[Row]:
    form = _prepared(statement).form(connection.dialect, values, None)
    arguments = form.arguments(values)
    found = await _call(connection, form.sql, arguments, driver.rows(form.sql, arguments))
    return [form.row(row) for row in found]


async def scalars(
    connection: AsyncConnection, statement: sa.Executable, values: Mapping[str, Any]
) -> list[Any]:
    """The first column of the statement's rows."""
    driver: _Driver | None = _BEGUN.get(connection)
    if driver is None:
        return list((await connection.execute(statement, values)).scalars())
    form = _prepared(statement).form(connection.dialect, values, None)
    arguments = form.arguments(values)
    found = await _call(connection, form.sql, arguments, driver.rows(form.sql, arguments))
    return [form.row(row)[form.keys[0]] for row in found]


async def execute_many(
    connection: AsyncConnection, statement: sa.Executable, rows: Sequence[Mapping[str, Any]]
) -> None:
    """The statement once per row of values (an INSERT's columns are the first row's keys)."""
    driver: _Driver | None = _BEGUN.get(connection)
    if driver is None:
        await connection.execute(statement, list(rows))
        return
    form = _prepared(statement).form(connection.dialect, rows[0], _columns(statement, rows[0]))
    if len(rows) == 1:  # the drivers' executemany costs more than a plain execute
        arguments = form.arguments(rows[0])
        await _call(connection, form.sql, arguments, driver.rows(form.sql, arguments))
        return
    many = [form.arguments(row) for row in rows]
    await _call(connection, form.sql, many, driver.many(form.sql, many))


async def insert_returning(
    connection: AsyncConnection, statement: sa.Insert, rows: Sequence[Mapping[str, Any]]
) -> list[Row]:
    """An INSERT ... RETURNING of several rows in one statement (as SQLAlchemy's
    "insertmanyvalues" sends it): its VALUES clause has a row of values per row."""
    driver: _Driver | None = _BEGUN.get(connection)
    if driver is None:
        return [dict(row) for row in (await connection.execute(statement, list(rows))).mappings()]
    many = _multi_row(statement, len(rows), tuple(rows[0]))
    return await fetch(connection, many, numbered(rows))


def numbered(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Several rows' values as one statement's: `{key}_{row}`, as a multi-row VALUES names them."""
    return {f"{key}_{index}": value for index, row in enumerate(rows) for key, value in row.items()}


async def _call(connection: AsyncConnection, sql: str, values: Any, call: Any) -> Any:
    try:
        return await call
    except BaseException as error:
        await _raise_as_sqlalchemy(connection, error, sql, values)


async def _raise_as_sqlalchemy(
    connection: AsyncConnection, error: BaseException, sql: str, values: Any
) -> NoReturn:
    """Raise what SQLAlchemy raises when its adapter meets `error` running `sql`: the
    adapter's DB-API error wrapped as sqlalchemy.exc (IntegrityError, OperationalError, ...),
    the connection invalidated and the pool recycled on a disconnect (or on cancellation:
    the connection's state is unknown). Other Python errors pass unchanged, as they do
    through SQLAlchemy. The only place that uses SQLAlchemy's private API for errors."""

    def translate(sync_connection: sa.Connection) -> None:
        dialect = sync_connection.dialect
        adapter: Any = sync_connection.connection.dbapi_connection
        try:
            adapter._handle_exception(error)  # raises the adapter's DB-API error
        except BaseException as dbapi_error:
            if isinstance(dbapi_error, Exception) and not isinstance(dbapi_error, dialect.loaded_dbapi.Error):
                raise
            sync_connection._handle_dbapi_exception(dbapi_error, sql, values, None, None)

    await connection.run_sync(translate)
    raise error  # not reached: translate raises


def _columns(statement: sa.Executable, first: Mapping[str, Any]) -> tuple[str, ...] | None:
    """An INSERT names the columns it is given values for, as SQLAlchemy compiles it."""
    return tuple(first) if isinstance(statement, sa.Insert) else None
