"""The whole schema: `metadata` with every table module imported, as Alembic compares it and
tests create it. Import `metadata` from here, not from storage.tables (which holds only the
message tables until the others are imported)."""

from __future__ import annotations

from storage import access_tables, tables, trigger_tables

TABLE_MODULES = (tables, trigger_tables, access_tables)
"""Imported for the tables they add to `metadata`."""

metadata = tables.metadata
