"""Outgoing queues counted per anonymous SRMP sender (issue 18 item 7).

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-27

`messages.srmp_source`: the source address (IPv6: its /64) of the anonymous SRMP sender of a
message, kept by its copies and acknowledgments. `outgoing_queues.made_for` (indexed): the
source an outgoing queue was made for by the acknowledgments or final receipts of such a
message, counted against the per-source and total limits; existing queues count for no one.

Adding nullable columns is a plain ALTER TABLE on both databases (SQLite does not rebuild the
table), so the export view (0004) stays; dropping the message column on SQLite rebuilds
`messages`, so the view is set aside for that, as 0007 does.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from migrations.export_view import export_view_set_aside

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("messages", sa.Column("srmp_source", sa.String(64), nullable=True))
    op.add_column("outgoing_queues", sa.Column("made_for", sa.String(64), nullable=True))
    op.create_index("ix_outgoing_queues_made_for", "outgoing_queues", ["made_for"])


def downgrade() -> None:
    op.drop_index("ix_outgoing_queues_made_for", table_name="outgoing_queues")
    with op.batch_alter_table("outgoing_queues") as batch:
        batch.drop_column("made_for")
    with export_view_set_aside(), op.batch_alter_table("messages") as batch:
        batch.drop_column("srmp_source")
