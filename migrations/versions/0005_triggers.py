"""Triggers, rules, their attachments, the invocation log and per-trigger leases.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "triggers",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("name", sa.String(124), nullable=False),
        sa.Column("queue_id", sa.Integer, nullable=False),
        sa.Column("queue", sa.String(300), nullable=False),
        sa.Column("enabled", sa.Boolean, nullable=False),
        sa.Column("serialized", sa.Boolean, nullable=False),
        sa.Column("processing", sa.String(32), nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("modified_at", sa.BigInteger, nullable=False),
        sa.ForeignKeyConstraint(
            ["queue_id"], ["queues.id"], name="fk_triggers_queue_id_queues", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_triggers"),
        sa.UniqueConstraint("name", name="uq_triggers_name"),
    )
    op.create_index("ix_triggers_queue_id", "triggers", ["queue_id"])
    op.create_table(
        "trigger_rules",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column("name", sa.String(124), nullable=False),
        sa.Column("description", sa.Text, nullable=False),
        sa.Column("conditions", sa.Text, nullable=False),
        sa.Column("action", sa.Text, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("modified_at", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_trigger_rules"),
        sa.UniqueConstraint("name", name="uq_trigger_rules_name"),
    )
    op.create_table(
        "trigger_attachments",
        sa.Column("trigger_id", sa.String(36), nullable=False),
        sa.Column("rule_id", sa.String(36), nullable=False),
        sa.Column("position", sa.Integer, nullable=False),
        sa.ForeignKeyConstraint(
            ["trigger_id"],
            ["triggers.id"],
            name="fk_trigger_attachments_trigger_id_triggers",
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["rule_id"],
            ["trigger_rules.id"],
            name="fk_trigger_attachments_rule_id_trigger_rules",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("trigger_id", "rule_id", name="pk_trigger_attachments"),
    )
    op.create_table(
        "trigger_invocations",
        sa.Column("id", sa.Integer, nullable=False),
        sa.Column("trigger_id", sa.String(36), nullable=False),
        sa.Column("rule_id", sa.String(36), nullable=False),
        sa.Column("rule_name", sa.String(124), nullable=False),
        sa.Column("lookup_id", sa.BigInteger, nullable=False),
        sa.Column("message_id", sa.String(100), nullable=False),
        sa.Column("at", sa.BigInteger, nullable=False),
        sa.Column("outcome", sa.String(16), nullable=False),
        sa.Column("duration_ms", sa.Float, nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("error", sa.Text, nullable=True),
        sa.ForeignKeyConstraint(
            ["trigger_id"],
            ["triggers.id"],
            name="fk_trigger_invocations_trigger_id_triggers",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name="pk_trigger_invocations"),
    )
    op.create_index("ix_trigger_invocations_trigger_id_id", "trigger_invocations", ["trigger_id", "id"])
    op.create_table(
        "trigger_leases",
        sa.Column("trigger_id", sa.String(36), nullable=False),
        sa.Column("holder", sa.String(64), nullable=False),
        sa.Column("expires_at", sa.BigInteger, nullable=False),
        sa.ForeignKeyConstraint(
            ["trigger_id"], ["triggers.id"], name="fk_trigger_leases_trigger_id_triggers", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("trigger_id", name="pk_trigger_leases"),
    )


def downgrade() -> None:
    op.drop_table("trigger_leases")
    op.drop_table("trigger_invocations")
    op.drop_table("trigger_attachments")
    op.drop_table("trigger_rules")
    op.drop_index("ix_triggers_queue_id", table_name="triggers")
    op.drop_table("triggers")
