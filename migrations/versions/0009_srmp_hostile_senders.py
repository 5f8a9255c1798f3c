"""Duplicate keys by source queue manager, destination queue and message ID.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-27

`received_message_ids.message_id` now holds qm.rules.duplicate_key (`<source QM>/<queue id>/
<message ID>`), up to about 100 characters: widened to 200. The rows remembered before hold a
bare message ID that no new key can match, so they are deleted (they would expire within 30
minutes anyway; a resend of a message stored in the last minutes before the upgrade may be
stored twice). The table is not read by the export view.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(sa.text("DELETE FROM received_message_ids"))
    with op.batch_alter_table("received_message_ids") as batch:
        batch.alter_column("message_id", type_=sa.String(200), existing_nullable=False)


def downgrade() -> None:
    op.execute(sa.text("DELETE FROM received_message_ids"))
    with op.batch_alter_table("received_message_ids") as batch:
        batch.alter_column("message_id", type_=sa.String(100), existing_nullable=False)
