"""What an operator does to chosen messages (QueueExplorer's daily work, in MSMQ's terms):
delete one by lookup ID, move some to another queue, resend dead letters to the queue they
were sent to, export and import.

- Delete is MQReceiveMessageByLookupId (MQ_LOOKUP_RECEIVE_CURRENT) without the answer: MSMQ
  has no other way to remove one message, so it earns what a receive earns (the queue's
  journal copy, a positive receive acknowledgment, a final receipt).
- Move keeps the message ID and every property (MQMoveMessage's rule): the message is not
  received, it changes queue, so it earns nothing. It gets a new lookup ID (lookup IDs carry
  queue order: it goes behind the messages of its priority, as an arrival does). A
  transactional message goes only to a transactional queue and a non-transactional one only
  to a queue that is not (MQ_ERROR_TRANSACTION_USAGE). All of them move, or none.
- Resend moves dead letters back to their `destination_queue` as new arrivals there: class
  MQMSG_CLASS_NORMAL again and their timers started afresh (the dead letter's own copy never
  expires). All or none.
- Import stores exported messages in a queue, keeping message IDs, sent times and source
  machines, all or none.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from qm import rules
from qm.errors import MqError, MqErrorCode
from qm.manager import QueueManager
from qm.model import Message, MessageClass, MessageProperties, NewMessage, Queue
from qm.paths import QueueKind, QueuePath, SystemQueue, system_queue_path
from qm.reading import QueueReader
from qm.store import Budget, Moved, PositionState, Seek, Selector

MAX_CHOSEN = 1000
"""Messages one move, resend or selected export names, at most."""
EXPORT_PAGE = 100
"""Messages an export reads at a time (its memory stays bounded whatever the queue holds)."""
DEAD_LETTER_QUEUES = frozenset(
    system_queue_path(kind).key for kind in (SystemQueue.DEADLETTER, SystemQueue.DEADXACT)
)


@dataclass(frozen=True, slots=True)
class Imported:
    """One message of an import file: its properties (message ID, sent time and source machine
    included) and its transaction boundaries."""

    properties: MessageProperties
    first_in_transaction: bool = False
    last_in_transaction: bool = False
    line: int = 0
    """Where it was in its file (0: unknown), for errors."""


@dataclass(frozen=True, slots=True)
class Resent:
    """A dead letter sent back: the move, and the queue it went to."""

    moved: Moved
    queue: QueuePath


class Administration:
    """Operations on chosen messages of a queue manager, by queue path."""

    def __init__(self, manager: QueueManager, reader: QueueReader | None = None) -> None:
        self._qm = manager
        self._reader = reader or QueueReader(manager)

    async def delete_message(self, path_text: str, lookup_id: int) -> Message:
        """Receive the message with this lookup ID and drop it (it earns what a receive earns)."""
        return await self._reader.by_lookup_id(path_text, Seek.CURRENT, lookup_id, receive=True)

    async def move_messages(self, path_text: str, lookup_ids: Sequence[int], to_text: str) -> list[Moved]:
        """Move the chosen messages to the queue `to_text` in one transaction."""
        _check_chosen(lookup_ids)
        source = await self._qm.get_queue(path_text)
        target = await self._writable_queue(to_text)
        if target.id == source.id:
            raise MqError(
                MqErrorCode.MQ_ERROR_INVALID_PARAMETER, "a message cannot be moved to its own queue"
            )
        now = self._qm.clock.now()
        moved = await self._qm.store.messages.move(source.id, lookup_ids, lambda m: _moved(m, target), now)
        return [dataclasses.replace(item, message=self._qm._as_read(item.message)) for item in moved]

    async def resend_dead_letters(
        self,
        path_text: str,
        lookup_ids: Sequence[int] | None,
        may_write: Callable[[str], Awaitable[None]] | None = None,
    ) -> list[Resent]:
        """Send the chosen dead letters (None: the first MAX_CHOSEN) back to their destination
        queues; `may_write` refuses (raises) a destination the caller may not write, before
        anything moves."""
        source = await self._qm.get_queue(path_text)
        if source.path.key not in DEAD_LETTER_QUEUES:
            raise MqError(
                MqErrorCode.MQ_ERROR_INVALID_PARAMETER,
                f"{source.path.url_path} is not a dead-letter queue: resend takes messages from "
                "system$;deadletter or system$;deadxact (move takes them from anywhere)",
            )
        chosen = await self._chosen(source, lookup_ids)
        targets = {message.lookup_id: await self._destination(message) for message in chosen}
        if may_write is not None:
            for destination in sorted({m.destination_queue for m in chosen if m.destination_queue}):
                await may_write(destination)
        now = self._qm.clock.now()
        moved = await self._qm.store.messages.move(
            source.id, [m.lookup_id for m in chosen], lambda m: _resent(m, targets[m.lookup_id], now), now
        )
        if any(queue.path.kind is QueueKind.OUTGOING for queue in targets.values()):
            self._qm.outbound_work.set()
        read = [dataclasses.replace(item, message=self._qm._as_read(item.message)) for item in moved]
        return [Resent(item, targets[item.old_lookup_id].path) for item in read]

    async def selected(self, path_text: str, lookup_ids: Sequence[int]) -> AsyncIterator[Message]:
        """The chosen messages, as peeked (an export of a selection): each must be available
        now. Their bodies are read one at a time as they are taken, so a thousand large ones
        are never held at once; one that leaves meanwhile is missing, as in `every_message`."""
        _check_chosen(lookup_ids)
        queue = await self._qm.get_queue(path_text)
        now = self._qm.clock.now()
        for lookup_id in lookup_ids:
            if (
                await self._qm.store.messages.position_state(queue.id, lookup_id, now)
                is not PositionState.AVAILABLE
            ):
                raise _not_available(queue, lookup_id)
        return self._one_at_a_time(queue, lookup_ids)

    async def every_message(self, path_text: str, budget: Budget) -> AsyncIterator[Message]:
        """The queue's available messages in queue order, read a page at a time, each page
        within the budget (an export of the whole queue: not a snapshot, messages that leave
        meanwhile may be missing)."""
        queue = await self._qm.get_queue(path_text)
        return self._pages(queue, budget)

    async def import_messages(self, path_text: str, batch: Sequence[Imported]) -> list[Message]:
        """Store the messages in the queue, all or none."""
        queue = await self._writable_queue(path_text)
        now = self._qm.clock.now()
        new = []
        for number, item in enumerate(batch, start=1):
            try:
                rules.validate_properties(item.properties, self._qm.config.max_body_bytes)
            except MqError as error:
                where = f"line {item.line}" if item.line else f"message {number}"
                raise MqError(error.code, f"{where}: {error.detail}") from None
            new.append(_imported(item, queue, now, self._qm.guid))
        stored = await self._qm.store.messages.insert_all(new)
        return [self._qm._as_read(message) for message in stored]

    async def _pages(self, queue: Queue, budget: Budget) -> AsyncIterator[Message]:
        after = 0
        while True:
            now = self._qm.clock.now()
            page, more = await self._qm.store.messages.browse_within(
                queue.id, after, EXPORT_PAGE, now, budget
            )
            if page:
                after = page[-1].lookup_id
            while page:
                yield self._qm._as_read(page.pop(0))  # not kept once handed on
            if not more:
                return

    async def _one_at_a_time(self, queue: Queue, lookup_ids: Sequence[int]) -> AsyncIterator[Message]:
        for lookup_id in lookup_ids:
            now = self._qm.clock.now()
            message = await self._qm.store.messages.peek(queue.id, Selector(Seek.CURRENT, lookup_id), now)
            if message is not None:
                yield self._qm._as_read(message)

    async def _chosen(self, queue: Queue, lookup_ids: Sequence[int] | None) -> list[Message]:
        now = self._qm.clock.now()
        if lookup_ids is None:
            return await self._qm.store.messages.browse(queue.id, 0, MAX_CHOSEN, now)
        _check_chosen(lookup_ids)
        found = []
        for lookup_id in lookup_ids:
            message = await self._qm.store.messages.peek(queue.id, Selector(Seek.CURRENT, lookup_id), now)
            if message is None:
                raise _not_available(queue, lookup_id)
            found.append(self._qm._as_read(message))
        return found

    async def _writable_queue(self, text: str) -> Queue:
        path = self._qm.resolve(text)
        _check_writable(path)
        return await self._qm.get_queue(text)

    async def _destination(self, message: Message) -> Queue:
        """The queue a dead letter was sent to: a local queue, or the outgoing queue of a remote one."""
        if not message.destination_queue:
            raise MqError(
                MqErrorCode.MQ_ERROR_INVALID_PARAMETER,
                f"message {message.lookup_id} names no destination queue: move it instead",
            )
        path = self._qm.destination(message.destination_queue)
        if path.kind is QueueKind.OUTGOING:
            if self._qm.outbound_target(path.name) is None:
                raise MqError(
                    MqErrorCode.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION,
                    f"{path.pathname}: the gateway sends only to hosts in MSMQGW_SRMP_OUTBOUND_HOSTS",
                )
            return await self._qm._known(path)
        _check_writable(path)
        return await self._qm.get_queue(path.url_path)


def _check_chosen(lookup_ids: Sequence[int]) -> None:
    if not 1 <= len(lookup_ids) <= MAX_CHOSEN:
        raise MqError(
            MqErrorCode.MQ_ERROR_INVALID_PARAMETER,
            f"choose 1 to {MAX_CHOSEN} lookup IDs, not {len(lookup_ids)}",
        )
    if len(set(lookup_ids)) != len(lookup_ids):
        raise MqError(MqErrorCode.MQ_ERROR_INVALID_PARAMETER, "a lookup ID is chosen twice")


def _check_writable(path: QueuePath) -> None:
    if not path.writable:
        raise MqError(
            MqErrorCode.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION,
            f"{path.url_path} is read-only: only the queue manager writes journal and dead-letter queues",
        )


def _check_pairing(message: Message, target: Queue) -> None:
    """A transactional queue takes only transactional messages, and the other way round."""
    if target.path.kind is not QueueKind.OUTGOING and message.transactional != target.settings.transactional:
        sent = "in a transaction" if message.transactional else "without a transaction"
        raise MqError(
            MqErrorCode.MQ_ERROR_TRANSACTION_USAGE,
            f"message {message.lookup_id} was sent {sent}; {target.path.url_path} "
            f"{'is' if target.settings.transactional else 'is not'} transactional",
        )


def _moved(message: Message, target: Queue) -> NewMessage:
    _check_pairing(message, target)
    return NewMessage(
        queue_id=target.id,
        properties=message.properties,
        message_id=message.message_id,
        sent_time=message.sent_time,
        arrived_time=message.arrived_time,
        source_machine=message.source_machine,
        ttbr_deadline=message.ttbr_deadline,
        ttrq_deadline=message.ttrq_deadline,
        first_in_transaction=message.first_in_transaction,
        last_in_transaction=message.last_in_transaction,
        destination_queue=message.destination_queue,
        transactional=message.transactional,
        stream=message.stream,
        queue_key=target.path.key,
        srmp_source=message.srmp_source,
    )


def _resent(message: Message, target: Queue, now: datetime) -> NewMessage:
    _check_pairing(message, target)
    properties = dataclasses.replace(message.properties, message_class=MessageClass.NORMAL)
    ttbr_deadline, ttrq_deadline = _deadlines(properties, now)
    return NewMessage(
        queue_id=target.id,
        properties=properties,
        message_id=message.message_id,
        sent_time=message.sent_time,
        arrived_time=now,
        source_machine=message.source_machine,
        ttbr_deadline=ttbr_deadline,
        ttrq_deadline=ttrq_deadline,
        first_in_transaction=message.first_in_transaction,
        last_in_transaction=message.last_in_transaction,
        transactional=message.transactional,
        queue_key=target.path.key,
        srmp_source=message.srmp_source,  # its acknowledgments stay on its sender's account
    )


def _imported(item: Imported, queue: Queue, now: datetime, guid: uuid.UUID) -> NewMessage:
    properties = item.properties
    transactional = queue.settings.transactional
    if transactional:  # as a transactional send stores it
        properties = dataclasses.replace(properties, priority=0)
    ttbr_deadline, ttrq_deadline = _deadlines(properties, now)
    return NewMessage(
        queue_id=queue.id,
        properties=properties,
        message_id=properties.message_id or "",
        sent_time=properties.sent_time or now,
        arrived_time=now,
        source_machine=properties.source_machine or guid,
        ttbr_deadline=ttbr_deadline,
        ttrq_deadline=ttrq_deadline,
        first_in_transaction=transactional and item.first_in_transaction,
        last_in_transaction=transactional and item.last_in_transaction,
        transactional=transactional,
        queue_key=queue.path.key,
    )


def _deadlines(properties: MessageProperties, now: datetime) -> tuple[datetime | None, datetime | None]:
    """From now, as a send sets them: a message never outlives its TTBR."""
    ttbr = rules.deadline(now, properties.time_to_be_received)
    ttrq = rules.deadline(now, properties.time_to_reach_queue)
    if ttbr is not None and (ttrq is None or ttrq > ttbr):
        ttrq = ttbr
    return ttbr, ttrq


def _not_available(queue: Queue, lookup_id: int) -> MqError:
    return MqError(
        MqErrorCode.MQ_ERROR_MESSAGE_NOT_FOUND,
        f"{queue.path.url_path}: no available message with lookup ID {lookup_id}",
    )
