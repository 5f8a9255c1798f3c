"""Messages: enqueue with the quota rules, peek and browse, claims, two-phase lock ends."""

from __future__ import annotations

import asyncio
import functools
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from qm import rules, streams
from qm.disposal import Placement, Reason
from qm.errors import MqError, MqErrorCode
from qm.model import Delivery, Message, NewMessage, Queue
from qm.paths import QueuePath
from qm.store import Claim, ClaimKind, EnqueueOutcome, EnqueueResult, PositionState, Selector
from storage import driver_sql, rows, statements
from storage.base import MachineRoom, QueueRoom
from storage.consequences import Consequences
from storage.errors import is_unavailable
from storage.group_commit import GroupCommit, GroupCommitConfig
from storage.stream_store import StreamStore
from storage.tables import LOCKED, TXN_DEQUEUE, messages, queues

m = messages.c
q = queues.c


WithinEnqueue = Callable[[AsyncConnection, list[EnqueueResult]], Awaitable[None]]
"""Runs in the enqueue's transaction, after the request's messages are inserted and before the
commit, with their results: the seam for state that must commit with its message (SRMP
stream state). Raising fails that request alone; the rest of the batch commits."""


@dataclass(frozen=True, slots=True)
class EnqueueRequest:
    """One caller's enqueue, as the group commit batches it."""

    messages: Sequence[NewMessage]
    within: WithinEnqueue | None = None

    @property
    def express(self) -> bool:
        return all(item.properties.delivery is Delivery.EXPRESS for item in self.messages)


@dataclass(frozen=True, slots=True)
class ReceiveRequest:
    """One caller's plain receive of a queue's first message, as the group commit batches it."""

    queue: Queue
    now: datetime
    caller: asyncio.Task[Any] | None = field(default_factory=asyncio.current_task)
    left_after: list[int] = field(default_factory=list)
    """Set by a batch that read what the queue had left once it took its messages
    (TAKE_PLAIN_FIRST), for the caller served by it: how many were available still."""

    @property
    def abandoned(self) -> bool:
        """The caller was cancelled: it will not take the answer (checked before the commit)."""
        return self.caller is not None and (self.caller.cancelling() > 0 or self.caller.done())


