"""Receives: the group receive of a queue's first message, a selector's message, a batch; and
the claims of a selector's message for a transaction or a two-phase lock.

One claim per dialect (docs/store.md, "Receives"): on PostgreSQL every receive is one
statement (storage/claims.py) whose outbox rows storage/outbox.py places right after it; on
SQLite, one transaction that deletes, subtracts and places (Consequences.removed)."""

from __future__ import annotations

import asyncio
import functools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from qm.disposal import Reason
from qm.errors import MqError, MqErrorCode
from qm.model import Message, Queue
from qm.paths import QueuePath
from qm.store import Budget, Claim, ClaimKind, Selector
from storage import claims, driver_sql, outbox, rows, statements
from storage.claims import Aim, Target
from storage.consequences import Consequences
from storage.database import Database
from storage.group_commit import GroupCommit, GroupCommitConfig
from storage.holds import hold_transactions
from storage.tables import LOCKED, TXN_DEQUEUE, messages

m = messages.c

MAX_EXPECTED = 65536
"""Queues with an expected count (Receiver._expected), at most."""


@dataclass(frozen=True, slots=True)
class ReceiveRequest:
    """One caller's plain receive of a queue's first message, as the group commit batches it."""

    queue: Queue
    now: datetime
    caller: asyncio.Task[Any] | None = field(default_factory=asyncio.current_task)
    left_after: list[int] = field(default_factory=list)
    """Set by a batch that read what the queue had left once it took its messages
    (PostgreSQL's claim), for the caller served by it: how many were available still."""

    @property
    def abandoned(self) -> bool:
        """The caller was cancelled: it will not take the answer (checked before the commit)."""
        return self.caller is not None and (self.caller.cancelling() > 0 or self.caller.done())


