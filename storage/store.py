"""SqlStore: the queue manager's store port on SQLAlchemy Core (SQLite and PostgreSQL)."""

from __future__ import annotations

from storage.message_store import MessageStore
from storage.outgoing_store import OutgoingStore
from storage.queue_store import QueueStore
from storage.transaction_store import TransactionStore


class SqlStore(QueueStore, MessageStore, TransactionStore, OutgoingStore):
    """One database, one queue manager. Every public method is one transaction."""
