"""Carry out, inside one transaction, what follows an arrival or a removal (qm.disposal)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from qm import rules
from qm.disposal import Departure, Placement, PlacementKind, Reason
from qm.final_receipts import StreamOrigin, final_class
from qm.model import JournalFlags, NewMessage
from qm.paths import QueueKind, QueuePath
from storage import rows
from storage.database import Database
from storage.inserts import insert_messages
from storage.outgoing_room import OutgoingPlacement
from storage.tables import messages, queues, srmp_streams
from storage.totals import add_to_totals

q = queues.c
m = messages.c
s = srmp_streams.c
log = logging.getLogger(__name__)
Target = tuple[int, int, int, bool]
"""A placement's target queue: id, bytes stored, quota (KB), transactional."""
QueueFacts = dict[int, tuple[QueuePath, bool]]
"""Queue id -> (its path, whether its journal is on)."""


class Consequences:
    """Totals, journal and dead-letter copies and acknowledgments, in the caller's transaction."""

    def __init__(self, db: Database, connection: AsyncConnection, now: datetime) -> None:
        self._db = db
        self._connection = connection
        self._now = now

    async def removed(
        self, gone: Sequence[Mapping[Any, Any]], reason: Reason | None, known: QueueFacts | None = None
    ) -> None:
        """Rows just deleted from `messages`: subtract them, then place what their removal earns."""
        if gone:
            await self.settle(gone, [] if reason is None else await self.earned(gone, reason, known))

    async def settle(self, gone: Sequence[Mapping[Any, Any]], placements: Sequence[Placement]) -> None:
        """What a transaction's message-row changes earn, after all of them: the rows of the
        queues `gone` left and of the queues the placements go to are locked in one sweep, in
        ID order, as a send batch locks its queues; then `gone` is subtracted from the totals
        and the placements are inserted. Locking in several sweeps (one per kind of removal,
        or the totals before the placements' targets) can take a lower queue after a higher
        one, and deadlock (tests/contract/test_lock_order*.py)."""
        if placements:
            sources = {row["queue_id"] for row in gone}
            targets = _after(await self._targets({p.target.key for p in placements}, sources), gone)
        if gone:
            await add_to_totals(self._connection, gone, sign=-1)
        if placements:
            await self._place(placements, targets)

    async def follow(
        self, affected: Sequence[Mapping[Any, Any]], reason: Reason, known: QueueFacts | None = None
    ) -> None:
        """Place what the policy asks for each message (for ARRIVED: rows now available).
        `known` saves looking up queues the caller already has (the hot receive path)."""
        await self.settle([], await self.earned(affected, reason, known))

    async def earned(
        self, affected: Sequence[Mapping[Any, Any]], reason: Reason, known: QueueFacts | None = None
    ) -> list[Placement]:
        """What the policy places for each message, not yet placed (`settle` places it)."""
        policy = self._db.policy
        if policy is not None and reason is Reason.ARRIVED:
            affected = [
                row
                for row in affected
                if policy.arrival_may_place(row["journal"], row["admin_queue"], row["acknowledge"])
            ]
        if policy is None or not affected:
            return []
        placements: list[Placement] = []
        for departure in await self._departures(affected, reason, known):
            placements.extend(policy.consequences(departure, reason, self._now))
        return placements

    async def final_receipts_earned(
        self, gone: Sequence[Mapping[Any, Any]], reason: Reason
    ) -> list[Placement]:
        """Only the final receipts (reference §4.4) of messages removed by a caller that places
        their other consequences itself (a trigger's rejection)."""
        policy = self._db.policy
        if policy is None or not gone:
            return []
        departures = await self._departures(gone, reason)
        return [p for d in departures for p in policy.final_receipt(d, reason, self._now)]

    async def concluded(self, gone: Sequence[Mapping[Any, Any]], reason: Reason) -> None:
        """Rows just deleted from an outgoing queue on a final receipt: subtract them, and place
        the sender's dead letter of a negative outcome (DisposalPolicy.settled_at_source)."""
        policy = self._db.policy
        placements: list[Placement] = []
        if policy is not None and gone:
            departures = await self._departures(gone, reason)
            placements = [p for d in departures for p in policy.settled_at_source(d, reason)]
        await self.settle(gone, placements)

    async def _departures(
        self, affected: Sequence[Mapping[Any, Any]], reason: Reason, known: QueueFacts | None = None
    ) -> list[Departure]:
        wanted = {row["queue_id"] for row in affected}
        queues_of = dict(known or {})
        if wanted - queues_of.keys():
            queues_of |= await self._queue_facts(wanted - queues_of.keys())
        origins = await self._stream_origins(affected, reason)
        departures = []
        for row in affected:
            path, journal = queues_of[row["queue_id"]]
            message = rows.message_from_row(row)
            origin = None if message.stream is None else origins.get(message.stream.stream_id)
            departures.append(Departure(message, path, journal, bool(row["transactional"]), origin))
        return departures

    async def _stream_origins(
        self, affected: Sequence[Mapping[Any, Any]], reason: Reason
    ) -> dict[str, StreamOrigin]:
        """The incoming streams of the messages that may earn a final receipt; none looked up
        for reasons that are no final outcome (arrival, the sender's own outcomes)."""
        if final_class(reason.value) is None:
            return {}
        stream_ids = {
            row["srmp_stream_id"]
            for row in affected
            if row["srmp_stream_id"] is not None
            and row["transactional"]
            and row["journal"] & JournalFlags.DEADLETTER
        }
        if not stream_ids:
            return {}
        columns = (s.stream_id, s.send_receipts_to, s.destination, s.last_ordinal)
        statement = sa.select(*columns).where(s.stream_id.in_(sorted(stream_ids)))
        return {
            row.stream_id: StreamOrigin(
                row.stream_id, row.send_receipts_to, row.destination, row.last_ordinal
            )
            for row in await self._connection.execute(statement)
        }

    async def place(self, placements: Sequence[Placement]) -> None:
        """Insert each placement in its target queue, within the target's quota; drop the rest."""
        await self.settle([], placements)

    async def _place(self, placements: Sequence[Placement], targets: dict[str, Target]) -> None:
        if not placements:
            return
        outgoing = OutgoingPlacement(self._db, self._connection, self._now, self._targets)
        placements = [p for p in placements if await outgoing.admits(p, targets)]
        accepted: list[NewMessage] = []
        for placement in placements:
            target = targets.get(placement.target.key)
            size = rules.stored_size(placement.properties)
            if target is None or rules.exceeds(target[1] + size, target[2]) or _refuses(placement, target):
                log.info(
                    "dropped a %s copy for %s: no room there", placement.kind.value, placement.target.url_path
                )
                continue
            targets[placement.target.key] = (target[0], target[1] + size, target[2], target[3])
            accepted.append(_new_message(placement, target[0], self._now))
        await insert_messages(self._db, self._connection, accepted)

    async def _queue_facts(self, queue_ids: Iterable[int]) -> QueueFacts:
        statement = sa.select(q.id, q.kind, q.name, q.journal_of, q.journal).where(q.id.in_(list(queue_ids)))
        return {
            row.id: (QueuePath(QueueKind(row.kind), row.name, row.journal_of is not None), row.journal)
            for row in await self._connection.execute(statement)
        }

    async def _targets(self, keys: Iterable[str], also_locked: Iterable[int] = ()) -> dict[str, Target]:
        """The placements' queues by path key, their rows locked in ID order on PostgreSQL
        (with `also_locked`'s, in the same sweep) so that the quotas are checked on totals
        no one else changes before the commit."""
        columns = (q.path_key, q.id, q.byte_count, q.quota_kb, q.transactional)
        chosen = sa.or_(q.path_key.in_(list(keys)), q.id.in_(list(also_locked)))
        statement = sa.select(*columns).where(chosen).order_by(q.id)
        if not self._db.sqlite:
            statement = statement.with_for_update(key_share=True)  # FOR NO KEY UPDATE, as the totals take
        return {
            row.path_key: (row.id, row.byte_count, row.quota_kb, row.transactional)
            for row in await self._connection.execute(statement)
        }