class Receiver:
    """The store's one way out for messages received, locked or claimed for a transaction."""

    def __init__(self, db: Database, config: GroupCommitConfig) -> None:
        self._db = db
        self.receive_group: GroupCommit[ReceiveRequest, Message | None] = GroupCommit(
            self._receive_batch, config.max_batch, config.max_wait_s
        )
        self._expected: dict[int, int] = {}
        """Per queue ID, how many messages this process expects to be available there: what it
        made available, less what it received, and what it last counted (`_receive_first`
        counts before it claims where it expects none). A hint that saves work, never trusted
        for an answer (tests/contract/test_empty_queue_reads.py)."""
        self._none_left: set[int] = set()
        """Queues whose last plain receive here read from the database that it left no message
        available, with no message made available here since (`may_have_more`;
        tests/contract/test_plain_receives.py)."""
        db.on_commit(self._made_available)

    def _made_available(self, changed: Counter[int]) -> None:
        """After a commit that made messages available (a queue ID per message): expect them."""
        for queue_id, count in changed.items():
            self._expect(queue_id, self._expected.get(queue_id, 0) + count)
        self._none_left.difference_update(changed)

    def _expect(self, queue_id: int, count: int) -> None:
        if len(self._expected) >= MAX_EXPECTED and queue_id not in self._expected:
            self._expected.clear()  # a hint only: forgetting costs one count per queue
        self._expected[queue_id] = count

    def may_have_more(self, queue_id: int) -> bool:
        """False only where this process's last receive of the queue read from the database
        that it left nothing available then, and nothing was made available here since: any
        message that came later brings a wake-up of its own."""
        return queue_id not in self._none_left

    def _drained(self, queue_id: int, none_left: bool) -> None:
        if none_left and len(self._none_left) < MAX_EXPECTED:
            self._none_left.add(queue_id)
        else:
            self._none_left.discard(queue_id)

    async def close(self) -> None:
        await self.receive_group.close()

    async def take(self, queue: Queue, selector: Selector, now: datetime, claim: Claim) -> Message | None:
        if claim.kind is ClaimKind.RECEIVE and selector.first:
            return await self._receive_first(queue, now)
        if claim.kind is ClaimKind.RECEIVE and not self._db.sqlite:
            target = Target(Aim.SELECTED, statements.TargetShape.of(selector, lock_rows=True))
            values = statements.target_values(queue.id, selector, rows.to_us(now)) | {"key": queue.path.key}
            taken = (await self._claim(target, values, now)).taken
            return rows.message_from_row(taken[0]) if taken else None
        statement = _take(statements.TargetShape.of(selector, lock_rows=not self._db.sqlite), claim.kind)
        values = statements.target_values(queue.id, selector, rows.to_us(now)) | _hold(claim)
        async with self._db.transaction() as connection:
            if claim.kind is ClaimKind.TRANSACTION and claim.owner is not None:
                await hold_transactions(self._db, connection, [claim.owner])
            found = await driver_sql.fetch(connection, statement, values)
            row = found[0] if found else None
            if row is not None and claim.kind is ClaimKind.RECEIVE:
                known = {queue.id: (queue.path, queue.settings.journal)}
                await Consequences(self._db, connection, now).removed([row], Reason.RECEIVED, known)
        return None if row is None else rows.message_from_row(row)

    async def _receive_first(self, queue: Queue, now: datetime) -> Message | None:
        """A plain receive of the queue's first message (group receive). Where this process
        expects no message there, a count first: a long-polling receiver's first try after its
        previous message usually finds nothing, and the claim's write transaction would cost
        four round trips (on SQLite, the write lock) for it."""
        expected = self._expected.get(queue.id, 0)
        if expected <= 0:
            expected = await self._count_available(queue, now)
            if expected == 0:
                self._expect(queue.id, 0)
                return None
        request = ReceiveRequest(queue, now)
        message = await self.receive_group.submit(request)
        if message is None:
            self._expect(queue.id, 0)
        elif request.left_after:  # what the database said was left: no guess, and a sure 0
            self._expect(queue.id, request.left_after[-1])
            self._drained(queue.id, request.left_after[-1] == 0)
        else:
            self._expect(queue.id, expected - 1)
            self._drained(queue.id, False)
        return message

    async def _count_available(self, queue: Queue, now: datetime) -> int:
        """How many messages the queue has to receive now, up to statements.COUNT_AT_MOST;
        MQ_ERROR_QUEUE_NOT_FOUND when its ID no longer names a queue with its path (as the
        claim would answer)."""
        values = statements.available_values(queue.id, rows.to_us(now))
        statement = (
            statements.QUEUE_LOOKED_AT_SQLITE if self._db.sqlite else statements.QUEUE_LOOKED_AT_POSTGRESQL
        )
        async with self._db.engine.connect() as connection:
            found = await driver_sql.read(connection, statement, values)
        if not found or found[0]["path_key"] != queue.path.key:
            raise MqError(MqErrorCode.MQ_ERROR_QUEUE_NOT_FOUND, "the queue was deleted")
        return int(found[0]["available"])

    async def take_many(
        self, queue: Queue, limit: int, now: datetime, budget: Budget | None = None
    ) -> list[Message]:
        """Receive up to `limit` available messages in queue order with one DELETE statement.
        With a budget, only as many are taken as fit in it (but always one). PostgreSQL: the
        claim, weights checked in it (statements.WEIGHT); SQLite: the first messages' footprints
        read in the transaction that deletes them."""
        if not self._db.sqlite:
            target = Target(Aim.FIRST if budget is None else Aim.FITTING)
            values = statements.available_values(queue.id, rows.to_us(now))
            values |= {"key": queue.path.key, "limit": limit}
            if budget is not None:
                values |= statements.budget_values(budget)
            return [rows.message_from_row(row) for row in (await self._claim(target, values, now)).taken]
        async with self._db.transaction() as connection:
            if budget is not None:
                limit = await self._fitting(connection, queue.id, limit, now, budget)
            taken = await self._delete_first(connection, queue.id, queue.path.key, limit, now)
            if taken:
                known = {queue.id: (queue.path, queue.settings.journal)}
                await Consequences(self._db, connection, now).removed(taken, Reason.RECEIVED, known)
        return [rows.message_from_row(row) for row in taken]

    async def _receive_batch(
        self, requests: Sequence[ReceiveRequest]
    ) -> list[Message | BaseException | None]:
        """Concurrent plain receives: each queue's first messages, one per caller, handed out in
        queue order to the callers in the order they asked (PostgreSQL: one claim per queue;
        SQLite: one transaction, one fsync, for all). A caller left without a message gets None
        and waits as before; one whose queue is gone (or its ID now names another queue) gets
        MQ_ERROR_QUEUE_NOT_FOUND. If a caller is cancelled before its claim commits, the claim
        does not run (or its transaction is rolled back) and runs again without it, so no
        message is taken for nobody."""
        answers: list[Message | BaseException | None] = [None] * len(requests)
        for indexes in self._claims_of(requests):
            while True:
                live = [index for index in indexes if not requests[index].abandoned]
                if not live:
                    break
                try:
                    taken = await self._receive_together([requests[index] for index in live])
                except _CallerWentAway:
                    continue
                for index, answer in zip(live, taken, strict=True):
                    answers[index] = answer
                break
        return answers

    def _claims_of(self, requests: Sequence[ReceiveRequest]) -> list[list[int]]:
        """The requests each claim serves: those of one queue on PostgreSQL, all on SQLite."""
        if self._db.sqlite:
            return [list(range(len(requests)))]
        callers: dict[tuple[int, str], list[int]] = {}
        for index, request in enumerate(requests):
            callers.setdefault((request.queue.id, request.queue.path.key), []).append(index)
        return list(callers.values())

    async def _receive_together(
        self, requests: Sequence[ReceiveRequest]
    ) -> list[Message | BaseException | None]:
        now = max(request.now for request in requests)  # the strictest view of TTBR
        if not self._db.sqlite:
            return await self._claim_first(requests, now)
        callers: dict[tuple[int, str], list[int]] = {}
        for index, request in enumerate(requests):
            callers.setdefault((request.queue.id, request.queue.path.key), []).append(index)
        answers: list[Message | BaseException | None] = [None] * len(requests)
        async with self._db.transaction() as connection:
            known: dict[int, tuple[QueuePath, bool]] = {}
            gone: list[Any] = []
            unanswered: dict[tuple[int, str], list[int]] = {}
            for (queue_id, key), indexes in callers.items():
                found = await self._delete_first(connection, queue_id, key, len(indexes), now)
                if not found:
                    unanswered[queue_id, key] = indexes
                    continue
                known[queue_id] = (requests[indexes[0]].queue.path, bool(found[0][statements.QUEUE_JOURNAL]))
                for index, row in zip(indexes, found, strict=False):
                    answers[index] = rows.message_from_row(row)
                gone.extend(found)
            await self._answer_missing(connection, unanswered, answers)
            await Consequences(self._db, connection, now).removed(gone, Reason.RECEIVED, known)
            if any(request.abandoned for request in requests):
                raise _CallerWentAway  # roll back: the batch runs again without that caller
        return answers

    async def _claim_first(
        self, requests: Sequence[ReceiveRequest], now: datetime
    ) -> list[Message | BaseException | None]:
        """PostgreSQL: the first messages of the callers' one queue, one claim for them all."""
        queue = requests[0].queue
        values = statements.available_values(queue.id, rows.to_us(now))
        values |= {"key": queue.path.key, "limit": len(requests)}
        claimed = await self._claim(Target(Aim.FIRST), values, now, requests)
        if claimed.gone:
            return [MqError(MqErrorCode.MQ_ERROR_QUEUE_NOT_FOUND, "the queue was deleted")] * len(requests)
        left = max(claimed.available_before - len(claimed.taken), 0)
        for request in requests:
            request.left_after.append(left)
        answers: list[Message | BaseException | None] = [rows.message_from_row(row) for row in claimed.taken]
        return answers + [None] * (len(requests) - len(answers))

    async def _claim(
        self, target: Target, values: dict[str, Any], now: datetime, callers: Sequence[ReceiveRequest] = ()
    ) -> _Claimed:
        """PostgreSQL's receive: the claim in autocommit (one round trip; like the COMMIT it
        replaces, a caller cancelled while it runs does not give its message back), then the
        placement of what its outbox rows earn. Where another transaction holds the queue's
        row, the claim that waits for it, in a transaction rolled back for `callers` cancelled
        meanwhile (a caller's own cancellation rolls it back too)."""
        async with self._db.engine.connect() as connection:
            if any(request.abandoned for request in callers):
                raise _CallerWentAway  # went away while a connection was found
            found = await driver_sql.read(connection, claims.claim(target), values)
        claimed = _Claimed.of(found, values["key"])
        if claimed.busy:
            async with self._db.transaction() as connection:
                found = await driver_sql.fetch(connection, claims.claim(target, wait=True), values)
                if any(request.abandoned for request in callers):
                    raise _CallerWentAway  # roll back: the batch runs again without that caller
            claimed = _Claimed.of(found, values["key"])
        await outbox.place_departed(self._db, claimed.departed, now)
        return claimed

    @staticmethod
    async def _answer_missing(
        connection: AsyncConnection,
        unanswered: dict[tuple[int, str], list[int]],
        answers: list[Message | BaseException | None],
    ) -> None:
        """Callers whose queue gave no message: MQ_ERROR_QUEUE_NOT_FOUND when the queue is gone
        or its ID now names another queue (the callers' queue values may have been
        remembered); the others keep None and wait."""
        if not unanswered:
            return
        ids = sorted({queue_id for queue_id, _ in unanswered})
        found = await driver_sql.fetch(connection, statements.QUEUE_KEYS, {"queue_ids": ids})
        current = {row["id"]: row["path_key"] for row in found}
        for (queue_id, key), indexes in unanswered.items():
            if current.get(queue_id) != key:
                missing = MqError(MqErrorCode.MQ_ERROR_QUEUE_NOT_FOUND, "the queue was deleted")
                for index in indexes:
                    answers[index] = missing

    async def _fitting(
        self, connection: AsyncConnection, queue_id: int, limit: int, now: datetime, budget: Budget
    ) -> int:
        statement = statements.FIRST_SIZES_SQLITE
        values = statements.available_values(queue_id, rows.to_us(now)) | {"after": 0, "limit": limit}
        found = (await connection.execute(statement, values)).all()
        return budget.fitting(statements.footprints(found))

    async def _delete_first(
        self, connection: AsyncConnection, queue_id: int, key: str, limit: int, now: datetime
    ) -> list[Any]:
        """Delete the first `limit` available messages of the queue with this ID and path key (none
        if the ID names no queue of that key now); return their rows in queue order, with the
        queue's journaling (statements.QUEUE_JOURNAL)."""
        statement = statements.TAKE_FIRST_SQLITE
        values = statements.available_values(queue_id, rows.to_us(now)) | {"key": key, "limit": limit}
        found = await driver_sql.fetch(connection, statement, values)
        return sorted(found, key=lambda row: row["lookup_id"])


