"""Redrives: dead letters staged by the pipeline, re-sent through the queue manager's own send
path (validation, quotas, throttle, wake-ups), each at most once.

The pipeline only writes a batch (`redrive_staging` rows and a `redrive_batches` row); it
never imports the gateway. Here each staged dead letter becomes a new message of its target
queue, sent with a duplicate key made from the dead letter's lookup ID: a retry after a
crash between the send and its ledger row stores nothing a second time. The ledger (the
dead letter's lookup ID as primary key) makes "redriven at most once" hold for ever after;
a live original leaves its dead-letter queue in the same transaction as its ledger row.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from qm.errors import MqError, MqErrorCode, QuotaExceeded
from qm.model import Delivery, JournalFlags, MessageProperties, Queue
from qm.transactions import SINGLE_MESSAGE_TRANSACTION

if TYPE_CHECKING:
    from qm.manager import QueueManager

CHUNK = 200
"""Dead letters sent between two ledger transactions (at most this many re-sent by a retry's
duplicate keys instead of skipped by the ledger)."""
STAGING_ABANDONED_AFTER = timedelta(hours=1)
"""A batch still `staging` this long after it began was left by a pipeline that stopped."""
THROTTLED_GIVE_UP_AFTER = timedelta(hours=24)
"""A batch the machine's quota or throttle kept back this long is failed (rows deleted)."""
DUPLICATE_KEY_PREFIX = "redrive:"
"""SRMP duplicate keys are `{GUID}\\number` message IDs: no sender can pre-empt this form."""


class BatchStatus:
    STAGING = "staging"
    STAGED = "staged"
    APPLIED = "applied"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class RedriveBatch:
    batch_id: str
    status: str
    staged_count: int
    resent_count: int
    skipped_count: int
    error: str | None
    staged_at: datetime
    finished_at: datetime | None


@dataclass(frozen=True, slots=True)
class StagedDeadLetter:
    """One staged row: what the redriven message keeps of its dead letter (docs/pipeline.md)."""

    source_lookup_id: int
    target_queue_id: int
    label: str
    body: bytes
    body_type: int
    priority: int
    correlation_id: bytes | None
    app_specific: int
    delivery: int
    ttbr_seconds: int
    ttrq_seconds: int
    already_redriven: bool


@dataclass(frozen=True, slots=True)
class Redriven:
    """A staged dead letter dealt with: sent (or found sent), or skipped; its staging row goes."""

    source_lookup_id: int
    target_queue_id: int
    new_lookup_id: int | None
    """None: skipped (already in the ledger); 0: sent by an earlier attempt (duplicate key)."""


def duplicate_key(source_lookup_id: int) -> str:
    return f"{DUPLICATE_KEY_PREFIX}{source_lookup_id}"


def redriven_properties(row: StagedDeadLetter) -> MessageProperties:
    """A new message: body, label, priority, body type, correlation ID, application value,
    delivery and timers kept; no acknowledgments (no second storm of them); MQMSG_DEADLETTER
    again, so one that dies again returns to the dead-letter queue. Sent now, by this queue
    manager, with a new message ID."""
    return MessageProperties(
        body=row.body,
        label=row.label,
        body_type=row.body_type,
        priority=row.priority,
        correlation_id=row.correlation_id,
        app_specific=row.app_specific,
        journal=JournalFlags.DEADLETTER,
        delivery=Delivery(row.delivery),
        time_to_be_received=row.ttbr_seconds,
        time_to_reach_queue=row.ttrq_seconds,
    )


class _Stopped(Exception):
    """The batch cannot go on now: failed (with what to do) or kept back (throttled)."""

    def __init__(self, reason: str, failed: bool) -> None:
        super().__init__(reason)
        self.reason = reason
        self.failed = failed


class _Refused(_Stopped):
    """The target's quota refused the message and it was dead-lettered again (it asks for
    MQMSG_DEADLETTER): the new dead letter replaces the original, which must go, or the
    message would be in the dead-letter queue twice."""

    def __init__(self, reason: str, row: Redriven) -> None:
        super().__init__(reason, True)
        self.row = row


