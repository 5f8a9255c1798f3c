"""Delivery of outgoing queues: each due queue sends its messages in queue order, one at a time,
until it is empty or its destination fails (then it waits on the retry schedule). Transactional
messages travel as a stream (reference §4) and stay until a stream receipt covers them.

Several gateway processes may share one database: a process sends from a queue only while it
holds the queue's lease (taken before the first POST, renewed before each one, given up when
the drain ends), so one process at a time sends each queue, in order."""

from __future__ import annotations

import logging

from app.outbound.client import SrmpClient
from qm.model import Message
from qm.outbound import OutgoingQueue, Verdict
from qm.outgoing import OutgoingQueues
from soap import TimerMapping
from soap.envelope import Stream
from soap.ids import StreamId
from soap.outbound import envelope_for

log = logging.getLogger(__name__)


class OutgoingDelivery:
    def __init__(self, outgoing: OutgoingQueues, client: SrmpClient, mapping: TimerMapping) -> None:
        self._outgoing = outgoing
        self._client = client
        self._mapping = mapping

    async def send_due(self) -> int:
        """One pass over the due queues; return how many messages were delivered."""
        delivered = 0
        for queue in await self._outgoing.due():
            if not await self._outgoing.hold(queue):
                continue  # another process sends it
            try:
                delivered += await self._drain(queue)
            finally:
                await self._let_go(queue)
        return delivered

    async def _let_go(self, queue: OutgoingQueue) -> None:
        """Also on cancellation (the service stops): the next process need not wait out the lease."""
        try:
            await self._outgoing.let_go(queue)
        except Exception:
            log.warning("outgoing queue %s: lease not released; it runs out", queue.url, exc_info=True)

    async def _drain(self, queue: OutgoingQueue) -> int:
        delivered = 0
        target = self._outgoing.target(queue)
        while (message := await self._outgoing.head(queue)) is not None:
            if not await self._outgoing.hold(queue):
                log.warning("outgoing queue %s: lease lost to another process; it sends on", queue.url)
                return delivered
            if target is None:  # e.g. an acknowledgment to a sender-supplied admin URL
                await self._outgoing.refused(queue, message, "host not in MSMQGW_SRMP_OUTBOUND_HOSTS")
                continue
            stream = await self._stream(queue, message) if message.transactional else None
            envelope = envelope_for(message, queue.url, self._outgoing.now(), self._mapping, stream)
            result = await self._client.post(target, envelope)
            if result.verdict is Verdict.RETRY:
                log.info("outgoing queue %s: %s; retrying later", queue.url, result.describe())
                await self._outgoing.failed(queue, result.describe())
                return delivered
            if result.verdict is Verdict.REFUSED:
                log.warning(
                    "outgoing queue %s refused %s: %s", queue.url, message.message_id, result.describe()
                )
                await self._outgoing.refused(queue, message, result.describe())
                continue
            if stream is not None:
                await self._outgoing.stream_sent(message)  # delivered once a stream receipt covers it
            else:
                await self._outgoing.delivered(queue, message)
            delivered += 1
        return delivered

    async def _stream(self, queue: OutgoingQueue, message: Message) -> Stream:
        position = await self._outgoing.stream_position(queue, message)
        first = position.ordinal == 1
        return Stream(
            StreamId.parse(position.stream_id),
            position.ordinal,
            position.previous,
            self._outgoing.receipts_url if first else None,
            receipt_requested=True,
        )
