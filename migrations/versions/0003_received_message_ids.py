"""Received message IDs, for duplicate elimination of SRMP messages.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "received_message_ids",
        sa.Column("message_id", sa.String(100), nullable=False),
        sa.Column("received_at", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("message_id", name="pk_received_message_ids"),
    )
    op.create_index("ix_received_message_ids_received_at", "received_message_ids", ["received_at"])


def downgrade() -> None:
    op.drop_table("received_message_ids")
