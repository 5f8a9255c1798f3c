"""The outbox: messages removed whose consequences are not placed yet (issue 19 item 1).

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-27

A new table only. A receive on PostgreSQL writes a row here, in the statement that takes the
message, where its removal may place a journal copy, an acknowledgment or a final receipt;
storage/outbox.py places them and deletes the row in one transaction.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "outbox",
        sa.Column("lookup_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("reason", sa.String(32), nullable=False),
        sa.Column("departed_at", sa.BigInteger(), nullable=False),
        sa.Column("queue_kind", sa.String(16), nullable=False),
        sa.Column("queue_name", sa.String(600), nullable=False),
        sa.Column("queue_is_journal", sa.Boolean(), nullable=False),
        sa.Column("queue_journal", sa.Boolean(), nullable=False),
        sa.Column("queue_id", sa.Integer(), nullable=False),
        sa.Column("state", sa.SmallInteger(), nullable=False),
        sa.Column("transaction_id", sa.String(64), nullable=True),
        sa.Column("txn_op", sa.SmallInteger(), nullable=True),
        sa.Column("lock_tag", sa.String(64), nullable=True),
        sa.Column("lock_expires_at", sa.BigInteger(), nullable=True),
        sa.Column("purge_pending", sa.Boolean(), nullable=False),
        sa.Column("message_id", sa.String(100), nullable=False),
        sa.Column("correlation_id", sa.LargeBinary(20), nullable=True),
        sa.Column("label", sa.String(250), nullable=False),
        sa.Column("body", sa.LargeBinary(), nullable=False),
        sa.Column("body_size", sa.BigInteger(), nullable=False),
        sa.Column("body_type", sa.Integer(), nullable=False),
        sa.Column("priority", sa.SmallInteger(), nullable=False),
        sa.Column("message_class", sa.Integer(), nullable=False),
        sa.Column("app_specific", sa.BigInteger(), nullable=False),
        sa.Column("extension", sa.LargeBinary(), nullable=False),
        sa.Column("response_queue", sa.Text(), nullable=True),
        sa.Column("admin_queue", sa.Text(), nullable=True),
        sa.Column("acknowledge", sa.SmallInteger(), nullable=False),
        sa.Column("journal", sa.SmallInteger(), nullable=False),
        sa.Column("delivery", sa.SmallInteger(), nullable=False),
        sa.Column("ttbr_seconds", sa.BigInteger(), nullable=False),
        sa.Column("ttrq_seconds", sa.BigInteger(), nullable=False),
        sa.Column("sent_time", sa.BigInteger(), nullable=False),
        sa.Column("arrived_time", sa.BigInteger(), nullable=False),
        sa.Column("source_machine", sa.String(36), nullable=False),
        sa.Column("ttbr_deadline", sa.BigInteger(), nullable=True),
        sa.Column("ttrq_deadline", sa.BigInteger(), nullable=True),
        sa.Column("first_in_xact", sa.Boolean(), nullable=False),
        sa.Column("last_in_xact", sa.Boolean(), nullable=False),
        sa.Column("abort_count", sa.Integer(), nullable=False),
        sa.Column("destination_queue", sa.Text(), nullable=True),
        sa.Column("transactional", sa.Boolean(), nullable=False),
        sa.Column("original_arrived_time", sa.BigInteger(), nullable=True),
        sa.Column("received_time", sa.BigInteger(), nullable=True),
        sa.Column("dead_lettered_time", sa.BigInteger(), nullable=True),
        sa.Column("srmp_stream_id", sa.String(200), nullable=True),
        sa.Column("srmp_ordinal", sa.BigInteger(), nullable=True),
        sa.Column("srmp_source", sa.String(64), nullable=True),
        sa.PrimaryKeyConstraint("lookup_id", name="pk_outbox"),
    )


def downgrade() -> None:
    op.drop_table("outbox")
