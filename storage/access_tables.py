"""The access tables (docs/security.md): principals, their API keys and client certificates,
their grants, queue owners and the audit log. Part of storage.tables' `metadata`."""

from __future__ import annotations

import sqlalchemy as sa

from storage.tables import metadata

principals = sa.Table(
    "principals",
    metadata,
    sa.Column("name", sa.String(124), primary_key=True),
    sa.Column("description", sa.Text, nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
)
"""Who may be given rights: API key holders, and the built-in anonymous callers."""

api_keys = sa.Table(
    "api_keys",
    metadata,
    sa.Column("key_id", sa.String(32), primary_key=True),
    sa.Column(
        "principal", sa.String(124), sa.ForeignKey("principals.name", ondelete="CASCADE"), nullable=False
    ),
    sa.Column("salt", sa.LargeBinary(32), nullable=False),
    sa.Column("hash", sa.LargeBinary(64), nullable=False),
    sa.Column("description", sa.Text, nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
    sa.Column("revoked_at", sa.BigInteger, nullable=True),
)
"""Only a slow salted hash of each key's secret is kept (scrypt)."""

client_certificates = sa.Table(
    "client_certificates",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("identity", sa.String(64), nullable=False, unique=True),
    sa.Column("subject", sa.Text, nullable=False),
    sa.Column("issuer", sa.Text, nullable=False),
    sa.Column(
        "principal", sa.String(124), sa.ForeignKey("principals.name", ondelete="CASCADE"), nullable=False
    ),
    sa.Column("description", sa.Text, nullable=False),
    sa.Column("created_at", sa.BigInteger, nullable=False),
)
"""Client certificates (subject and issuer) that prove a principal; `identity` is the SHA-256
of the two, unique and short enough for an index whatever the names' length."""

grants = sa.Table(
    "grants",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column(
        "principal", sa.String(124), sa.ForeignKey("principals.name", ondelete="CASCADE"), nullable=False
    ),
    sa.Column("queue", sa.String(400), nullable=True),
    sa.Column("rights", sa.BigInteger, nullable=False),
    sa.Column("exact", sa.Boolean, nullable=False, server_default=sa.false()),
    sa.Index("ix_grants_principal", "principal"),
)
"""Rights (qm.rights) of a principal on the queue manager (queue NULL) or a queue path pattern;
`exact`: on exactly that queue's path, its `*` a character of the name (migration 0015)."""

queue_owners = sa.Table(
    "queue_owners",
    metadata,
    sa.Column(
        "queue_id",
        sa.Integer,
        sa.ForeignKey("queues.id", ondelete="CASCADE"),
        primary_key=True,
        autoincrement=False,
    ),
    sa.Column(
        "principal", sa.String(124), sa.ForeignKey("principals.name", ondelete="CASCADE"), nullable=False
    ),
    sa.Index("ix_queue_owners_principal", "principal"),
)
"""Who owns each queue: its creator, or who took ownership since. No row: no owner (created
without credentials or before migration 0015)."""

audit_log = sa.Table(
    "audit_log",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True),
    sa.Column("at", sa.BigInteger, nullable=False),
    sa.Column("principal", sa.String(124), nullable=False),
    sa.Column("client", sa.String(128), nullable=False),
    sa.Column("action", sa.String(200), nullable=False),
    sa.Column("target", sa.Text, nullable=False),
    sa.Column("outcome", sa.String(64), nullable=False),
    sa.Index("ix_audit_log_at", "at"),
)
"""Changes of state that are not message traffic, who asked and what came of it."""
