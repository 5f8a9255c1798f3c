"""Final receipts of transactional SRMP messages (reference §4.4).

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-24

`messages.srmp_stream_id` / `srmp_ordinal`: the incoming SRMP stream a message arrived on and
its ordinal there, so that its removal can report its outcome to the stream's sender; on a
final receipt waiting in an outgoing queue, the stream it reports on and the ordinal its
`<streamReceipt>` covers. `outgoing_stream_messages.acknowledged_at`: when a stream receipt
covered a sent message that stays for its final receipt (it asked for MQMSG_DEADLETTER).

Adding nullable columns is a plain ALTER TABLE on both databases (SQLite does not rebuild the
table), so the export view (0004) stays. Dropping them on SQLite goes through batch mode, which
rebuilds `messages`: the view is set aside for that, as 0006 does.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from migrations.export_view import export_view_set_aside

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("messages", sa.Column("srmp_stream_id", sa.String(200), nullable=True))
    op.add_column("messages", sa.Column("srmp_ordinal", sa.BigInteger, nullable=True))
    op.add_column("outgoing_stream_messages", sa.Column("acknowledged_at", sa.BigInteger, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("outgoing_stream_messages") as batch:
        batch.drop_column("acknowledged_at")
    with export_view_set_aside(), op.batch_alter_table("messages") as batch:
        batch.drop_column("srmp_ordinal")
        batch.drop_column("srmp_stream_id")
