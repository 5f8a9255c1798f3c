"""The export view as migrated must be the view pipeline/schemas.py declares."""

from __future__ import annotations

from pipeline.schemas import EXPORT_COLUMNS, EXPORT_VIEW
from tests.pipeline.conftest import Sql

KINDS = {
    "BIGINT": "integer",
    "INTEGER": "integer",
    "SMALLINT": "integer",
    "TEXT": "text",
    "VARCHAR": "text",
    "BYTEA": "bytes",
    "BOOLEAN": "boolean",
}
"""PostgreSQL's column types by the kind schemas.py gives them (times are BIGINT)."""


def test_the_view_has_the_declared_columns_in_order(sql: Sql) -> None:
    columns = sql.columns(EXPORT_VIEW)
    assert [name for name, _ in columns] == [column.name for column in EXPORT_COLUMNS]
    if sql.dialect == "postgresql":  # SQLite views have no declared types to compare
        found = {name: KINDS.get(type_name) for name, type_name in columns}
        declared = {
            column.name: "integer" if column.kind == "time" else column.kind for column in EXPORT_COLUMNS
        }
        assert found == declared
