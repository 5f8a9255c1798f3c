"""Export view for the pipeline, the times it needs, and its archive and redrive ledgers.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23

`message_export_v1` is the pipeline's only window on messages: one row per message row,
wherever it sits. A queue row's kind and journal link say where that is, so queues added
later (kind 'outgoing') appear with no change here. The view is versioned: a change of
its columns is a new view (`message_export_v2`) next to this one, never an edit of it.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

EXPORT_VIEW = "message_export_v1"

# Times stay integer microseconds since the epoch (UTC), as everywhere in the store.
EXPORT_VIEW_SQL = f"""
CREATE VIEW {EXPORT_VIEW} AS
SELECT
    m.lookup_id AS lookup_id,
    CASE q.kind
        WHEN 'system' THEN 'system$;' || q.name
        WHEN 'private' THEN 'private$\\' || q.name
        ELSE q.name
    END || CASE WHEN q.journal_of IS NULL THEN '' ELSE ';journal' END AS queue,
    CASE
        WHEN q.journal_of IS NOT NULL THEN 'journal'
        WHEN q.kind = 'system' AND q.name IN ('journal', 'deadletter', 'deadxact') THEN q.name
        WHEN q.kind = 'outgoing' THEN 'outgoing'
        ELSE 'queue'
    END AS location,
    m.destination_queue AS original_queue,
    m.message_class AS message_class,
    m.priority AS priority,
    m.message_id AS message_id,
    m.correlation_id AS correlation_id,
    m.label AS label,
    m.body_type AS body_type,
    m.app_specific AS app_specific,
    m.delivery AS delivery,
    m.transactional AS transactional,
    length(m.body) AS body_length,
    m.body AS body,
    m.sent_time AS sent_time,
    COALESCE(m.original_arrived_time, m.arrived_time) AS arrived_time,
    m.arrived_time AS stored_time,
    m.received_time AS received_time,
    m.dead_lettered_time AS dead_lettered_time,
    m.ttbr_seconds AS ttbr_seconds,
    m.ttrq_seconds AS ttrq_seconds,
    m.ttbr_deadline AS ttbr_deadline,
    m.ttrq_deadline AS ttrq_deadline,
    m.source_machine AS source_machine
FROM messages m JOIN queues q ON q.id = m.queue_id
"""


def upgrade() -> None:
    with op.batch_alter_table("messages") as batch:
        batch.add_column(sa.Column("original_arrived_time", sa.BigInteger, nullable=True))
        batch.add_column(sa.Column("received_time", sa.BigInteger, nullable=True))
        batch.add_column(sa.Column("dead_lettered_time", sa.BigInteger, nullable=True))
    op.create_table(
        "archive_runs",
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("cutoff", sa.BigInteger, nullable=False),
        sa.Column("archive_path", sa.Text, nullable=False),
        sa.Column("body_mode", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("row_count", sa.BigInteger, nullable=True),
        sa.Column("checksum", sa.BigInteger, nullable=True),
        sa.Column("started_at", sa.BigInteger, nullable=False),
        sa.Column("finished_at", sa.BigInteger, nullable=True),
        sa.PrimaryKeyConstraint("run_id", name="pk_archive_runs"),
    )
    op.create_table(
        "archive_run_ids",
        sa.Column("run_id", sa.String(64), nullable=False),
        sa.Column("lookup_id", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("run_id", "lookup_id", name="pk_archive_run_ids"),
    )
    op.create_table(
        "redrive_staging",
        sa.Column("batch_id", sa.String(64), nullable=False),
        sa.Column("source_lookup_id", sa.BigInteger, nullable=False),
        sa.Column("target_queue_id", sa.Integer, nullable=False),
        sa.Column("label", sa.String(250), nullable=False),
        sa.Column("body", sa.LargeBinary, nullable=False),
        sa.Column("body_type", sa.Integer, nullable=False),
        sa.Column("priority", sa.SmallInteger, nullable=False),
        sa.Column("correlation_id", sa.LargeBinary(20), nullable=True),
        sa.Column("app_specific", sa.BigInteger, nullable=False),
        sa.Column("delivery", sa.SmallInteger, nullable=False),
        sa.Column("ttbr_seconds", sa.BigInteger, nullable=False),
        sa.Column("ttrq_seconds", sa.BigInteger, nullable=False),
        sa.Column("sent_time", sa.BigInteger, nullable=False),
        sa.Column("source_machine", sa.String(36), nullable=False),
    )
    op.create_index("ix_redrive_staging_batch_id", "redrive_staging", ["batch_id"])
    op.create_table(
        "redrive_ledger",
        sa.Column("source_lookup_id", sa.BigInteger, nullable=False, autoincrement=False),
        sa.Column("batch_id", sa.String(64), nullable=False),
        sa.Column("new_lookup_id", sa.BigInteger, nullable=False),
        sa.Column("target_queue_id", sa.Integer, nullable=False),
        sa.Column("redriven_at", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("source_lookup_id", name="pk_redrive_ledger"),
    )
    op.execute(EXPORT_VIEW_SQL)


def downgrade() -> None:
    op.execute(f"DROP VIEW {EXPORT_VIEW}")
    op.drop_table("redrive_ledger")
    op.drop_table("redrive_staging")
    op.drop_table("archive_run_ids")
    op.drop_table("archive_runs")
    with op.batch_alter_table("messages") as batch:
        batch.drop_column("dead_lettered_time")
        batch.drop_column("received_time")
        batch.drop_column("original_arrived_time")
