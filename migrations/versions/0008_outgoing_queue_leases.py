"""Outgoing queue leases: which gateway process sends each outgoing queue.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-24

Two nullable columns on `outgoing_queues`; existing rows start unleased. `outgoing_queues` is
not read by the export view (message_export_v1 reads `queues` and `messages`), so nothing
needs setting aside: on SQLite the upgrade is a plain ALTER TABLE ADD COLUMN, and the
downgrade's batch rebuild touches `outgoing_queues` alone.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("outgoing_queues", sa.Column("owner", sa.String(200), nullable=True))
    op.add_column("outgoing_queues", sa.Column("lease_expires_at", sa.BigInteger, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("outgoing_queues") as batch:
        batch.drop_column("lease_expires_at")
        batch.drop_column("owner")
