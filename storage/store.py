"""SqlStore: the queue manager's store port (qm.store.Store) on SQLAlchemy Core, SQLite and
PostgreSQL, composed of one repository per concern over one shared Database (docs/store.md)."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from qm.disposal import DisposalPolicy
from qm.wakeups import WakeUps
from storage.access import SqlAccess
from storage.counters import Counters
from storage.cursors import SqlCursors
from storage.database import Database
from storage.group_commit import GroupCommitConfig
from storage.housekeeping import Housekeeping
from storage.messages import SqlMessages
from storage.observation import SqlObservation
from storage.outgoing import SqlOutgoing
from storage.queues import SqlQueues
from storage.receiving import Receiver
from storage.redrives import SqlRedrives
from storage.removal import Removal
from storage.sending import Sender
from storage.streams import SqlStreams
from storage.transaction_ends import TransactionEnds
from storage.transactions import SqlTransactions
from storage.triggers import SqlTriggers


class SqlStore:
    """One database, one queue manager. Every public method of a repository is one transaction
    (or one statement that is its own)."""

    def __init__(self, engine: AsyncEngine, group_commit: GroupCommitConfig | None = None) -> None:
        config = group_commit or GroupCommitConfig()
        self.db = Database(engine)
        ends = TransactionEnds(self.db)
        self.streams = SqlStreams(self.db)
        self.messages = SqlMessages(
            self.db, Sender(self.db, self.streams, config), Receiver(self.db, config), Counters(self.db)
        )
        self.queues = SqlQueues(self.db, Removal(self.db, ends))
        self.transactions = SqlTransactions(self.db, ends)
        self.cursors = SqlCursors(self.db)
        self.housekeeping = Housekeeping(self.db, ends)
        self.outgoing = SqlOutgoing(self.db)
        self.triggers = SqlTriggers(self.db)
        self.access = SqlAccess(self.db)
        self.redrives = SqlRedrives(self.db)
        self.observation = SqlObservation(self.db)

    @property
    def engine(self) -> AsyncEngine:
        return self.db.engine

    @property
    def policy(self) -> DisposalPolicy | None:
        return self.db.policy

    def attach(self, policy: DisposalPolicy, wakeups: WakeUps) -> None:
        self.db.attach(policy, wakeups)

    async def close(self) -> None:
        """Let the batches under way finish (their callers are owed an answer), then close."""
        await self.messages.sender.close()
        await self.messages.receiver.close()
        await self.db.close()
