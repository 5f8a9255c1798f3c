"""Outgoing queues as the operator and the delivery loop see them (reference §2.2)."""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta

from qm.disposal import Reason
from qm.errors import MqError, MqErrorCode
from qm.manager import QueueManager
from qm.model import Message
from qm.outbound import (
    OutgoingQueue,
    OutgoingStreamPosition,
    lease_needs_renewal,
    new_stream_id,
    retry_delay,
)


class OutgoingQueues:
    """`owner` names this process in the sending leases (several processes may share a database)."""

    def __init__(self, manager: QueueManager, owner: str | None = None) -> None:
        self._qm = manager
        self.owner = owner or secrets.token_hex(8)
        self._held: dict[int, datetime] = {}
        """Queue ID -> when the lease this process holds on it runs out."""

    async def all(self) -> list[OutgoingQueue]:
        return await self._qm.store.outgoing.list_outgoing_queues()

    async def page(self, after: int, limit: int) -> list[OutgoingQueue]:
        """Keyset paging by queue ID: the queues after `after`, at most `limit`."""
        return await self._qm.store.outgoing.list_outgoing_queues(after, limit)

    async def delete(self, queue_id: int, purge: bool) -> int:
        """Delete an outgoing queue (made again by the next send to its destination). One that
        holds messages is refused (MQ_ERROR_ILLEGAL_OPERATION) unless `purge`: its messages are
        purged first (dead letters and NACKs, class 0x8001). Returns how many were purged."""
        outgoing = await self.get(queue_id)
        purged = 0
        if outgoing.queue.message_count:
            if not purge:
                raise MqError(
                    MqErrorCode.MQ_ERROR_ILLEGAL_OPERATION,
                    f"outgoing queue {queue_id} holds {outgoing.queue.message_count} messages; "
                    "purge them with it (?purge=true) or let them go first",
                )
            purged = await self.purge(queue_id)
        self._qm.known_queues.forget(outgoing.queue.path.key)
        await self._qm.store.queues.delete_queue(queue_id, self._qm.clock.now())
        return purged

    async def get(self, queue_id: int) -> OutgoingQueue:
        found = await self._qm.store.outgoing.get_outgoing_queue(queue_id)
        if found is None:
            raise MqError(MqErrorCode.MQ_ERROR_QUEUE_NOT_FOUND, f"no outgoing queue {queue_id}")
        return found

    async def pause(self, queue_id: int) -> OutgoingQueue:
        await self.get(queue_id)
        await self._qm.store.outgoing.set_outgoing_paused(queue_id, True, self._qm.clock.now())
        return await self.get(queue_id)

    async def resume(self, queue_id: int) -> OutgoingQueue:
        """Resume, and try at once: an operator resumes after fixing the cause."""
        await self.get(queue_id)
        await self._qm.store.outgoing.set_outgoing_paused(queue_id, False, self._qm.clock.now())
        return await self.get(queue_id)

    async def purge(self, queue_id: int) -> int:
        """Drop the waiting messages; each earns its dead letter and NACK (class 0x8001)."""
        await self.get(queue_id)
        return await self._qm.store.queues.purge_queue(
            queue_id, self._qm.clock.now(), Reason.DELETED_IN_TRANSIT
        )

    # -- the delivery loop --------------------------------------------------------------

    async def due(self) -> list[OutgoingQueue]:
        """Queues to send now that no other process holds a live lease on."""
        return await self._qm.store.outgoing.due_outgoing_queues(self._qm.clock.now(), self.owner)

    async def hold(self, outgoing: OutgoingQueue) -> bool:
        """Take or keep the lease on sending `outgoing`; False when another process holds it.

        Call before every POST: the lease is renewed when less than two thirds of it is left
        (`lease_needs_renewal`), with a conditional UPDATE that succeeds only for a queue nobody
        holds, held by this process, or whose lease ran out (its owner stopped renewing)."""
        queue_id = outgoing.queue.id
        now = self._qm.clock.now()
        lease_s = self._qm.config.outgoing_lease_s
        if not lease_needs_renewal(self._held.get(queue_id), now, lease_s):
            return True
        until = now + timedelta(seconds=lease_s)
        if await self._qm.store.outgoing.acquire_outgoing_lease(queue_id, self.owner, now, until):
            self._held[queue_id] = until
            return True
        self._held.pop(queue_id, None)
        return False

    async def let_go(self, outgoing: OutgoingQueue) -> None:
        """Give the lease up (the queue is drained, waiting to connect, or this process stops):
        any process may send from it at its next attempt."""
        if self._held.pop(outgoing.queue.id, None) is not None:
            await self._qm.store.outgoing.release_outgoing_lease(outgoing.queue.id, self.owner)

    async def head(self, outgoing: OutgoingQueue) -> Message | None:
        """The next message to send; stream messages awaiting their receipt only when due again."""
        now = self._qm.clock.now()
        resend_before = now - timedelta(seconds=self._qm.config.stream_resend_s)
        return await self._qm.store.outgoing.outgoing_head(outgoing.queue.id, now, resend_before)

    async def stream_position(self, outgoing: OutgoingQueue, message: Message) -> OutgoingStreamPosition:
        """A transactional message travels in the queue's stream (reference §4.1)."""
        now = self._qm.clock.now()
        candidate = new_stream_id(now)
        return await self._qm.store.outgoing.outgoing_stream_position(
            outgoing.queue.id, message.lookup_id, candidate, now
        )

    async def stream_sent(self, message: Message) -> None:
        """Accepted by the receiver; it stays here until a stream receipt covers it."""
        await self._qm.store.outgoing.outgoing_stream_sent(message.lookup_id, self._qm.clock.now())

    @property
    def receipts_url(self) -> str:
        return self._qm.config.receipts_url

    def now(self) -> datetime:
        return self._qm.clock.now()

    def target(self, outgoing: OutgoingQueue) -> str | None:
        return self._qm.outbound_target(outgoing.url)

    async def delivered(self, outgoing: OutgoingQueue, message: Message) -> None:
        """The destination took it: gone from here, with the positive source-journal copy."""
        await self._finish(outgoing, message, Reason.DELIVERED)

    async def refused(self, outgoing: OutgoingQueue, message: Message, error: str) -> None:
        """Undeliverable for good (400): dead letter at the source and NACK where asked for."""
        await self._qm.store.outgoing.outgoing_refusal_noted(
            outgoing.queue.id, f"{message.message_id}: {error}"
        )
        await self._finish(outgoing, message, Reason.REFUSED_BY_DESTINATION)

    async def failed(self, outgoing: OutgoingQueue, error: str) -> None:
        """Transient failure: the queue waits to connect, on an exponential schedule."""
        now = self._qm.clock.now()
        config = self._qm.config
        retry_at = now + retry_delay(outgoing.attempts + 1, config.retry_min_s, config.retry_max_s)
        await self._qm.store.outgoing.outgoing_failed(outgoing.queue.id, error, retry_at, now)

    async def _finish(self, outgoing: OutgoingQueue, message: Message, reason: Reason) -> None:
        now = self._qm.clock.now()
        await self._qm.store.outgoing.outgoing_finished(outgoing.queue.id, message.lookup_id, reason, now)