class Redrives:
    """Applies staged redrive batches: on request (POST /api/redrives/{batch}/apply) and by
    the gateway's background pass. One batch at a time in this process; two processes
    applying one batch store each message once (the duplicate key) and one ledger row."""

    def __init__(self, qm: QueueManager) -> None:
        self._qm = qm
        self._lock = asyncio.Lock()

    async def batch(self, batch_id: str) -> RedriveBatch:
        found = await self._qm.store.redrives.get_batch(batch_id)
        if found is None:
            raise MqError(MqErrorCode.MQ_ERROR_INVALID_HANDLE, f"no redrive batch {batch_id!r}")
        return found

    async def apply(self, batch_id: str) -> RedriveBatch:
        """Send what the batch still holds; the batch as it then stands."""
        async with self._lock:
            batch = await self.batch(batch_id)
            if batch.status == BatchStatus.STAGED:
                await self._apply(batch)
            return await self.batch(batch_id)

    async def apply_pending(self) -> int:
        """The background pass: every staged batch, oldest first; abandoned staging cleared.
        Returns how many batches it finished."""
        now = self._qm.clock.now()
        store = self._qm.store.redrives
        for batch_id in await store.batches_in(BatchStatus.STAGING, now - STAGING_ABANDONED_AFTER):
            await store.finish(
                batch_id,
                BatchStatus.FAILED,
                0,
                "the pipeline stopped while staging this batch (nothing was sent): run the redrive again",
                now,
            )
        finished = 0
        for batch_id in await store.batches_in(BatchStatus.STAGED, None):
            if (await self.apply(batch_id)).status != BatchStatus.STAGED:
                finished += 1
        return finished

    async def _apply(self, batch: RedriveBatch) -> None:
        store = self._qm.store.redrives
        targets: dict[int, Queue] = {}
        resent = batch.resent_count
        after = 0
        while chunk := await store.staged(batch.batch_id, after, CHUNK):
            done: list[Redriven] = []
            try:
                for row in chunk:
                    done.append(await self._one(row, targets))
            except _Refused as refused:  # dead-lettered again: that copy now stands for it
                done.append(refused.row)
                resent += await self._settle(batch.batch_id, done) - 1
                await self._stop(batch, resent, refused)
                return
            except _Stopped as stopped:
                resent += await self._settle(batch.batch_id, done)
                await self._stop(batch, resent, stopped)
                return
            resent += await self._settle(batch.batch_id, done)
            after = chunk[-1].source_lookup_id
        await store.finish(batch.batch_id, BatchStatus.APPLIED, resent, None, self._qm.clock.now())

    async def _settle(self, batch_id: str, done: list[Redriven]) -> int:
        if done:
            await self._qm.store.redrives.settle(batch_id, done, self._qm.clock.now())
        return sum(1 for item in done if item.new_lookup_id is not None)

    async def _stop(self, batch: RedriveBatch, resent: int, stopped: _Stopped) -> None:
        store = self._qm.store.redrives
        now = self._qm.clock.now()
        if stopped.failed or now - batch.staged_at > THROTTLED_GIVE_UP_AFTER:
            reason = f"{stopped.reason}: {resent} of {batch.staged_count} re-sent; the others stay "
            reason += "in the dead-letter queues: fix this and run the redrive again"
            await store.finish(batch.batch_id, BatchStatus.FAILED, resent, reason, now)
        else:
            await store.note(batch.batch_id, resent, f"{stopped.reason}: the next pass tries again")

    async def _one(self, row: StagedDeadLetter, targets: dict[int, Queue]) -> Redriven:
        if row.already_redriven:
            return Redriven(row.source_lookup_id, row.target_queue_id, None)
        target = await self._target(row.target_queue_id, targets)
        transaction = SINGLE_MESSAGE_TRANSACTION if target.settings.transactional else None
        try:
            sent = await self._qm.deliver(
                target.path.url_path,
                redriven_properties(row),
                transaction,
                duplicate_key=duplicate_key(row.source_lookup_id),
            )
        except QuotaExceeded as error:
            if error.dead_lettered:
                replaced = Redriven(row.source_lookup_id, row.target_queue_id, 0)
                reason = f"{error} (as NACK_Q_EXCEED_QUOTA, in place of dead letter {row.source_lookup_id})"
                raise _Refused(reason, replaced) from error
            if error.machine:
                throttled = f"the queue manager is throttled or its quota is reached ({error})"
                raise _Stopped(throttled, False) from error
            raise _Stopped(str(error), True) from error
        except MqError as error:
            refused = f"{target.path.url_path} refused dead letter {row.source_lookup_id}: {error}"
            raise _Stopped(refused, True) from error
        return Redriven(row.source_lookup_id, row.target_queue_id, 0 if sent is None else sent.lookup_id)

    async def _target(self, queue_id: int, targets: dict[int, Queue]) -> Queue:
        if queue_id not in targets:
            queue = await self._qm.store.queues.get_queue(queue_id)
            if queue is None:
                raise _Stopped(f"the target queue (ID {queue_id}) was deleted", True)
            targets[queue_id] = queue
        return targets[queue_id]
