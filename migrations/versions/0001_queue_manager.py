"""Queue manager, queues, messages, transactions and cursors.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute(sa.schema.CreateSequence(sa.Sequence("message_counter")))
    op.create_table(
        "queue_manager",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("guid", sa.String(36), nullable=False),
        sa.Column("quota_kb", sa.BigInteger, nullable=False),
        sa.Column("throttled", sa.Boolean, nullable=False),
        sa.Column("counter", sa.BigInteger, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_queue_manager"),
    )
    op.create_table(
        "queues",
        sa.Column("id", sa.Integer, nullable=False),
        sa.Column("path_key", sa.String(300), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("journal_of", sa.Integer, nullable=True),
        sa.Column("label", sa.String(124), nullable=False),
        sa.Column("transactional", sa.Boolean, nullable=False),
        sa.Column("quota_kb", sa.BigInteger, nullable=False),
        sa.Column("journal", sa.Boolean, nullable=False),
        sa.Column("journal_quota_kb", sa.BigInteger, nullable=False),
        sa.Column("base_priority", sa.Integer, nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("modified_at", sa.BigInteger, nullable=False),
        sa.Column("message_count", sa.BigInteger, nullable=False),
        sa.Column("byte_count", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_queues"),
        sa.UniqueConstraint("path_key", name="uq_queues_path_key"),
        sa.ForeignKeyConstraint(
            ["journal_of"], ["queues.id"], name="fk_queues_journal_of_queues", ondelete="CASCADE"
        ),
    )
    op.create_table(
        "messages",
        sa.Column("lookup_id", sa.BigInteger, nullable=False, autoincrement=False),
        sa.Column("queue_id", sa.Integer, nullable=False),
        sa.Column("state", sa.SmallInteger, nullable=False),
        sa.Column("transaction_id", sa.String(64), nullable=True),
        sa.Column("txn_op", sa.SmallInteger, nullable=True),
        sa.Column("lock_tag", sa.String(64), nullable=True),
        sa.Column("lock_expires_at", sa.BigInteger, nullable=True),
        sa.Column("purge_pending", sa.Boolean, nullable=False),
        sa.Column("message_id", sa.String(100), nullable=False),
        sa.Column("correlation_id", sa.LargeBinary(20), nullable=True),
        sa.Column("label", sa.String(250), nullable=False),
        sa.Column("body", sa.LargeBinary, nullable=False),
        sa.Column("body_size", sa.BigInteger, nullable=False),
        sa.Column("body_type", sa.Integer, nullable=False),
        sa.Column("priority", sa.SmallInteger, nullable=False),
        sa.Column("message_class", sa.Integer, nullable=False),
        sa.Column("app_specific", sa.BigInteger, nullable=False),
        sa.Column("extension", sa.LargeBinary, nullable=False),
        sa.Column("response_queue", sa.Text, nullable=True),
        sa.Column("admin_queue", sa.Text, nullable=True),
        sa.Column("acknowledge", sa.SmallInteger, nullable=False),
        sa.Column("journal", sa.SmallInteger, nullable=False),
        sa.Column("delivery", sa.SmallInteger, nullable=False),
        sa.Column("ttbr_seconds", sa.BigInteger, nullable=False),
        sa.Column("ttrq_seconds", sa.BigInteger, nullable=False),
        sa.Column("sent_time", sa.BigInteger, nullable=False),
        sa.Column("arrived_time", sa.BigInteger, nullable=False),
        sa.Column("source_machine", sa.String(36), nullable=False),
        sa.Column("ttbr_deadline", sa.BigInteger, nullable=True),
        sa.Column("ttrq_deadline", sa.BigInteger, nullable=True),
        sa.Column("first_in_xact", sa.Boolean, nullable=False),
        sa.Column("last_in_xact", sa.Boolean, nullable=False),
        sa.Column("abort_count", sa.Integer, nullable=False),
        sa.Column("destination_queue", sa.Text, nullable=True),
        sa.PrimaryKeyConstraint("lookup_id", name="pk_messages"),
        sa.ForeignKeyConstraint(
            ["queue_id"], ["queues.id"], name="fk_messages_queue_id_queues", ondelete="CASCADE"
        ),
    )
    op.create_index("ix_messages_receive_order", "messages", ["queue_id", "state", "lookup_id"])
    op.create_index("ix_messages_ttbr_deadline", "messages", ["ttbr_deadline"])
    op.create_index("ix_messages_message_id", "messages", ["message_id"])
    op.create_index("ix_messages_correlation_id", "messages", ["correlation_id"])
    op.create_index("ix_messages_transaction_id", "messages", ["transaction_id"])
    op.create_index("ix_messages_lock_expires_at", "messages", ["lock_expires_at"])
    op.create_table(
        "transactions",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("created_at", sa.BigInteger, nullable=False),
        sa.Column("expires_at", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_transactions"),
    )
    op.create_index("ix_transactions_expires_at", "transactions", ["expires_at"])
    op.create_table(
        "cursors",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("queue_id", sa.Integer, nullable=False),
        sa.Column("place", sa.SmallInteger, nullable=False),
        sa.Column("position", sa.BigInteger, nullable=False),
        sa.Column("expires_at", sa.BigInteger, nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_cursors"),
        sa.ForeignKeyConstraint(
            ["queue_id"], ["queues.id"], name="fk_cursors_queue_id_queues", ondelete="CASCADE"
        ),
    )
    op.create_index("ix_cursors_expires_at", "cursors", ["expires_at"])


def downgrade() -> None:
    op.drop_table("cursors")
    op.drop_table("transactions")
    op.drop_table("messages")
    op.drop_table("queues")
    op.drop_table("queue_manager")
    if op.get_bind().dialect.name == "postgresql":
        op.execute(sa.schema.DropSequence(sa.Sequence("message_counter")))
