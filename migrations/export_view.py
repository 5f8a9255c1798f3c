"""Setting the export view aside while a migration changes a table it reads.

The export view (migration 0004, `message_export_v1`) reads `queues` and `messages`: neither
database lets a column it uses change type, and SQLite's batch mode rebuilds a table by
dropping it. A migration that does either drops the view and creates it again unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from alembic import op

EXPORT_VIEW = "message_export_v1"


@contextmanager
def export_view_set_aside() -> Iterator[None]:
    """Drop the export view for the block, then create it again from its own definition."""
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        found = bind.execute(
            sa.text("SELECT sql FROM sqlite_master WHERE type = 'view' AND name = :name"),
            {"name": EXPORT_VIEW},
        ).scalar()
        definition = None if found is None else str(found)
    else:
        body = bind.execute(
            sa.text("SELECT pg_get_viewdef(to_regclass(:name), true)"), {"name": EXPORT_VIEW}
        ).scalar()
        definition = None if body is None else f"CREATE VIEW {EXPORT_VIEW} AS {body}"
    if definition is not None:
        op.execute(f"DROP VIEW {EXPORT_VIEW}")
    yield
    if definition is not None:
        op.execute(definition)
