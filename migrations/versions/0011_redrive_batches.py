"""Redrive batches: the gateway applies staged redrives through its own send path.

Revision ID: 0011
Revises: 0009
Create Date: 2026-11-27

The pipeline stages a batch (its rows in `redrive_staging` and one row here, in one
transaction); the gateway sends each staged dead letter as a new message (quotas, throttle,
wake-ups, a duplicate key from the dead letter's lookup ID), records it in
`redrive_ledger`, takes a live original out of its dead-letter queue, and marks the batch
`applied` or `failed` (with what to do), deleting its staging rows either way.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "redrive_batches",
        sa.Column("batch_id", sa.String(64), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("staged_count", sa.BigInteger, nullable=False),
        sa.Column("resent_count", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("skipped_count", sa.BigInteger, nullable=False, server_default="0"),
        sa.Column("error", sa.Text, nullable=True),
        sa.Column("staged_at", sa.BigInteger, nullable=False),
        sa.Column("finished_at", sa.BigInteger, nullable=True),
        sa.PrimaryKeyConstraint("batch_id", name="pk_redrive_batches"),
    )
    op.create_index("ix_redrive_batches_status", "redrive_batches", ["status"])


def downgrade() -> None:
    op.drop_index("ix_redrive_batches_status", "redrive_batches")
    op.drop_table("redrive_batches")
