"""Principals, API keys, grants and the audit log (issue 18).

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-27

New tables only; nothing existing changes, and the export view reads none of them.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "principals",
        sa.Column("name", sa.String(124), nullable=False),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_principals"),
    )
    op.create_table(
        "api_keys",
        sa.Column("key_id", sa.String(32), nullable=False),
        sa.Column("principal", sa.String(124), nullable=False),
        sa.Column("salt", sa.LargeBinary(32), nullable=False),
        sa.Column("hash", sa.LargeBinary(64), nullable=False),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("revoked_at", sa.BigInteger, nullable=True),
        sa.ForeignKeyConstraint(
            ["principal"], ["principals.name"], name="fk_api_keys_principal_principals", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("key_id", name="pk_api_keys"),
    )
    op.create_table(
        "grants",
        sa.Column("id", sa.Integer, nullable=False),
        sa.Column("principal", sa.String(124), nullable=False),
        sa.Column("queue", sa.String(400), nullable=True),
        sa.Column("rights", sa.BigInteger, nullable=False),
        sa.ForeignKeyConstraint(
            ["principal"], ["principals.name"], name="fk_grants_principal_principals", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_grants"),
    )
    op.create_index("ix_grants_principal", "grants", ["principal"])
    op.create_table(
        "audit_log",
        sa.Column("id", sa.Integer, nullable=False),
        sa.Column("at", sa.BigInteger, nullable=False),
        sa.Column("principal", sa.String(124), nullable=False),
        sa.Column("client", sa.String(128), nullable=False),
        sa.Column("action", sa.String(200), nullable=False),
        sa.Column("target", sa.Text, nullable=False),
        sa.Column("outcome", sa.String(64), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_audit_log"),
    )
    op.create_index("ix_audit_log_at", "audit_log", ["at"])


def downgrade() -> None:
    op.drop_index("ix_audit_log_at", table_name="audit_log")
    op.drop_table("audit_log")
    op.drop_index("ix_grants_principal", table_name="grants")
    op.drop_table("grants")
    op.drop_table("api_keys")
    op.drop_table("principals")
