"""Transactional flag on messages; the first TTBR of each transaction.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("messages") as batch:
        batch.add_column(sa.Column("transactional", sa.Boolean, nullable=False, server_default=sa.false()))
    with op.batch_alter_table("transactions") as batch:
        batch.add_column(sa.Column("first_ttbr_seconds", sa.BigInteger, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("transactions") as batch:
        batch.drop_column("first_ttbr_seconds")
    with op.batch_alter_table("messages") as batch:
        batch.drop_column("transactional")
