"""The outbox keeps arrivals too: its key is the lookup ID and the reason (issue 19 item 1).

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-27

A send on PostgreSQL writes an ARRIVED row for a message whose arrival places something (an
acknowledgment, a computer-journal copy); the message may be received, and its RECEIVED row
written, before that row is placed. Nothing else changes.
"""

from __future__ import annotations

from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("outbox") as batch:
        batch.drop_constraint("pk_outbox", type_="primary")
        batch.create_primary_key("pk_outbox", ["lookup_id", "reason"])


def downgrade() -> None:
    # Where a message has both rows, the arrival's goes (its acknowledgment is lost): the key
    # allows one. The revision before places the remaining ARRIVED rows as any other.
    op.execute(
        "DELETE FROM outbox WHERE reason = 'ARRIVED' AND lookup_id IN"
        " (SELECT lookup_id FROM outbox WHERE reason <> 'ARRIVED')"
    )
    with op.batch_alter_table("outbox") as batch:
        batch.drop_constraint("pk_outbox", type_="primary")
        batch.create_primary_key("pk_outbox", ["lookup_id"])
