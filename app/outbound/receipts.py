"""Stream receipts (reference §4.3): one POST per due stream, covering its last accepted ordinal."""

from __future__ import annotations

import logging
from collections.abc import Callable

from app.outbound.client import SrmpClient
from qm.manager import QueueManager
from qm.outbound import Verdict
from qm.streams import StreamReceiptDue
from soap import TimerMapping, build_stream_receipt
from soap.ids import MessageId, StreamId

log = logging.getLogger(__name__)


class StreamReceiptSender:
    def __init__(
        self,
        manager: QueueManager,
        client: SrmpClient,
        mapping: TimerMapping,
        counted: Callable[[str], None] | None = None,
    ) -> None:
        self._manager = manager
        self._client = client
        self._mapping = mapping
        self._counted = counted or (lambda _result: None)
        """Told each receipt's result: `sent`, `failed` (retried) or `not_allowed` (metrics)."""

    async def send_due(self) -> int:
        """Send every due receipt; return how many the senders accepted."""
        accepted = 0
        for due in await self._manager.due_stream_receipts():
            accepted += await self._send(due)
        return accepted

    async def _send(self, due: StreamReceiptDue) -> int:
        target = self._manager.outbound_target(due.send_receipts_to)
        if target is None:
            log.warning(
                "stream receipt for %s not sent: %s is not in MSMQGW_SRMP_OUTBOUND_HOSTS "
                "(after MSMQGW_SRMP_OUTBOUND_REWRITES); the sender will keep resending",
                due.stream_id,
                due.send_receipts_to,
            )
            await self._manager.stream_receipt_failed(due, retry=False)
            self._counted("not_allowed")
            return 0
        envelope = build_stream_receipt(
            stream_id=StreamId.parse(due.stream_id),
            last_ordinal=due.last_ordinal,
            send_receipts_to=due.send_receipts_to,
            destination=due.destination,
            message_id=MessageId.from_text(await self._manager.new_message_id()),
            sent_at=self._manager.clock.now(),
            mapping=self._mapping,
        )
        result = await self._client.post(target, envelope)
        if result.verdict is Verdict.DELIVERED:
            await self._manager.stream_receipt_sent(due)
            self._counted("sent")
            return 1
        log.info("stream receipt for %s to %s failed: %s", due.stream_id, target, result.describe())
        await self._manager.stream_receipt_failed(due, retry=True)
        self._counted("failed")
        return 0