@dataclass(frozen=True, slots=True)
class _Claimed:
    """What a claim did: the rows it deleted (in queue order), those of them whose outbox rows
    it wrote, how many messages the queue had available (Aim.FIRST), or that the queue is
    gone, or that another transaction held its row (nothing taken)."""

    taken: list[Any]
    departed: list[int]
    available_before: int = 0
    gone: bool = False
    busy: bool = False

    @classmethod
    def of(cls, found: Sequence[Any], key: str) -> _Claimed:
        if not found or found[0][claims.QUEUE_KEY] != key:
            return cls([], [], gone=True)
        if not found[0][claims.QUEUE_LOCKED]:
            return cls([], [], busy=True)
        taken = [row for row in found if row["lookup_id"] is not None]
        departed = [row[claims.DEPARTED] for row in taken if row[claims.DEPARTED] is not None]
        return cls(taken, departed, int(found[0].get(claims.AVAILABLE_BEFORE) or 0))


class _CallerWentAway(Exception):
    """A receive's caller was cancelled before its batch committed."""


@functools.cache
def _take(shape: statements.TargetShape, kind: ClaimKind) -> sa.Delete | sa.Update:
    """The statement of a claim on a selector's target, built once per shape and claim kind."""
    where = m.lookup_id == statements.select_target(shape).scalar_subquery()
    if kind is ClaimKind.RECEIVE:
        return sa.delete(messages).where(where).returning(*messages.c)
    holder = sa.bindparam("holder", type_=sa.String)
    if kind is ClaimKind.TRANSACTION:
        held = {"state": LOCKED, "transaction_id": holder, "txn_op": TXN_DEQUEUE}
    else:
        held = {
            "state": LOCKED,
            "lock_tag": holder,
            "lock_expires_at": sa.bindparam("expires_at", type_=sa.BigInteger),
        }
    return sa.update(messages).where(where).values(**held).returning(*messages.c)


def _hold(claim: Claim) -> dict[str, Any]:
    if claim.kind is ClaimKind.RECEIVE:
        return {}
    if claim.kind is ClaimKind.TRANSACTION:
        return {"holder": claim.owner}
    assert claim.expires_at is not None
    return {"holder": claim.owner, "expires_at": rows.to_us(claim.expires_at)}