class MessageStore(StreamStore):
    def __init__(self, engine: AsyncEngine, group_commit: GroupCommitConfig | None = None) -> None:
        super().__init__(engine)
        config = group_commit or GroupCommitConfig()
        self._relaxed_express = config.relaxed_express
        self._admitting: dict[int, float] = {}
        """Queue ID -> until when (monotonic) its sends run the transaction: the last one
        found a quota or the throttle set, so ENQUEUE_PLAIN would store nothing."""
        self.group_commit: GroupCommit[EnqueueRequest, list[EnqueueResult]] = GroupCommit(
            self._enqueue_batch, config.max_batch, config.max_wait_s
        )
        self.receive_group: GroupCommit[ReceiveRequest, Message | None] = GroupCommit(
            self._receive_batch, config.max_batch, config.max_wait_s
        )

    async def enqueue(self, batch: Sequence[NewMessage]) -> list[EnqueueResult]:
        """Insert in one transaction, applying the §7.3 quota rules (the queue manager's as
        stored, then each queue's) message by message; the transaction may hold other
        callers' messages too (group commit)."""
        return await self.enqueue_request(EnqueueRequest(tuple(batch)))

    async def enqueue_request(self, request: EnqueueRequest) -> list[EnqueueResult]:
        """`enqueue` with a `within` callback in the same transaction (see WithinEnqueue)."""
        if not request.messages:
            return []
        return await self.group_commit.submit(request)

    async def close(self) -> None:
        await self.group_commit.close()
        await self.receive_group.close()
        await super().close()

    async def _enqueue_batch(
        self, requests: Sequence[EnqueueRequest]
    ) -> list[list[EnqueueResult] | BaseException]:
        """All requests in one transaction. If it fails for a reason other than the store being
        unavailable, each request is retried in a transaction of its own, so that a message
        that cannot be stored fails alone (its caller gets the error, the others commit)."""
        try:
            plain = await self._enqueue_plain(requests)
            return list(plain if plain is not None else await self._enqueue_together(requests))
        except Exception as error:
            if len(requests) == 1 or is_unavailable(error):
                raise
        outcomes: list[list[EnqueueResult] | BaseException] = []
        for request in requests:
            try:
                outcomes.extend(await self._enqueue_together([request]))
            except Exception as error:
                if is_unavailable(error):
                    raise
                outcomes.append(error)
        return outcomes

    async def _enqueue_plain(self, requests: Sequence[EnqueueRequest]) -> list[list[EnqueueResult]] | None:
        """PostgreSQL: a batch of plain messages for one queue in one statement that is its own
        transaction (statements.ENQUEUE_PLAIN: one round trip where the transaction takes
        four); None where the transaction must run: the batch is not plain (_plain_batch), or
        a quota or the throttle is set (the statement then stores nothing)."""
        items = self._plain_batch(requests)
        if items is None:
            return None
        values = [rows.message_values(item, 0, "") for item in items]
        arguments: dict[str, Any]
        if len(values) == 1:
            statement, arguments = statements.ENQUEUE_PLAIN_ONE, dict(values[0])
        else:
            statement = statements.ENQUEUE_PLAIN
            arguments = {name: [value[name] for value in values] for name in statements.PLAIN_SEND_COLUMNS}
        arguments |= {
            "queue": items[0].queue_id,
            "key": items[0].queue_key,
            "count": len(items),
            statements.MESSAGE_ID_PREFIX: rules.message_id_prefix(self._identity()),
        }
        async with self.engine.connect() as connection:
            stored = await driver_sql.read(connection, statement, arguments)
        if not stored:  # a quota or the throttle: admission decides, here for a while
            self._admitting[items[0].queue_id] = time.monotonic() + ADMISSION_HINT_S
            return None
        self._committed(Counter(item.queue_id for item in items))
        placed = iter(
            EnqueueResult(EnqueueOutcome.ACCEPTED, row["lookup_id"], row["message_id"]) for row in stored
        )
        return [[next(placed) for _ in request.messages] for request in requests]

    def _plain_batch(self, requests: Sequence[EnqueueRequest]) -> list[NewMessage] | None:
        """The batch's messages if ENQUEUE_PLAIN can store them: PostgreSQL, one queue known by
        its path key, a durable commit, no callback, and no message with a duplicate key, a
        stream, a transaction, a message ID of its own or an arrival that places something."""
        if self._sqlite or any(request.within is not None for request in requests):
            return None
        if self._relaxed_express and all(request.express for request in requests):
            return None  # SET LOCAL synchronous_commit needs a transaction block
        items = [item for request in requests for item in request.messages]
        first = items[0]
        if self._admitting and self._admitting.get(first.queue_id, 0.0) > time.monotonic():
            return None
        policy = self.policy
        for item in items:
            properties = item.properties
            if (
                item.queue_id != first.queue_id
                or item.queue_key is None
                or item.queue_key != first.queue_key
                or item.duplicate_key is not None
                or item.stream is not None
                or item.transaction_id is not None
                or item.message_id
                or (
                    policy is not None
                    and policy.arrival_may_place(
                        int(properties.journal), properties.admin_queue, int(properties.acknowledge)
                    )
                )
            ):
                return None
        return items

    async def _enqueue_together(self, requests: Sequence[EnqueueRequest]) -> list[list[EnqueueResult]]:
        """A constant number of statements per batch, whatever its size: the queues and the
        machine's limits are read once, the duplicate keys remembered in one statement (and the
        keys of refused messages forgotten in one more)."""
        items = [item for request in requests for item in request.messages]
        relaxed = self._relaxed_express and all(request.express for request in requests)
        async with self._transaction(relaxed=relaxed) as connection:
            await self._hold_transactions(connection, (i.transaction_id for i in items if i.transaction_id))
            await self._lock_arrival_targets(connection, items)
            totals, room, counters = await self._room(connection, items)
            fresh = await self._remember(connection, items)
            acceptable = set(fresh)
            outcomes = [await self._admission(connection, item, totals, room, acceptable) for item in items]
            await self._forget_refused(connection, items, outcomes, fresh)
            accepted = [
                item
                for item, outcome in zip(items, outcomes, strict=True)
                if outcome is EnqueueOutcome.ACCEPTED
            ]
            inserted = await self.insert_messages(connection, accepted, counters, queues_held=True)
            arrived = [row for row in inserted if row["transaction_id"] is None]
            if arrived:
                await Consequences(self, connection, accepted[0].arrived_time).follow(arrived, Reason.ARRIVED)
            placed = iter(
                EnqueueResult(EnqueueOutcome.ACCEPTED, row["lookup_id"], row["message_id"])
                for row in inserted
            )
            flat = [
                next(placed) if outcome is EnqueueOutcome.ACCEPTED else EnqueueResult(outcome)
                for outcome in outcomes
            ]
            results = []
            for request in requests:
                mine, flat = flat[: len(request.messages)], flat[len(request.messages) :]
                if request.within is not None:
                    await request.within(connection, mine)
                results.append(mine)
        return results

    async def _lock_arrival_targets(self, connection: AsyncConnection, items: Sequence[NewMessage]) -> None:
        """PostgreSQL: a batch whose arrivals place into other queues (acknowledgments, computer
        journal copies) locks those rows with its own, in ID order, before the room does;
        placing them after the room would lock a lower queue after a higher one, against the
        order of every send."""
        policy = self.policy
        if self._sqlite or policy is None:
            return
        targets = {
            target.key
            for item in items
            if item.transaction_id is None
            for target in policy.arrival_targets(item.properties, item.source_machine)
        }
        if targets:
            queue_ids = sorted({item.queue_id for item in items})
            values = {"queue_ids": queue_ids, "target_keys": sorted(targets)}
            await connection.execute(statements.QUEUES_LOCKED_WITH_TARGETS, values)

    async def _admission(
        self,
        connection: AsyncConnection,
        item: NewMessage,
        totals: dict[int, QueueRoom],
        room: MachineRoom,
        fresh: set[str],
    ) -> EnqueueOutcome:
        """Duplicates first (answered as such even when full), then the quotas. `fresh` holds
        the keys this batch may still accept: an accepted message's key leaves it, so a second
        copy in the same batch is a duplicate."""
        if item.duplicate_key is not None and item.duplicate_key not in fresh:
            return EnqueueOutcome.DUPLICATE
        stream = None if item.stream is None else await self.stream_state(connection, item.stream.stream_id)
        last_accepted = None if stream is None else stream.last_ordinal
        if item.stream is not None and not streams.accepts(last_accepted, item.stream):
            return EnqueueOutcome.DUPLICATE  # or out of order: the sender resends in order
        queue = totals[item.queue_id]
        size = rules.stored_size(item.properties)
        outcome = rules.admit(
            size, queue.byte_count, queue.quota_kb, room.byte_count, room.quota_kb, room.throttled
        )
        if outcome is not EnqueueOutcome.ACCEPTED:
            return outcome
        if item.stream is not None and not await self.advance_stream(
            connection, item.stream, stream, item.arrived_time
        ):
            return EnqueueOutcome.DUPLICATE  # a concurrent copy advanced the stream first
        if item.duplicate_key is not None:
            fresh.discard(item.duplicate_key)
        queue.byte_count += size
        room.byte_count += size
        return outcome

    async def _remember(self, connection: AsyncConnection, items: Sequence[NewMessage]) -> frozenset[str]:
        """Record the batch's duplicate keys before anything is admitted, in one statement;
        return those that were not there yet. A key already there arrived recently, or was
        committed meanwhile by a concurrent copy (another process): those messages are
        duplicates, and take no room from the others in the batch.

        In the enqueue's own transaction: if the enqueue rolls back, so does the memory, and a
        concurrent duplicate waits on the key's index entry until this transaction ends. Keys
        go in sorted order, before any other row is written, so two such transactions cannot
        deadlock on each other's keys."""
        arrivals: dict[str, int] = {}
        for item in items:
            if item.duplicate_key is not None:
                arrivals.setdefault(item.duplicate_key, rows.to_us(item.arrived_time))
        if not arrivals:
            return frozenset()
        statement = statements.REMEMBER_SQLITE if self._sqlite else statements.REMEMBER_POSTGRESQL
        keys = [{"message_id": key, "received_at": arrivals[key]} for key in sorted(arrivals)]
        written = await driver_sql.insert_returning(connection, statement, keys)
        return frozenset(row["message_id"] for row in written)

    @staticmethod
    async def _forget_refused(
        connection: AsyncConnection,
        items: Sequence[NewMessage],
        outcomes: Sequence[EnqueueOutcome],
        fresh: frozenset[str],
    ) -> None:
        """The keys written for messages that were refused (quota, stream order): forgotten, so
        that the sender can send them again."""
        accepted = {
            item.duplicate_key
            for item, outcome in zip(items, outcomes, strict=True)
            if outcome is EnqueueOutcome.ACCEPTED
        }
        refused = sorted(fresh - accepted)
        if refused:
            await connection.execute(statements.FORGET, {"keys": refused})

    async def place(self, placements: Sequence[Placement], now: datetime) -> None:
        async with self._transaction() as connection:
            await Consequences(self, connection, now).place(placements)

    async def peek(self, queue_id: int, selector: Selector, now: datetime) -> Message | None:
        statement = _peek(statements.TargetShape.of(selector, lock_rows=False))
        values = statements.target_values(queue_id, selector, rows.to_us(now))
        async with self._reading() as connection:
            row = (await connection.execute(statement, values)).mappings().first()
        return None if row is None else rows.message_from_row(row)

    async def browse(self, queue_id: int, after: int, limit: int, now: datetime) -> list[Message]:
        values = statements.available_values(queue_id, rows.to_us(now)) | {"after": after, "limit": limit}
        async with self._reading() as connection:
            found = (await connection.execute(_BROWSE, values)).mappings().all()
        return [rows.message_from_row(row) for row in found]

    async def take(self, queue: Queue, selector: Selector, now: datetime, claim: Claim) -> Message | None:
        if claim.kind is ClaimKind.RECEIVE and selector.first:
            return await self._receive_first(queue, now)
        statement = _take(statements.TargetShape.of(selector, lock_rows=not self._sqlite), claim.kind)
        values = statements.target_values(queue.id, selector, rows.to_us(now)) | _hold(claim)
        async with self._transaction() as connection:
            if claim.kind is ClaimKind.TRANSACTION and claim.owner is not None:
                await self._hold_transactions(connection, [claim.owner])
            found = await driver_sql.fetch(connection, statement, values)
            row = found[0] if found else None
            if row is not None and claim.kind is ClaimKind.RECEIVE:
                known = {queue.id: (queue.path, queue.settings.journal)}
                await Consequences(self, connection, now).removed([row], Reason.RECEIVED, known)
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
            statements.QUEUE_LOOKED_AT_SQLITE if self._sqlite else statements.QUEUE_LOOKED_AT_POSTGRESQL
        )
        async with self.engine.connect() as connection:
            found = await driver_sql.read(connection, statement, values)
        if not found or found[0]["path_key"] != queue.path.key:
            raise MqError(MqErrorCode.MQ_ERROR_QUEUE_NOT_FOUND, "the queue was deleted")
        return int(found[0]["available"])

    async def take_many(self, queue: Queue, limit: int, now: datetime) -> list[Message]:
        """Receive up to `limit` available messages in queue order with one DELETE statement."""
        async with self._transaction() as connection:
            taken = await self._delete_first(connection, queue.id, queue.path.key, limit, now)
            if taken:
                known = {queue.id: (queue.path, queue.settings.journal)}
                await Consequences(self, connection, now).removed(taken, Reason.RECEIVED, known)
        return [rows.message_from_row(row) for row in taken]

    async def _receive_batch(
        self, requests: Sequence[ReceiveRequest]
    ) -> list[Message | BaseException | None]:
        """Concurrent plain receives in one transaction (one commit, one fsync): each queue's
        first messages, one per caller, handed out in queue order to the callers in the order
        they asked. A caller left without a message gets None and waits as before; one whose
        queue is gone (or its ID now names another queue) gets MQ_ERROR_QUEUE_NOT_FOUND. If a
        caller is cancelled while the batch runs, the transaction is rolled back and run again
        without it, so no message is taken for nobody."""
        answers: list[Message | BaseException | None] = [None] * len(requests)
        while True:
            live = [index for index, request in enumerate(requests) if not request.abandoned]
            if not live:
                return answers
            try:
                taken = await self._receive_together([requests[index] for index in live])
            except _CallerWentAway:
                continue
            for index, answer in zip(live, taken, strict=True):
                answers[index] = answer
            return answers

    async def _receive_together(
        self, requests: Sequence[ReceiveRequest]
    ) -> list[Message | BaseException | None]:
        now = max(request.now for request in requests)  # the strictest view of TTBR
        callers: dict[tuple[int, str], list[int]] = {}
        for index, request in enumerate(requests):
            callers.setdefault((request.queue.id, request.queue.path.key), []).append(index)
        if len(callers) == 1 and not self._sqlite and not requests[0].queue.settings.journal:
            [(queue_id, key)] = callers
            plain = await self._take_plain_first(queue_id, key, requests, now)
            if plain is not None:
                for request in requests:
                    request.left_after.append(plain.left)
                return plain.answers(len(requests))
        answers: list[Message | BaseException | None] = [None] * len(requests)
        async with self._transaction() as connection:
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
            await Consequences(self, connection, now).removed(gone, Reason.RECEIVED, known)
            if any(request.abandoned for request in requests):
                raise _CallerWentAway  # roll back: the batch runs again without that caller
        return answers

    async def _take_plain_first(
        self, queue_id: int, key: str, requests: Sequence[ReceiveRequest], now: datetime
    ) -> _PlainTake | None:
        """PostgreSQL: the queue's first messages taken in one statement that is its own
        transaction (statements.TAKE_PLAIN_FIRST: one round trip where the transaction takes
        four), if their removal places nothing; None where the transaction must run (the
        queue journals, or a message needs its consequences). The commit is the statement's:
        like the COMMIT it replaces, a caller cancelled meanwhile does not give its message
        back."""
        limit = len(requests)
        values = statements.available_values(queue_id, rows.to_us(now)) | {"key": key, "limit": limit}
        async with self.engine.connect() as connection:
            if any(request.abandoned for request in requests):
                return None  # went away while a connection was found: the transaction decides
            found = await driver_sql.read(connection, statements.TAKE_PLAIN_FIRST, values)
        if not found or found[0][statements.QUEUE_KEY] != key:
            return _PlainTake([], 0, gone=True)
        if not found[0][statements.QUEUE_LOCKED]:
            return None  # the queue journals, or a send holds its row: the transaction waits
        available = int(found[0][statements.AVAILABLE_BEFORE])
        if found[0][statements.FIRST_LOCKED] is None:
            return _PlainTake([], available)
        if found[0]["lookup_id"] is None:
            return None
        return _PlainTake(found, max(available - len(found), 0))

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

    async def _delete_first(
        self, connection: AsyncConnection, queue_id: int, key: str, limit: int, now: datetime
    ) -> list[Any]:
        """Delete the first `limit` available messages of the queue with this ID and path key (none
        if the ID names no queue of that key now); return their rows in queue order, with the
        queue's journaling (statements.QUEUE_JOURNAL)."""
        statement = statements.TAKE_FIRST_SQLITE if self._sqlite else statements.TAKE_FIRST_POSTGRESQL
        values = statements.available_values(queue_id, rows.to_us(now)) | {"key": key, "limit": limit}
        found = await driver_sql.fetch(connection, statement, values)
        return sorted(found, key=lambda row: row["lookup_id"])

    async def position_state(self, queue_id: int, lookup_id: int, now: datetime) -> PositionState:
        statement = sa.select(m.state, m.ttbr_deadline).where(
            m.lookup_id == lookup_id, m.queue_id == queue_id
        )
        async with self._reading() as connection:
            row = (await connection.execute(statement)).first()
        if row is None:
            return PositionState.MISSING
        if row.state == LOCKED:
            return PositionState.LOCKED
        if row.ttbr_deadline is not None and row.ttbr_deadline <= rows.to_us(now):
            return PositionState.EXPIRED
        return PositionState.AVAILABLE

    async def end_lock(
        self, lookup_id: int, tag: str, commit: bool, now: datetime
    ) -> tuple[PositionState, int]:
        async with self._transaction() as connection:
            statement = sa.select(messages).where(m.lookup_id == lookup_id)
            if not self._sqlite:
                statement = statement.with_for_update()
            row = (await connection.execute(statement)).mappings().first()
            if row is None:
                return PositionState.MISSING, 0
            if row["lock_tag"] != tag:
                return PositionState.AVAILABLE, row["queue_id"]
            if row["lock_expires_at"] <= rows.to_us(now):
                await self._release(connection, row, now)  # as housekeeping would have
                return PositionState.EXPIRED, row["queue_id"]
            if commit or row["purge_pending"]:
                await self._delete_rows(connection, [row])
                reason = Reason.RECEIVED if commit else Reason.PURGED
                await Consequences(self, connection, now).removed([row], reason)
            else:
                await self._unlock(connection, [row])
            return PositionState.LOCKED, row["queue_id"]

    async def _release(self, connection: AsyncConnection, row: Mapping[Any, Any], now: datetime) -> None:
        """End an expired lock: a message a purge marked meanwhile is purged, any other is
        available again. Put back still marked, it would be removed by the next purge without
        being marked, and so locked, first."""
        if row["purge_pending"]:
            await self._delete_rows(connection, [row])
            await Consequences(self, connection, now).removed([row], Reason.PURGED)
        else:
            await self._unlock(connection, [row])


