"""Sends: the group commit of concurrent enqueues, the one statement of a plain send on
PostgreSQL, and the admission transaction (quotas, duplicate keys, streams) of the others."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from qm import rules, streams
from qm.disposal import Reason
from qm.errors import MqError, MqErrorCode
from qm.model import INFINITE, Delivery, NewMessage
from qm.store import EnqueueOutcome, EnqueueResult
from storage import driver_sql, outbox, rows, send_statements
from storage.consequences import Consequences
from storage.database import Database
from storage.errors import is_unavailable
from storage.group_commit import GroupCommit, GroupCommitConfig
from storage.holds import hold_transactions
from storage.inserts import insert_messages
from storage.streams import SqlStreams

log = logging.getLogger(__name__)
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


@dataclass(slots=True)
class QueueRoom:
    """A destination queue's bytes and quota during an enqueue transaction."""

    byte_count: int
    quota_kb: int


@dataclass(slots=True)
class MachineRoom:
    """The queue manager's limits and bytes during an enqueue transaction."""

    quota_kb: int
    throttled: bool
    byte_count: int


class Sender:
    """The store's one way in for messages sent: `enqueue` batches concurrent callers."""

    def __init__(self, db: Database, streams: SqlStreams, config: GroupCommitConfig) -> None:
        self._db = db
        self._streams = streams
        self._relaxed_express = config.relaxed_express
        self.group_commit: GroupCommit[EnqueueRequest, list[EnqueueResult]] = GroupCommit(
            self._enqueue_batch, config.max_batch, config.max_wait_s
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

    async def _enqueue_batch(
        self, requests: Sequence[EnqueueRequest]
    ) -> list[list[EnqueueResult] | BaseException]:
        """All requests in one transaction. If it fails for a reason other than the store being
        unavailable, each request is retried in a transaction of its own, so that a message
        that cannot be stored fails alone (its caller gets the error, the others commit).
        Then what the arrivals earn is placed (PostgreSQL: their outbox rows)."""
        arrived: list[int] = []
        outcomes = await self._enqueue_all(requests, arrived)
        if arrived:
            await self._place_arrivals(arrived, requests[0].messages[0].arrived_time)
        return outcomes

    async def _enqueue_all(
        self, requests: Sequence[EnqueueRequest], arrived: list[int]
    ) -> list[list[EnqueueResult] | BaseException]:
        try:
            plain = await self._enqueue_plain(requests, arrived)
            return list(plain if plain is not None else await self._enqueue_together(requests, arrived))
        except Exception as error:
            if len(requests) == 1 or is_unavailable(error):
                raise
        outcomes: list[list[EnqueueResult] | BaseException] = []
        for request in requests:
            try:
                outcomes.extend(await self._enqueue_together([request], arrived))
            except Exception as error:
                if is_unavailable(error):
                    raise
                outcomes.append(error)
        return outcomes

    async def _place_arrivals(self, lookup_ids: Sequence[int], now: datetime) -> None:
        """The dispatcher, after the commit, for the outbox rows the sends wrote. The messages
        are stored and their callers are answered as such whatever happens here: a failure
        leaves the rows to the housekeeping pass (never a retry of the sends, which would
        store them twice)."""
        try:
            await outbox.place_departed(self._db, lookup_ids, now)
        except Exception:
            log.warning("arrivals left in the outbox for the housekeeping pass", exc_info=True)

    async def _enqueue_plain(
        self, requests: Sequence[EnqueueRequest], arrived: list[int]
    ) -> list[list[EnqueueResult]] | None:
        """PostgreSQL: a batch of plain messages for one queue in one statement that is its own
        transaction (send_statements.ENQUEUE_PLAIN: one round trip where the transaction takes
        four), duplicate keys remembered in it, with an outbox row per message stored where an
        arrival may place something (their lookup IDs added to `arrived`); None where the
        transaction must run: the batch is not plain (_plain_batch), or a message would not be
        admitted (a quota or the throttle: the statement then stores and remembers nothing). A
        key repeated in the batch is a duplicate after its first message (which, if refused,
        refuses all): not sent to the statement."""
        items = self._plain_batch(requests)
        if items is None:
            return None
        chosen = _first_of_each_key(items)
        sent = [items[index] for index in chosen]
        arriving = self._arrivals_may_place(sent)
        values = [send_statements.plain_values(item) for item in sent]
        statement, arguments = send_statements.enqueue_plain(values, arriving)
        arguments |= {
            "queue": items[0].queue_id,
            "key": items[0].queue_key,
            "count": len(sent),
            send_statements.SIZE: sum(rules.stored_size(item.properties) for item in sent),
            send_statements.MESSAGE_ID_PREFIX: rules.message_id_prefix(self._db.identity()),
        }
        async with self._db.engine.connect() as connection:
            answered = await driver_sql.read(connection, statement, arguments)
        if not answered:  # not every message admitted: the transaction decides, one by one
            return None
        # a message's row with its IDs, else a duplicate (its key remembered, or repeated: no row)
        found = {
            index: row for index, row in zip(chosen, answered, strict=True) if row["lookup_id"] is not None
        }
        stored = [row["lookup_id"] for row in found.values()]
        self._db.committed(Counter(items[0].queue_id for _ in stored))  # one per message stored
        if arriving:
            arrived.extend(stored)
        flat = iter(
            EnqueueResult(EnqueueOutcome.ACCEPTED, row["lookup_id"], row["message_id"])
            if (row := found.get(index)) is not None
            else EnqueueResult(EnqueueOutcome.DUPLICATE)
            for index in range(len(items))
        )
        return [[next(flat) for _ in request.messages] for request in requests]

    def _plain_batch(self, requests: Sequence[EnqueueRequest]) -> list[NewMessage] | None:
        """The batch's messages if ENQUEUE_PLAIN can store them: PostgreSQL, one queue known by
        its path key (the statement checks the quotas and the throttle as stored, and the
        duplicate keys), a durable commit, no callback, and no message with a stream or a
        transaction."""
        if self._db.sqlite or any(request.within is not None for request in requests):
            return None
        if self._relaxed_express and all(request.express for request in requests):
            return None  # SET LOCAL synchronous_commit needs a transaction block
        items = [item for request in requests for item in request.messages]
        first = items[0]
        for item in items:
            if (
                item.queue_id != first.queue_id
                or item.queue_key is None
                or item.queue_key != first.queue_key
                or item.stream is not None
                or item.transaction_id is not None
            ):
                return None
        return items

    def _arrivals_may_place(self, items: Sequence[NewMessage]) -> bool:
        """Whether the arrival of some message of a plain batch may place something."""
        policy = self._db.policy
        return policy is not None and any(
            policy.arrival_may_place(int(p.journal), p.admin_queue, int(p.acknowledge))
            for p in (item.properties for item in items)
        )

    async def _enqueue_together(
        self, requests: Sequence[EnqueueRequest], arrived: list[int]
    ) -> list[list[EnqueueResult]]:
        """A constant number of statements per batch, whatever its size: the queues and the
        machine's limits are read once, the duplicate keys remembered in one statement (and the
        keys of refused messages forgotten in one more). What the arrivals earn: placed in the
        transaction on SQLite; on PostgreSQL written to the outbox (one statement), and the
        lookup IDs added to `arrived` once committed."""
        items = [item for request in requests for item in request.messages]
        relaxed = self._relaxed_express and all(request.express for request in requests)
        async with self._db.transaction(relaxed=relaxed) as connection:
            await hold_transactions(
                self._db, connection, (i.transaction_id for i in items if i.transaction_id)
            )
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
            inserted = await insert_messages(self._db, connection, accepted, counters, queues_held=True)
            departing = await self._arrivals(connection, inserted, accepted)
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
        arrived.extend(departing)
        return results

    async def _arrivals(
        self, connection: AsyncConnection, inserted: Sequence[dict[str, Any]], accepted: Sequence[NewMessage]
    ) -> list[int]:
        """What the messages stored outside a transaction earn on arrival: placed here on
        SQLite; on PostgreSQL their outbox rows, placed after the commit (their lookup IDs
        returned), so that the send locks no queue's row but its destinations'."""
        arriving = [row for row in inserted if row["transaction_id"] is None]
        if self._db.sqlite:
            if arriving:
                await Consequences(self._db, connection, accepted[0].arrived_time).follow(
                    arriving, Reason.ARRIVED
                )
            return []
        policy = self._db.policy
        placing = [
            row["lookup_id"]
            for row in arriving
            if policy is not None
            and policy.arrival_may_place(row["journal"], row["admin_queue"], row["acknowledge"])
        ]
        if placing:
            await connection.execute(send_statements.ARRIVALS_TO_OUTBOX, {"lookup_ids": placing})
        return placing

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
        stream = (
            None
            if item.stream is None
            else await self._streams.stream_state(connection, item.stream.stream_id)
        )
        last_accepted = None if stream is None else stream.last_ordinal
        if item.stream is not None and not streams.accepts(last_accepted, item.stream):
            return EnqueueOutcome.DUPLICATE  # or out of order: the sender resends in order
        if item.stream is not None and stream is None:
            if not await self._streams.room_for_stream(connection, item.stream):
                return EnqueueOutcome.STREAM_LIMIT_REACHED
        queue = totals[item.queue_id]
        size = rules.stored_size(item.properties)
        outcome = rules.admit(
            size, queue.byte_count, queue.quota_kb, room.byte_count, room.quota_kb, room.throttled
        )
        if outcome is not EnqueueOutcome.ACCEPTED:
            return outcome
        if item.stream is not None and not await self._streams.advance_stream(
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
        statement = (
            send_statements.REMEMBER_SQLITE if self._db.sqlite else send_statements.REMEMBER_POSTGRESQL
        )
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
            await connection.execute(send_statements.FORGET, {"keys": refused})

    async def _room(
        self, connection: AsyncConnection, items: Sequence[NewMessage]
    ) -> tuple[dict[int, QueueRoom], MachineRoom, list[int] | None]:
        """Lock the destinations' rows in id order (no deadlocks); return what each holds, and
        the queue manager's quota and throttle as stored now (one statement) with its bytes
        when a quota is set. On PostgreSQL the same statement takes a counter per message,
        returned ascending (those of messages refused later stay unused: gaps are normal);
        SQLite's come with the insert (None).

        A message whose queue was deleted meanwhile (its ID gone, or reused by a newer queue
        under another name) fails the batch with MQ_ERROR_QUEUE_NOT_FOUND; the group commit
        then retries each request alone, so only the messages for that queue fail."""
        values: dict[str, Any] = {"queue_ids": sorted({item.queue_id for item in items})}
        if self._db.sqlite:
            statement = send_statements.QUEUE_ROOM
        else:
            statement, values["count"] = send_statements.QUEUE_ROOM_WITH_COUNTERS, len(items)
        found = {row["id"]: row for row in await driver_sql.fetch(connection, statement, values)}
        for item in items:  # every message: two in a batch may name one ID by different paths
            row = found.get(item.queue_id)
            if row is None or (item.queue_key is not None and row["path_key"] != item.queue_key):
                raise MqError(MqErrorCode.MQ_ERROR_QUEUE_NOT_FOUND, "the queue was deleted meanwhile")
        limits = next(iter(found.values()))
        byte_count = 0  # nothing to check against without a quota: skip the sum
        if limits["machine_quota_kb"] != INFINITE:
            byte_count = int((await connection.execute(send_statements.MACHINE_BYTES)).scalar() or 0)
        machine = MachineRoom(limits["machine_quota_kb"], bool(limits["throttled"]), byte_count)
        counters = None if self._db.sqlite else sorted(limits[send_statements.COUNTERS])
        totals = {row["id"]: QueueRoom(row["byte_count"], row["quota_kb"]) for row in found.values()}
        return totals, machine, counters


def _first_of_each_key(items: Sequence[NewMessage]) -> list[int]:
    """The indices of a batch's messages but those whose duplicate key an earlier one has."""
    keys: set[str | None] = set()
    chosen = []
    for index, item in enumerate(items):
        if item.duplicate_key is None or item.duplicate_key not in keys:
            chosen.append(index)
            keys.add(item.duplicate_key)
    return chosen
