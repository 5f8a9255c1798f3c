"""Outgoing queues made by the queue manager's own messages (acknowledgments and final
receipts for remote queues): only for destinations MSMQGW_SRMP_OUTBOUND_HOSTS allows, and, on
an anonymous SRMP sender's account, within the limits per source and in all
(qm.outbound.OutgoingQueueLimits). The count is the store's rows, so it holds across
restarts and gateway processes."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from datetime import datetime

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from qm.disposal import Placement
from qm.model import QueueSettings
from qm.outbound import OutgoingRefusal
from qm.paths import QueueKind, QueuePath
from storage import rows
from storage.database import Database
from storage.tables import outgoing_queues, queues

q = queues.c
o = outgoing_queues.c
log = logging.getLogger(__name__)
Targets = dict[str, tuple[int, int, int, bool]]
"""storage.consequences.Target by path key."""
TargetLookup = Callable[[Iterable[str]], Awaitable[Targets]]


class OutgoingPlacement:
    """Decides, inside the placing transaction, whether a placement for an outgoing queue
    goes there, making the queue when it may."""

    def __init__(
        self, db: Database, connection: AsyncConnection, now: datetime, targets_of: TargetLookup
    ) -> None:
        self._db = db
        self._connection = connection
        self._now = now
        self._targets_of = targets_of
        """Looks up (and on PostgreSQL locks) placement targets by path key."""

    async def admits(self, placement: Placement, targets: Targets) -> bool:
        """True for every placement into a local queue. For an outgoing one: whether it may go
        there; a queue it needs is made and added to `targets`. A refused one is dropped, as
        MSMQ loses an acknowledgment it cannot deliver, logged and counted (Database.dropped)."""
        path = placement.target
        if path.kind is not QueueKind.OUTGOING:
            return True
        refusal = await self._refusal(placement, targets)
        if refusal is None:
            return True
        Database.dropped(self._connection, placement.kind.value, refusal.value)
        log.info(
            "dropped a %s for %r (%s, for %s)",
            placement.kind.value,
            path.name,
            refusal.value,
            placement.on_behalf_of or "a principal",
        )
        return False

    async def _refusal(self, placement: Placement, targets: Targets) -> OutgoingRefusal | None:
        policy = self._db.policy
        path = placement.target
        if policy is not None and not policy.may_send_to(path):
            return OutgoingRefusal.NOT_ALLOWED
        if path.key in targets:
            return None  # the queue is there: using it makes nothing
        source = placement.on_behalf_of
        if policy is not None and source is not None:
            refusal = policy.outgoing_limits.refusal(*await self._made_for(source))
            if refusal is not None:
                return refusal
        await create_outgoing_queue(self._connection, path, self._now, source)
        targets |= await self._targets_of([path.key])
        return None

    async def _made_for(self, source: str) -> tuple[int, int]:
        """How many outgoing queues exist that were made for `source`, and for any anonymous
        sender. Two transactions of several processes may both see room for the last one: the
        limit can be passed by as many as make queues at the same moment."""
        count = sa.select(sa.func.count()).select_from(outgoing_queues)
        for_source = (await self._connection.execute(count.where(o.made_for == source))).scalar_one()
        for_all = (await self._connection.execute(count.where(o.made_for.is_not(None)))).scalar_one()
        return int(for_source), int(for_all)


async def create_outgoing_queue(
    connection: AsyncConnection, path: QueuePath, now: datetime, made_for: str | None = None
) -> int:
    """Insert the queue and its delivery state unless present; return the queue's id.
    `made_for`: the anonymous SRMP sender's source it is made for (OutgoingQueueLimits)."""
    existing = (await connection.execute(sa.select(q.id).where(q.path_key == path.key))).scalar()
    if existing is not None:
        return int(existing)
    values = rows.queue_values(path, QueueSettings(), now)
    queue_id = int((await connection.execute(sa.insert(queues).values(values).returning(q.id))).scalar_one())
    await connection.execute(
        sa.insert(outgoing_queues).values(
            queue_id=queue_id,
            url=path.name,
            paused=False,
            attempts=0,
            next_attempt_at=0,
            delivered_count=0,
            made_for=made_for,
        )
    )
    return queue_id
