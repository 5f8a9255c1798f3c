"""The Message Queuing Triggers tables (reference §9): triggers, rules, which rules each trigger
runs, the invocation log and the processes' leases. Part of storage.tables' `metadata`."""

from __future__ import annotations

import sqlalchemy as sa

from storage.tables import metadata

triggers = sa.Table(
    "triggers",
    metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("name", sa.String(124), nullable=False, unique=True),
    sa.Column("queue_id", sa.Integer, sa.ForeignKey("queues.id", ondelete="CASCADE"), nullable=False),
    sa.Column("queue", sa.String(300), nullable=False),
    sa.Column("enabled", sa.Boolean, nullable=False),
    sa.Column("serialized", sa.Boolean, nullable=False),
    sa.Column("processing", sa.String(32), nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("modified_at", sa.BigInteger, nullable=False),
    sa.Index("ix_triggers_queue_id", "queue_id"),
)

trigger_rules = sa.Table(
    "trigger_rules",
    metadata,
    sa.Column("id", sa.String(36), primary_key=True),
    sa.Column("name", sa.String(124), nullable=False, unique=True),
    sa.Column("description", sa.Text, nullable=False),
    sa.Column("conditions", sa.Text, nullable=False),
    sa.Column("action", sa.Text, nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("modified_at", sa.BigInteger, nullable=False),
)
"""Rules; conditions and action as JSON documents (read and written only by the store)."""

trigger_attachments = sa.Table(
    "trigger_attachments",
    metadata,
    sa.Column(
        "trigger_id", sa.String(36), sa.ForeignKey("triggers.id", ondelete="CASCADE"), primary_key=True
    ),
    sa.Column(
        "rule_id", sa.String(36), sa.ForeignKey("trigger_rules.id", ondelete="CASCADE"), primary_key=True
    ),
    sa.Column("position", sa.Integer, nullable=False),
)

trigger_invocations = sa.Table(
    "trigger_invocations",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("trigger_id", sa.String(36), sa.ForeignKey("triggers.id", ondelete="CASCADE"), nullable=False),
    sa.Column("rule_id", sa.String(36), nullable=False),
    sa.Column("rule_name", sa.String(124), nullable=False),
    sa.Column("lookup_id", sa.BigInteger, nullable=False),
    sa.Column("message_id", sa.String(100), nullable=False),
    sa.Column("at", sa.BigInteger, nullable=False),
    sa.Column("outcome", sa.String(16), nullable=False),
    sa.Column("duration_ms", sa.Float, nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("error", sa.Text, nullable=True),
    sa.Index("ix_trigger_invocations_trigger_id_id", "trigger_id", "id"),
)

trigger_leases = sa.Table(
    "trigger_leases",
    metadata,
    sa.Column(
        "trigger_id", sa.String(36), sa.ForeignKey("triggers.id", ondelete="CASCADE"), primary_key=True
    ),
    sa.Column("holder", sa.String(64), nullable=False),
    sa.Column("expires_at", sa.BigInteger, nullable=False),
)
"""Which gateway process runs each trigger (several processes on one PostgreSQL)."""