def _after(targets: dict[str, Target], gone: Sequence[Mapping[Any, Any]]) -> dict[str, Target]:
    """The targets' bytes as they are once `gone` has left (read before it was subtracted)."""
    leaving: dict[int, int] = {}
    for row in gone:
        leaving[row["queue_id"]] = leaving.get(row["queue_id"], 0) + row["body_size"]
    return {
        key: (queue_id, stored - leaving.get(queue_id, 0), quota, transactional)
        for key, (queue_id, stored, quota, transactional) in targets.items()
    }


def _refuses(placement: Placement, target: Target) -> bool:
    """Acknowledgments are not transactional: a transactional admin queue cannot take them."""
    return placement.kind is PlacementKind.ACKNOWLEDGMENT and target[3]


def _new_message(placement: Placement, queue_id: int, now: datetime) -> NewMessage:
    """Copies and acknowledgments do not expire where the queue manager puts them. A queue
    journal copy is made by a receive, a dead-letter copy when the message died: `now`."""
    kind = placement.kind
    return NewMessage(
        queue_id=queue_id,
        properties=placement.properties,
        message_id=placement.message_id,
        sent_time=placement.sent_time,
        arrived_time=now,
        source_machine=placement.source_machine,
        ttbr_deadline=None,
        ttrq_deadline=None,
        destination_queue=placement.destination_queue,
        original_arrived_time=placement.original_arrived_time,
        received_time=now if kind is PlacementKind.JOURNAL else None,
        dead_lettered_time=now if kind is PlacementKind.DEAD_LETTER else None,
        stream=placement.stream,
        transactional=placement.transactional,
        srmp_source=placement.on_behalf_of,
    )


async def remove_past_deadline(
    db: Database, due: sa.Select[tuple[int]], deadline: str, reason: Reason, now: datetime
) -> int:
    """Delete the messages `due` selects, in one transaction, and follow each in the order of
    its `deadline` column (then lookup ID) with what `reason` earns. Several processes on
    PostgreSQL never take the same rows (SKIP LOCKED)."""
    if not db.sqlite:
        due = due.with_for_update(skip_locked=True)
    async with db.transaction() as connection:
        statement = sa.delete(messages).where(m.lookup_id.in_(due)).returning(*messages.c)
        found = (await connection.execute(statement)).mappings().all()
        gone = sorted(found, key=lambda row: (row[deadline], row["lookup_id"]))
        await Consequences(db, connection, now).removed(gone, reason)
    return len(gone)
