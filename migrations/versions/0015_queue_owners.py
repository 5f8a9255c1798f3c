"""Queue owners, and grants on exactly one queue's path (issue 18 item 2).

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-27

`queue_owners` records the principal that owns each queue (its creator, or whoever took
ownership since): it goes with its queue and with its principal. Queues that exist before
this revision have no row, so no owner: who created them was not recorded, and guessing it
from the grants could hand a queue to the wrong principal.

`grants.exact` marks a grant on exactly one queue's path, whose `*` is then a character of
the name rather than a wildcard: a queue may be named `private$/a*`, and its owner's grant must
not reach `private$/abc`. Existing grants stay patterns (false), as they were written.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "queue_owners",
        sa.Column("queue_id", sa.Integer, nullable=False, autoincrement=False),
        sa.Column("principal", sa.String(124), nullable=False),
        sa.ForeignKeyConstraint(
            ["queue_id"], ["queues.id"], name="fk_queue_owners_queue_id_queues", ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["principal"],
            ["principals.name"],
            name="fk_queue_owners_principal_principals",
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("queue_id", name="pk_queue_owners"),
    )
    op.create_index("ix_queue_owners_principal", "queue_owners", ["principal"])
    with op.batch_alter_table("grants") as batch:
        batch.add_column(sa.Column("exact", sa.Boolean, nullable=False, server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("grants") as batch:
        batch.drop_column("exact")
    op.drop_index("ix_queue_owners_principal", table_name="queue_owners")
    op.drop_table("queue_owners")
