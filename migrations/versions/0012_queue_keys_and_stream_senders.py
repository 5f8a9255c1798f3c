"""Queue keys folded in ASCII only; incoming streams counted per sender.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-27

The second migration of the srmp branch (its first, 0009, was merged before this one was
written): the lead re-numbers it when merging.

`queues.path_key` is recomputed with ASCII-only case folding (qm.paths.ascii_fold), as Windows
compares queue names: Unicode folding made the Kelvin sign alias `k` and `ß` alias `ss`.
Keys that were distinct under Unicode folding stay distinct under ASCII folding. The rendering
of a path below is qm.paths.QueuePath.pathname as of this revision, copied so that later
changes of the code do not change what this migration does.

`srmp_streams.sender` (nullable, indexed; with an index on `updated_at` for forgetting idle
streams) is the stream ID up to its `\\`, lower case (qm.streams.stream_sender), filled in
for the existing rows.
"""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _pathname(kind: str, name: str, journal: bool) -> str:
    suffix = ";journal" if journal else ""
    if kind == "outgoing":
        return f"DIRECT={name}"
    if kind == "system":
        return f"system$;{name}"
    if kind == "private":
        return f"private$\\{name}{suffix}"
    return f"{name}{suffix}"


def _rekey(fold: Callable[[str], str]) -> None:
    connection = op.get_bind()
    found = connection.execute(sa.text("SELECT id, kind, name, journal_of, path_key FROM queues")).all()
    for row in found:
        key = fold(_pathname(row.kind, row.name, row.journal_of is not None))
        if key != row.path_key:
            connection.execute(
                sa.text("UPDATE queues SET path_key = :key WHERE id = :id"), {"key": key, "id": row.id}
            )


def upgrade() -> None:
    _rekey(lambda text: text.translate(_ASCII_LOWER))
    op.add_column("srmp_streams", sa.Column("sender", sa.String(200), nullable=True))
    op.create_index("ix_srmp_streams_sender", "srmp_streams", ["sender"])
    op.create_index("ix_srmp_streams_updated_at", "srmp_streams", ["updated_at"])
    connection = op.get_bind()
    for (stream_id,) in connection.execute(sa.text("SELECT stream_id FROM srmp_streams")).all():
        connection.execute(
            sa.text("UPDATE srmp_streams SET sender = :sender WHERE stream_id = :id"),
            {"sender": stream_id.partition("\\")[0].lower(), "id": stream_id},
        )


def downgrade() -> None:
    op.drop_index("ix_srmp_streams_updated_at", "srmp_streams")
    op.drop_index("ix_srmp_streams_sender", "srmp_streams")
    with op.batch_alter_table("srmp_streams") as batch:
        batch.drop_column("sender")
    _rekey(str.casefold)
