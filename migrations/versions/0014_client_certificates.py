"""Client certificates as principals: subject and issuer -> principal (issue 18).

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-27

A new table only; nothing existing changes, and the export view reads none of it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "client_certificates",
        sa.Column("id", sa.Integer, nullable=False),
        sa.Column("identity", sa.String(64), nullable=False),
        sa.Column("subject", sa.Text, nullable=False),
        sa.Column("issuer", sa.Text, nullable=False),
        sa.Column("principal", sa.String(124), nullable=False),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.ForeignKeyConstraint(
            ["principal"],
            ["principals.name"],
            name="fk_client_certificates_principal_principals",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_client_certificates"),
        sa.UniqueConstraint("identity", name="uq_client_certificates_identity"),
    )


def downgrade() -> None:
    op.drop_table("client_certificates")
