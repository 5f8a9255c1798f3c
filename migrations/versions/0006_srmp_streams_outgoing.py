"""SRMP stream state and outgoing queues.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from migrations.export_view import export_view_set_aside

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "srmp_streams",
        sa.Column("stream_id", sa.String(200), nullable=False),
        sa.Column("last_ordinal", sa.BigInteger, nullable=False),
        sa.Column("acknowledged_ordinal", sa.BigInteger, nullable=False),
        sa.Column("send_receipts_to", sa.Text, nullable=False),
        sa.Column("destination", sa.Text, nullable=False),
        sa.Column("first_unacknowledged_at", sa.BigInteger, nullable=True),
        sa.Column("receipt_due_at", sa.BigInteger, nullable=True),
        sa.Column("receipt_attempts", sa.Integer, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("stream_id", name="pk_srmp_streams"),
    )
    op.create_index("ix_srmp_streams_receipt_due_at", "srmp_streams", ["receipt_due_at"])
    op.create_table(
        "outgoing_queues",
        sa.Column("queue_id", sa.Integer, nullable=False),
        sa.Column("url", sa.Text, nullable=False),
        sa.Column("paused", sa.Boolean, nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False),
        sa.Column("next_attempt_at", sa.BigInteger, nullable=False),
        sa.Column("last_error", sa.Text, nullable=True),
        sa.Column("last_attempt_at", sa.BigInteger, nullable=True),
        sa.Column("delivered_count", sa.BigInteger, nullable=False),
        sa.ForeignKeyConstraint(
            ["queue_id"], ["queues.id"], name="fk_outgoing_queues_queue_id_queues", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("queue_id", name="pk_outgoing_queues"),
    )
    op.create_table(
        "outgoing_streams",
        sa.Column("queue_id", sa.Integer, nullable=False),
        sa.Column("stream_id", sa.String(200), nullable=False),
        sa.Column("next_ordinal", sa.BigInteger, nullable=False),
        sa.Column("acknowledged_ordinal", sa.BigInteger, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.ForeignKeyConstraint(
            ["queue_id"], ["queues.id"], name="fk_outgoing_streams_queue_id_queues", ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("queue_id", name="pk_outgoing_streams"),
        sa.UniqueConstraint("stream_id", name="uq_outgoing_streams_stream_id"),
    )
    op.create_table(
        "outgoing_stream_messages",
        sa.Column("lookup_id", sa.BigInteger, nullable=False, autoincrement=False),
        sa.Column("queue_id", sa.Integer, nullable=False),
        sa.Column("ordinal", sa.BigInteger, nullable=False),
        sa.Column("last_sent_at", sa.BigInteger, nullable=False),
        sa.Column("sends", sa.Integer, nullable=False),
        sa.ForeignKeyConstraint(
            ["queue_id"],
            ["queues.id"],
            name="fk_outgoing_stream_messages_queue_id_queues",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("lookup_id", name="pk_outgoing_stream_messages"),
    )
    op.create_index(
        "ix_outgoing_stream_messages_queue_id_ordinal", "outgoing_stream_messages", ["queue_id", "ordinal"]
    )
    op.create_index("ix_messages_ttrq_deadline", "messages", ["ttrq_deadline"])
    # Outgoing queues are named by their URL, longer than a queue name.
    with export_view_set_aside(), op.batch_alter_table("queues") as batch:
        batch.alter_column(
            "name", type_=sa.String(600), existing_type=sa.String(200), existing_nullable=False
        )
        batch.alter_column(
            "path_key", type_=sa.String(700), existing_type=sa.String(300), existing_nullable=False
        )


def downgrade() -> None:
    op.execute("DELETE FROM messages WHERE queue_id IN (SELECT id FROM queues WHERE kind = 'outgoing')")
    op.execute("DELETE FROM queues WHERE kind = 'outgoing'")
    with export_view_set_aside(), op.batch_alter_table("queues") as batch:
        batch.alter_column(
            "path_key", type_=sa.String(300), existing_type=sa.String(700), existing_nullable=False
        )
        batch.alter_column(
            "name", type_=sa.String(200), existing_type=sa.String(600), existing_nullable=False
        )
    op.drop_index("ix_messages_ttrq_deadline", table_name="messages")
    op.drop_table("outgoing_stream_messages")
    op.drop_table("outgoing_streams")
    op.drop_table("outgoing_queues")
    op.drop_table("srmp_streams")