@dataclass(frozen=True, slots=True)
class _PlainTake:
    """What TAKE_PLAIN_FIRST did: the rows it deleted (in queue order), how many messages the
    queue had available besides (`left`), or that the queue is gone."""

    taken: list[Any]
    left: int
    gone: bool = False

    def answers(self, callers: int) -> list[Message | BaseException | None]:
        """One per caller in the order they asked: a message each while there are some."""
        if self.gone:
            return [MqError(MqErrorCode.MQ_ERROR_QUEUE_NOT_FOUND, "the queue was deleted")] * callers
        answers: list[Message | BaseException | None] = [rows.message_from_row(row) for row in self.taken]
        return answers + [None] * (callers - len(answers))


ADMISSION_HINT_S = 10.0
"""How long a queue's sends skip ENQUEUE_PLAIN after it stored nothing (a quota, the throttle)."""


class _CallerWentAway(Exception):
    """A receive's caller was cancelled before its batch committed."""


_BROWSE = (
    sa.select(messages)
    .where(statements.available(), m.lookup_id > sa.bindparam("after", type_=sa.BigInteger))
    .order_by(m.lookup_id)
    .limit(sa.bindparam("limit", type_=sa.Integer))
)


@functools.cache
def _peek(shape: statements.TargetShape) -> sa.Select[Any]:
    target = statements.select_target(shape).scalar_subquery()
    return sa.select(messages).where(m.lookup_id == target)


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
