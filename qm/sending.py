"""Sending (reference §7.3): where a message goes, its deadlines and transaction, admission by
the store, and what a queue over its quota earns."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import TYPE_CHECKING

from qm import rules
from qm.config import TransactionTtbr
from qm.disposal import Departure, PlacementKind, Reason
from qm.errors import MqError, MqErrorCode, QuotaExceeded
from qm.model import Message, MessageProperties, NewMessage, Queue
from qm.paths import QueueKind, QueuePath
from qm.store import EnqueueOutcome
from qm.streams import StreamPosition
from qm.transactions import SINGLE_MESSAGE_TRANSACTION

if TYPE_CHECKING:
    from qm.manager import QueueManager


@dataclass(frozen=True, slots=True)
class Arrival:
    """What `deliver` was asked to store, kept together for a second attempt."""

    properties: MessageProperties
    transaction: str | None
    duplicate_key: str | None
    boundaries: tuple[bool, bool] | None
    stream: StreamPosition | None
    source: str | None = None


class Sending:
    """The sending operations of a queue manager."""

    def __init__(self, qm: QueueManager) -> None:
        self._qm = qm

    async def deliver(
        self,
        path_text: str,
        properties: MessageProperties,
        transaction: str | None = None,
        duplicate_key: str | None = None,
        boundaries: tuple[bool, bool] | None = None,
        stream: StreamPosition | None = None,
        source: str | None = None,
    ) -> Message | None:
        """Enqueue a message that may arrive more than once (SRMP retries): None when
        `duplicate_key` (the sender's message ID) came from the same source queue manager to
        the same queue within the duplicate window, and nothing is stored.
        `boundaries` are the sender's first/last-in-transaction marks (SRMP `<Eod>`); `source`
        the anonymous SRMP sender's (Message.srmp_source)."""
        path = self._qm.destination(path_text)
        if not path.writable and path.kind is not QueueKind.OUTGOING:
            raise MqError(
                MqErrorCode.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION,
                f"{path.url_path} is read-only: only the queue manager writes journal and dead-letter queues",
            )
        rules.validate_properties(properties, self._qm.config.max_body_bytes)
        if path.kind is QueueKind.OUTGOING and self._qm.outbound_target(path.name) is None:
            raise MqError(
                MqErrorCode.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION,
                f"{path.pathname}: the gateway sends only to hosts in MSMQGW_SRMP_OUTBOUND_HOSTS",
            )
        arrival = Arrival(properties, transaction, duplicate_key, boundaries, stream, source)
        stored = await self._qm.with_known_queue(path, lambda queue: self._deliver_to(queue, arrival))
        if stored is not None and (stream is not None or path.kind is QueueKind.OUTGOING):
            self._qm.outbound_work.set()
        return stored

    async def refuse_arrival(
        self, path: QueuePath, properties: MessageProperties, message_id: str, source: str | None = None
    ) -> bool:
        """A message the sender may not write to `path` (MQMSG_CLASS_NACK_ACCESS_DENIED): stored
        nowhere; its negative acknowledgment placed where it asked for one. True if placed
        (it may still be dropped there: OutgoingRefusal)."""
        now = self._qm.clock.now()
        policy = self._qm.policy
        placements = policy.refused_arrival(properties, message_id, path, Reason.ACCESS_DENIED, now, source)
        if not placements:
            return False
        await self._qm.store.messages.place(placements, now)
        if any(placement.target.kind is QueueKind.OUTGOING for placement in placements):
            self._qm.outbound_work.set()
        return True

    async def _deliver_to(self, queue: Queue, arrival: Arrival) -> Message | None:
        held_by = await self._send_transaction(queue, arrival.transaction)
        properties = arrival.properties
        if arrival.transaction is not None:
            properties = await self._transactional(properties, held_by)
        new_message = self._new_message(queue, properties, held_by, arrival)
        return await self._enqueue(queue, new_message)

    async def _transactional(self, properties: MessageProperties, held_by: str | None) -> MessageProperties:
        """Priority 0, and (MSMQ's rule, unless configured otherwise) the TTBR of the
        transaction's first message."""
        ttbr = properties.time_to_be_received
        if held_by is not None and self._qm.config.transaction_ttbr is TransactionTtbr.FIRST_MESSAGE:
            ttbr = await self._qm.store.transactions.transaction_ttbr(held_by, ttbr)
        return dataclasses.replace(properties, priority=0, time_to_be_received=ttbr)

    async def _send_transaction(self, queue: Queue, transaction: str | None) -> str | None:
        """Check §7.8's pairing of transactional queues and sends; return the holder. An
        outgoing queue takes both (the remote queue decides; transactional ones travel as a stream)."""
        outgoing = queue.path.kind is QueueKind.OUTGOING
        if not outgoing and queue.settings.transactional != (transaction is not None):
            wanted = "inside a transaction" if queue.settings.transactional else "without one"
            raise MqError(
                MqErrorCode.MQ_ERROR_TRANSACTION_USAGE,
                f"{queue.path.url_path} accepts only messages sent {wanted}",
            )
        if transaction is None or transaction == SINGLE_MESSAGE_TRANSACTION:
            return None
        await self._qm._active_transaction(transaction)
        return transaction

    def _new_message(
        self, queue: Queue, properties: MessageProperties, transaction: str | None, arrival: Arrival
    ) -> NewMessage:
        """Deadlines from now; TTBR wins over a later TTRQ (a message never outlives its TTBR).
        Built in one go: each dataclasses.replace() of it cost about 10 us per send."""
        now = self._qm.clock.now()
        ttbr_deadline = rules.deadline(now, properties.time_to_be_received)
        ttrq_deadline = rules.deadline(now, properties.time_to_reach_queue)
        if ttbr_deadline is not None and (ttrq_deadline is None or ttrq_deadline > ttbr_deadline):
            ttrq_deadline = ttbr_deadline
        transactional = arrival.transaction is not None
        single = transactional and transaction is None
        first, last = (single, single) if arrival.boundaries is None else arrival.boundaries
        return NewMessage(
            queue_id=queue.id,
            properties=properties,
            message_id=properties.message_id or "",
            sent_time=properties.sent_time or now,
            arrived_time=now,
            source_machine=properties.source_machine or self._qm.guid,
            ttbr_deadline=ttbr_deadline,
            ttrq_deadline=ttrq_deadline,
            transaction_id=transaction,
            first_in_transaction=first,
            last_in_transaction=last,
            transactional=transactional,
            duplicate_key=None
            if arrival.duplicate_key is None
            else rules.duplicate_key(properties.source_machine, queue.id, arrival.duplicate_key),
            stream=None
            if arrival.stream is None
            else dataclasses.replace(
                arrival.stream,
                max_streams_per_sender=self._qm.config.max_streams_per_sender,
                max_streams=self._qm.config.max_streams,
            ),
            queue_key=queue.path.key,
            srmp_source=arrival.source,
        )

    async def _enqueue(self, queue: Queue, new_message: NewMessage) -> Message | None:
        [result] = await self._qm.store.messages.enqueue([new_message])
        if result.outcome is EnqueueOutcome.DUPLICATE:
            return None
        if result.outcome is EnqueueOutcome.STREAM_LIMIT_REACHED:
            raise QuotaExceeded(
                "no room for another incoming stream (MSMQGW_SRMP_MAX_STREAMS_PER_SENDER, "
                "MSMQGW_SRMP_MAX_STREAMS)",
                machine=False,
            )
        if result.outcome is EnqueueOutcome.QUEUE_MANAGER_QUOTA_EXCEEDED:
            raise QuotaExceeded("the queue manager is throttled or its quota is reached", machine=True)
        if result.outcome is EnqueueOutcome.QUEUE_QUOTA_EXCEEDED:
            dead_lettered = await self._refused(queue, new_message)
            raise QuotaExceeded(
                f"the quota of {queue.path.url_path} is reached"
                + ("; the message went to the dead-letter queue" if dead_lettered else ""),
                machine=False,
                dead_lettered=dead_lettered,
            )
        assert result.lookup_id is not None
        return stored_message(result.lookup_id, result.message_id, new_message)

    async def _refused(self, queue: Queue, refused: NewMessage) -> bool:
        """Reference §7.3 step 2: a dead-letter copy (class 0x8003) and a NACK, where asked for."""
        message = stored_message(0, refused.message_id, refused)  # no ID yet: the copy gets one
        queue = (
            await self._qm.store.queues.get_queue(queue.id) or queue
        )  # its settings as they are now, not cached
        departure = Departure(message, queue.path, queue.settings.journal, refused.transactional)
        placements = self._qm.policy.consequences(departure, Reason.QUOTA_EXCEEDED, self._qm.clock.now())
        await self._qm.store.messages.place(placements, self._qm.clock.now())
        return any(placement.kind is PlacementKind.DEAD_LETTER for placement in placements)


def stored_message(lookup_id: int, message_id: str, new_message: NewMessage) -> Message:
    """The message as the store now holds it, without reading it back."""
    return Message(
        lookup_id=lookup_id,
        queue_id=new_message.queue_id,
        message_id=message_id,
        properties=new_message.properties,
        sent_time=new_message.sent_time,
        arrived_time=new_message.arrived_time,
        source_machine=new_message.source_machine,
        ttbr_deadline=new_message.ttbr_deadline,
        ttrq_deadline=new_message.ttrq_deadline,
        first_in_transaction=new_message.first_in_transaction,
        last_in_transaction=new_message.last_in_transaction,
        abort_count=0,
        transaction_id=new_message.transaction_id,
        destination_queue=new_message.destination_queue,
        stream=new_message.stream,
        srmp_source=new_message.srmp_source,
    )
