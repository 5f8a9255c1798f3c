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

from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

EXPORT_VIEW = "message_export_v1"


@contextmanager
def _export_view_set_aside() -> Iterator[None]:
    """Drop the export view and create it again unchanged (a copy of 0006's helper: a
    migration does not import another)."""
    bind = op.get_bind()
    if bind.dialect.name == "sqlite":
        found = bind.execute(
            sa.text("SELECT sql FROM sqlite_master WHERE type = 'view' AND name = :name"),
            {"name": EXPORT_VIEW},
        ).scalar()
        definition = None if found is None else str(found)
    else:
        body = bind.execute(
            sa.text("SELECT pg_get_viewdef(to_regclass(:name), true)"), {"name": EXPORT_VIEW}
        ).scalar()
        definition = None if body is None else f"CREATE VIEW {EXPORT_VIEW} AS {body}"
    if definition is not None:
        op.execute(f"DROP VIEW {EXPORT_VIEW}")
    yield
    if definition is not None:
        op.execute(definition)


def upgrade() -> None:
    op.add_column("messages", sa.Column("srmp_stream_id", sa.String(200), nullable=True))
    op.add_column("messages", sa.Column("srmp_ordinal", sa.BigInteger, nullable=True))
    op.add_column("outgoing_stream_messages", sa.Column("acknowledged_at", sa.BigInteger, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("outgoing_stream_messages") as batch:
        batch.drop_column("acknowledged_at")
    with _export_view_set_aside(), op.batch_alter_table("messages") as batch:
        batch.drop_column("srmp_ordinal")
        batch.drop_column("srmp_stream_id")
