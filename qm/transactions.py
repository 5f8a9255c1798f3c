"""MSMQ transactions (reference §7.8): begin, keep alive, commit, abort, time out."""

from __future__ import annotations

import dataclasses
import secrets
from datetime import timedelta
from typing import TYPE_CHECKING

from qm.errors import MqError, MqErrorCode
from qm.store import TransactionRecord

if TYPE_CHECKING:
    from qm.manager import QueueManager

SINGLE_MESSAGE_TRANSACTION = "single"
"""MQ_SINGLE_MESSAGE: a send that is its own transaction."""


class Transactions:
    """The transaction operations of a queue manager."""

    def __init__(self, qm: QueueManager) -> None:
        self._qm = qm

    async def begin(self) -> TransactionRecord:
        now = self._qm.clock.now()
        record = TransactionRecord(
            id=secrets.token_hex(16),
            created_at=now,
            expires_at=now + timedelta(seconds=self._qm.config.transaction_timeout_s),
        )
        await self._qm.store.transactions.create_transaction(record)
        return record

    async def get(self, transaction_id: str) -> TransactionRecord:
        return await self.active(transaction_id, touch=False)

    async def commit(self, transaction_id: str) -> None:
        await self.finish(transaction_id, commit=True)

    async def abort(self, transaction_id: str) -> None:
        await self.finish(transaction_id, commit=False)

    async def finish(self, transaction_id: str, commit: bool) -> None:
        """Commit or abort; a transaction past its timeout is aborted, whatever was asked."""
        record = await self._qm.store.transactions.get_transaction(transaction_id)
        timed_out = record is not None and record.expires_at <= self._qm.clock.now()
        now = self._qm.clock.now()
        touched = await self._qm.store.transactions.finish_transaction(
            transaction_id, commit and not timed_out, now
        )
        if touched is None or timed_out:
            raise unknown_transaction(transaction_id)

    async def active(self, transaction_id: str, touch: bool = True) -> TransactionRecord:
        record = await self._qm.store.transactions.get_transaction(transaction_id)
        now = self._qm.clock.now()
        if record is None or record.expires_at <= now:
            raise unknown_transaction(transaction_id)
        if not touch:
            return record
        expires_at = now + timedelta(seconds=self._qm.config.transaction_timeout_s)
        if not await self._qm.store.transactions.touch_transaction(transaction_id, expires_at):
            raise unknown_transaction(transaction_id)
        return dataclasses.replace(record, expires_at=expires_at)


def unknown_transaction(transaction_id: str) -> MqError:
    return MqError(
        MqErrorCode.MQ_ERROR_TRANSACTION_SEQUENCE,
        f"no active transaction {transaction_id!r} (unknown, finished, or timed out)",
    )
