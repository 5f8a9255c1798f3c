"""Compiled forms of the named statements for storage/driver_sql.py: each statement compiled
once per dialect (and per length of its IN lists, or per row count) to the SQL SQLAlchemy
would send, the order of its positional values and the conversions SQLAlchemy would apply."""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine.interfaces import Dialect
from sqlalchemy.sql.compiler import SQLCompiler

Row = dict[str, Any]
_MOST_FORMS = 256
"""Compiled forms kept per statement (one per length of its IN lists, or per row count)."""

_MULTI_ROW: dict[tuple[int, int, tuple[str, ...]], sa.Insert] = {}


def multi_row(statement: sa.Insert, count: int, keys: tuple[str, ...]) -> sa.Insert:
    key = (id(statement), count, keys)
    many = _MULTI_ROW.get(key)
    if many is None:
        table = statement.table
        assert isinstance(table, sa.Table)
        rows = [
            {name: sa.bindparam(f"{name}_{index}", type_=table.c[name].type) for name in keys}
            for index in range(count)
        ]
        many = statement.values(rows)
        if len(_MULTI_ROW) < _MOST_FORMS:
            _MULTI_ROW[key] = many
    return many


@dataclass(frozen=True, slots=True)
class Form:
    """One statement compiled for one dialect and one length of each IN list."""

    sql: str
    pick: Callable[[Mapping[str, Any]], Any]
    """The positional values from a dict of all values, in order."""
    width: int
    constants: Mapping[str, Any]
    """Values compiled into the statement (literals such as `state = 0`)."""
    expanded: Mapping[str, Sequence[str]]
    """An IN list's name -> the names of its values, one per element."""
    processors: tuple[tuple[int, Callable[[Any], Any]], ...]
    keys: tuple[str, ...]
    """Result column names, as SQLAlchemy keys its rows."""
    results: tuple[tuple[str, Callable[[Any], Any]], ...]

    def arguments(self, values: Mapping[str, Any]) -> Sequence[Any]:
        if self.constants or self.expanded:
            values = {**self.constants, **values}
            for name, names in self.expanded.items():
                values.update(zip(names, values[name], strict=True))
        if self.width == 0:
            return ()
        picked = self.pick(values)
        arguments = [picked] if self.width == 1 else list(picked)
        for position, process in self.processors:
            arguments[position] = process(arguments[position])
        return arguments

    def row(self, values: Sequence[Any]) -> Row:
        row = dict(zip(self.keys, values, strict=True))
        for key, process in self.results:
            row[key] = process(row[key])
        return row


class Prepared:
    """A named Core statement and its compiled forms, per dialect and IN-list lengths."""

    def __init__(self, statement: sa.Executable) -> None:
        self.statement = statement
        self._in_lists: dict[str, tuple[str, ...]] = {}
        self._forms: dict[tuple[Any, ...], Form] = {}

    def form(self, dialect: Dialect, values: Mapping[str, Any], columns: tuple[str, ...] | None) -> Form:
        in_lists = self._in_lists.get(dialect.name, ())
        key = (dialect.name, columns, *(len(values[name]) for name in in_lists))
        form = self._forms.get(key)
        if form is None:
            form = self._compile(dialect, values, columns)
            if tuple(form.expanded) != in_lists:  # learnt at the first compile for the dialect
                self._in_lists[dialect.name] = tuple(form.expanded)
                key = (dialect.name, columns, *(len(values[name]) for name in form.expanded))
            if len(self._forms) < _MOST_FORMS:
                self._forms[key] = form
        return form

    def _compile(self, dialect: Dialect, values: Mapping[str, Any], columns: tuple[str, ...] | None) -> Form:
        statement = self.statement
        assert isinstance(statement, sa.ClauseElement)
        compiled = statement.compile(dialect=dialect, column_keys=None if columns is None else list(columns))
        assert isinstance(compiled, SQLCompiler)
        state = compiled.construct_expanded_state(dict(values))
        order = tuple(state.positiontup or ())
        expansion = state.parameter_expansion
        given = set(values) | {name for names in expansion.values() for name in names}
        types = {
            name: bind.type
            for original, bind in compiled.binds.items()
            for name in expansion.get(original, [original])
        }
        processors = []
        for position, name in enumerate(order):
            process = types[name].dialect_impl(dialect).bind_processor(dialect)
            if process is not None:
                processors.append((position, process))
        keys, results = _result_columns(self.statement, dialect)
        return Form(
            state.statement,
            operator.itemgetter(*order) if order else _nothing,
            len(order),
            {name: state.parameters[name] for name in order if name not in given},
            {name: tuple(names) for name, names in expansion.items()},
            tuple(processors),
            keys,
            results,
        )


def _nothing(_values: Mapping[str, Any]) -> tuple[()]:
    return ()


def _result_columns(
    statement: sa.Executable, dialect: Dialect
) -> tuple[tuple[str, ...], tuple[tuple[str, Callable[[Any], Any]], ...]]:
    columns = list(statement.exported_columns) if isinstance(statement, sa.ReturnsRows) else []
    keys = tuple(column.key or f"column_{index}" for index, column in enumerate(columns))
    results = []
    for key, column in zip(keys, columns, strict=True):
        process = column.type.dialect_impl(dialect).result_processor(dialect, None)
        if process is not None:
            results.append((key, process))
    return keys, tuple(results)


_PREPARED: dict[int, Prepared] = {}
_MOST_STATEMENTS = 1024


def prepared(statement: sa.Executable) -> Prepared:
    """Statements are module constants (or cached per shape): known by identity."""
    prepared = _PREPARED.get(id(statement))
    if prepared is None or prepared.statement is not statement:
        prepared = Prepared(statement)
        if len(_PREPARED) < _MOST_STATEMENTS:
            _PREPARED[id(statement)] = prepared
    return prepared
