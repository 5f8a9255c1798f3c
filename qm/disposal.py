"""What follows when a message arrives in or leaves a queue (reference §7.6, §7.12-§7.14).

Pure rules: given the message, its queue and the reason, return the messages the queue
manager itself must place — the journal copy, the dead-letter copy, the acknowledgment,
the computer-journal copy. The store places them in the same transaction as the change.
"""

from __future__ import annotations

import dataclasses
import enum
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from qm import acks, final_receipts
from qm.errors import MqError
from qm.final_receipts import StreamOrigin
from qm.format_names import LocalIdentity, local_queue_path, parse_format_name
from qm.model import JournalFlags, Message, MessageClass, MessageProperties
from qm.outbound import OutgoingQueueLimits
from qm.paths import (
    QueueKind,
    QueuePath,
    SystemQueue,
    outgoing_queue_path,
    parse_queue_path,
    system_queue_path,
)
from qm.streams import StreamPosition


class Reason(enum.Enum):
    """Why a message arrived in or left its queue; the NACK class it earns, where one applies."""

    ARRIVED = MessageClass.ACK_REACH_QUEUE
    RECEIVED = MessageClass.ACK_RECEIVE
    EXPIRED = MessageClass.NACK_RECEIVE_TIMEOUT
    PURGED = MessageClass.NACK_Q_PURGED
    QUEUE_DELETED = MessageClass.NACK_Q_DELETED
    REJECTED = MessageClass.NACK_RECEIVE_REJECTED
    REACH_QUEUE_TIMEOUT = MessageClass.NACK_REACH_QUEUE_TIMEOUT
    QUOTA_EXCEEDED = MessageClass.NACK_Q_EXCEED_QUOTA
    DELIVERED = MessageClass.NORMAL
    """Left an outgoing queue because the remote queue manager took it (no class of its own)."""
    REFUSED_BY_DESTINATION = MessageClass.NACK_BAD_DST_Q
    """The remote queue manager answered 400: the destination is not available to this sender."""
    DELETED_IN_TRANSIT = MessageClass.NACK_DELETED
    """Purged from an outgoing queue before it reached its destination."""
    ACCESS_DENIED = MessageClass.NACK_ACCESS_DENIED
    """Refused on arrival: the sender may not write to the queue (nothing is stored)."""

    @property
    def negative(self) -> bool:
        return bool(self.value & 0x8000)


def final_outcome(positive: bool, message_class: int | None) -> Reason | None:
    """What a final receipt (reference §4.4) says happened to a message this queue manager sent:
    the class when it is one of §4.4's outcomes (0x4000 positive: DELIVERED), else the decision
    when it is positive; None for a negative decision of a class §4.4 does not list."""
    if message_class is not None and final_receipts.final_class(message_class) is not None:
        return Reason.DELIVERED if message_class == MessageClass.ACK_RECEIVE else Reason(message_class)
    return Reason.DELIVERED if positive else None


class PlacementKind(enum.Enum):
    JOURNAL = "journal"
    COMPUTER_JOURNAL = "computer-journal"
    DEAD_LETTER = "dead-letter"
    ACKNOWLEDGMENT = "acknowledgment"
    FINAL_RECEIPT = "final-receipt"


@dataclass(frozen=True, slots=True)
class Placement:
    """A message the queue manager puts into one of its local queues."""

    kind: PlacementKind
    target: QueuePath
    properties: MessageProperties
    message_id: str
    """Copies keep the original ID; acknowledgments get a new one (empty: assign)."""
    sent_time: datetime
    source_machine: uuid.UUID
    destination_queue: str | None
    original_arrived_time: datetime | None = None
    """Copies: when the original arrived in its queue (for the pipeline's export view)."""
    stream: StreamPosition | None = None
    """Final receipts: the stream they report on and the ordinal their `<streamReceipt>` covers."""
    transactional: bool = False
    """Copies: the original was sent in a transaction (the export view's `transactional`)."""
    on_behalf_of: str | None = None
    """The anonymous SRMP sender's source (Message.srmp_source) whose message this follows: an
    outgoing queue made for it counts against that source (OutgoingQueueLimits)."""


@dataclass(frozen=True, slots=True)
class Departure:
    """The facts about a message that decide what follows its arrival or removal."""

    message: Message
    queue: QueuePath
    queue_journal: bool
    transactional: bool
    stream: StreamOrigin | None = None
    """The incoming SRMP stream the message arrived on (where its final receipt goes)."""


