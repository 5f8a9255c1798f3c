"""SqlStore: the queue manager's store port on SQLAlchemy Core (SQLite and PostgreSQL)."""

from __future__ import annotations

from storage.message_store import MessageStore
from storage.outgoing_store import OutgoingStore
from storage.queue_store import QueueStore
from storage.transaction_store import TransactionStore
from storage.trigger_store import TriggerStore


class SqlStore(QueueStore, MessageStore, TransactionStore, OutgoingStore, TriggerStore):
    """One database, one queue manager. Every public method is one transaction."""
