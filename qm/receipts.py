"""Stream receipts (reference §4.3, §4.4): those this gateway owes its senders, and those it
receives for the streams it sends."""

from __future__ import annotations

from typing import TYPE_CHECKING

from qm import streams
from qm.disposal import final_outcome
from qm.streams import StreamReceiptDue

if TYPE_CHECKING:
    from qm.manager import QueueManager


class StreamReceipts:
    """The stream-receipt operations of a queue manager."""

    def __init__(self, qm: QueueManager) -> None:
        self._qm = qm

    async def due_stream_receipts(self, limit: int = 100) -> list[StreamReceiptDue]:
        return await self._qm.store.streams.due_stream_receipts(self._qm.clock.now(), limit)

    async def new_message_id(self) -> str:
        """A fresh ID (`{guid}\\sequence`) for a message this queue manager sends without storing
        it. The sequence comes from the durable counter of stored messages, so it never repeats
        one (a receiver's duplicate check would drop the later message) and grows."""
        return await self._qm.store.messages.new_message_id()

    async def stream_receipt_sent(self, due: StreamReceiptDue) -> None:
        await self._qm.store.streams.stream_receipt_sent(
            due.stream_id, due.last_ordinal, self._qm.clock.now()
        )

    async def outgoing_stream_acknowledged(self, stream_id: str, last_ordinal: int) -> int | None:
        """A stream receipt for a stream this gateway sends; None when it is not one of ours."""
        return await self._qm.store.outgoing.outgoing_stream_acknowledged(
            stream_id, last_ordinal, self._qm.clock.now()
        )

    async def final_receipt_received(
        self, stream_id: str, original_message_id: str, positive: bool, message_class: int | None
    ) -> bool | None:
        """A final receipt (reference §4.4) for a message sent on one of this gateway's streams:
        True when it settled a waiting message (a negative outcome puts it in DEADXACT), False
        when no such message waits (it did not ask for MQMSG_DEADLETTER, or was settled already:
        the receipt is dropped), None when the stream is not ours. A negative class §4.4 does
        not list settles nothing: the message waits for its TTBR."""
        outcome = final_outcome(positive, message_class)
        if outcome is None:
            return False
        now = self._qm.clock.now()
        return await self._qm.store.outgoing.outgoing_final_receipt(
            stream_id, original_message_id, outcome, now
        )

    async def stream_receipt_failed(self, due: StreamReceiptDue, retry: bool) -> None:
        """Retry on the backoff schedule, or (a target never allowed) wait for the next message."""
        retry_at = self._qm.clock.now() + streams.retry_delay(due.attempts + 1) if retry else None
        await self._qm.store.streams.stream_receipt_failed(due.stream_id, retry_at)