class DisposalPolicy:
    """This queue manager's rules for consequences; needs its identity to resolve queues.

    `may_send_to` says whether a remote queue's URL passes MSMQGW_SRMP_OUTBOUND_HOSTS (None:
    every one does); `outgoing_limits` bound the outgoing queues made for anonymous senders.
    The store applies both where it places into outgoing queues (storage/consequences.py)."""

    def __init__(
        self,
        identity: LocalIdentity,
        may_send_to: Callable[[str], bool] | None = None,
        outgoing_limits: OutgoingQueueLimits | None = None,
    ) -> None:
        self.identity = identity
        self._may_send_to = may_send_to
        self.outgoing_limits = outgoing_limits or OutgoingQueueLimits()

    def may_send_to(self, queue: QueuePath) -> bool:
        """Whether messages may go out to this remote (outgoing) queue at all."""
        return self._may_send_to is None or self._may_send_to(queue.name)

    @staticmethod
    def arrival_may_place(journal: int, admin_queue: str | None, acknowledge: int) -> bool:
        """Whether `consequences(…, Reason.ARRIVED, …)` can place anything for a message with
        these properties (source journaling, an arrival acknowledgment): a cheap test that
        spares the store building departures for every arriving message."""
        if journal & JournalFlags.JOURNAL:
            return True
        return bool(admin_queue) and acks.requested(acknowledge, Reason.ARRIVED.value)

    def consequences(self, departure: Departure, reason: Reason, now: datetime) -> list[Placement]:
        if departure.queue.kind is QueueKind.OUTGOING:
            return self._in_transit(departure, reason, now)
        if not departure.queue.writable:
            return []  # the queue manager's own copies (journals, dead letters) earn nothing more
        placements = []
        if reason is Reason.RECEIVED and departure.queue_journal:
            placements.append(self._copy(departure, PlacementKind.JOURNAL, departure.queue.journal_path))
        if reason is Reason.ARRIVED and self._journals_at_source(departure.message):
            target = system_queue_path(SystemQueue.JOURNAL)
            placements.append(self._copy(departure, PlacementKind.COMPUTER_JOURNAL, target))
        if reason.negative:
            placements.extend(self._dead_letter(departure, reason))
        placements.extend(self._acknowledgment(departure, reason, now))
        placements.extend(self.final_receipt(departure, reason, now))
        return placements

    def final_receipt(self, departure: Departure, reason: Reason, now: datetime) -> list[Placement]:
        """Reference §4.4: a transactional stream message sent with MQMSG_DEADLETTER reports
        its outcome to the stream's `sendReceiptsTo`, through that URL's outgoing queue."""
        origin, message = departure.stream, departure.message
        message_class = final_receipts.final_class(reason.value)
        if origin is None or message_class is None or not departure.queue.writable:
            return []
        if not final_receipts.wanted(message, departure.transactional):
            return []
        target = self.remote_queue(f"DIRECT={origin.send_receipts_to}")
        if target is None:
            return []  # not an HTTP URL, or one of this gateway's own
        guid = self.identity.guid
        properties = final_receipts.receipt_properties(message, message_class, origin, guid, now)
        stream = StreamPosition(origin.stream_id, origin.last_ordinal)
        kind = PlacementKind.FINAL_RECEIPT
        source = message.srmp_source
        return [Placement(kind, target, properties, "", now, guid, None, stream=stream, on_behalf_of=source)]

    def settled_at_source(self, departure: Departure, reason: Reason) -> list[Placement]:
        """The sending side of §4.4: a negative final receipt puts the message in this queue
        manager's transactional dead-letter queue, with the receipt's class, if it asked for
        MQMSG_DEADLETTER; a positive one settles it with nothing more (its journal copy was made
        when the stream receipt covered it). No acknowledgment either way: the receiver sent
        the commitment receipts the message asked for (reference §4.6)."""
        return self._dead_letter(departure, reason) if reason.negative else []

    def _in_transit(self, departure: Departure, reason: Reason, now: datetime) -> list[Placement]:
        """An outgoing queue is the sender's side (reference §2.2): arrival there earns nothing;
        delivery earns the positive source-journal copy; failure the dead letter and the NACK.
        Arrival acknowledgments come from the remote queue manager."""
        if reason is Reason.DELIVERED:
            if not self._journals_at_source(departure.message):
                return []
            target = system_queue_path(SystemQueue.JOURNAL)
            return [self._copy(departure, PlacementKind.COMPUTER_JOURNAL, target)]
        if not reason.negative:
            return []
        return self._dead_letter(departure, reason) + self._acknowledgment(departure, reason, now)

    def _journals_at_source(self, message: Message) -> bool:
        return self._source_journaling(message.properties.journal, message.source_machine)

    def _source_journaling(self, flags: int, source_machine: uuid.UUID) -> bool:
        """Positive source journaling of a message this queue manager sent (MQMSG_JOURNAL)."""
        return bool(flags & JournalFlags.JOURNAL) and source_machine == self.identity.guid

    def _dead_letter(self, departure: Departure, reason: Reason) -> list[Placement]:
        """Negative source journaling (reference §7.12): non-transactional messages to
        DEADLETTER; transactional ones to DEADXACT when this queue manager sent them (a
        remote sender keeps its own transactional dead-letter queue, reached by receipts)."""
        message = departure.message
        if not message.properties.journal & JournalFlags.DEADLETTER:
            return []
        if not departure.transactional:
            target = SystemQueue.DEADLETTER
        elif message.source_machine == self.identity.guid:
            target = SystemQueue.DEADXACT
        else:
            return []
        copy = self._copy(departure, PlacementKind.DEAD_LETTER, system_queue_path(target))
        properties = dataclasses.replace(copy.properties, message_class=reason.value)
        return [dataclasses.replace(copy, properties=properties)]

    def arrival_targets(self, properties: MessageProperties, source_machine: uuid.UUID) -> list[QueuePath]:
        """The queues an arrival of such a message may place into (its acknowledgment, its
        computer-journal copy): the store locks them with the message's queue, in one sweep."""
        targets = []
        if self._source_journaling(properties.journal, source_machine):
            targets.append(system_queue_path(SystemQueue.JOURNAL))
        acknowledgment = self.acknowledgment_target(
            properties.admin_queue, properties.acknowledge, Reason.ARRIVED
        )
        if acknowledgment is not None:
            targets.append(acknowledgment)
        return targets

    def acknowledgment_target(
        self, admin_queue: str | None, acknowledge: int, reason: Reason
    ) -> QueuePath | None:
        """The queue that `reason`'s acknowledgment of a message with this admin queue and
        acknowledgment level goes to, if it asks for one."""
        if not admin_queue or not acks.requested(acknowledge, reason.value):
            return None
        target = self.local_queue(admin_queue) or self.remote_queue(admin_queue)
        if target is None or not (target.writable or target.kind is QueueKind.OUTGOING):
            return None  # system queues take no acknowledgments
        return target

    def _acknowledgment(self, departure: Departure, reason: Reason, now: datetime) -> list[Placement]:
        message = departure.message
        properties = message.properties
        target = self.acknowledgment_target(properties.admin_queue, properties.acknowledge, reason)
        if target is None:
            return []
        properties = acks.acknowledgment(
            message.properties,
            message.message_id,
            reason.value,
            self.destination_format_name(departure.queue),
            self.identity.guid,
            now,
            departure.transactional,
        )
        return [
            Placement(
                PlacementKind.ACKNOWLEDGMENT,
                target,
                properties,
                "",
                now,
                self.identity.guid,
                None,
                on_behalf_of=message.srmp_source,
            )
        ]

    def refused_arrival(
        self,
        properties: MessageProperties,
        message_id: str,
        queue: QueuePath,
        reason: Reason,
        now: datetime,
        source: str | None = None,
    ) -> list[Placement]:
        """What a message refused on arrival earns where nothing of it is stored: only its
        negative acknowledgment, when it asked for one (its sender dead-letters it itself).
        `source`: the anonymous SRMP sender's (Message.srmp_source)."""
        target = self.acknowledgment_target(properties.admin_queue, properties.acknowledge, reason)
        if target is None:
            return []
        nack = acks.acknowledgment(
            properties, message_id, reason.value, self.destination_format_name(queue), self.identity.guid, now
        )
        guid = self.identity.guid
        return [
            Placement(PlacementKind.ACKNOWLEDGMENT, target, nack, "", now, guid, None, on_behalf_of=source)
        ]

    def local_queue(self, text: str) -> QueuePath | None:
        """A format name (or, for convenience, a path name) naming a local queue, else None."""
        try:
            if "=" not in text:
                return parse_queue_path(text)
            return local_queue_path(parse_format_name(text), self.identity)
        except MqError:
            return None

    def remote_queue(self, text: str) -> QueuePath | None:
        """The outgoing queue for a remote `DIRECT=HTTP(S)://` format name, else None."""
        try:
            name = parse_format_name(text) if "=" in text else None
        except MqError:
            return None
        if name is None or name.url is None or local_queue_path(name, self.identity) is not None:
            return None
        return outgoing_queue_path(name.url)

    @staticmethod
    def destination_format_name(queue: QueuePath) -> str:
        return f"DIRECT=OS:.\\{queue.pathname}"

    @staticmethod
    def _copy(departure: Departure, kind: PlacementKind, target: QueuePath) -> Placement:
        message = departure.message
        return Placement(
            kind,
            target,
            message.properties,
            message.message_id,
            message.sent_time,
            message.source_machine,
            departure.queue.pathname,
            message.arrived_time,
            transactional=departure.transactional,
            on_behalf_of=message.srmp_source,
        )
