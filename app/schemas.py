"""JSON shapes of the REST API: queues, transactions, cursors, the queue manager and outgoing
queues (messages: app.message_schemas). Lookup IDs are decimal strings (they exceed 2**53)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.parameters import Strict
from qm.model import (
    INFINITE,
    Queue,
    QueueChanges,
    QueueManagerInfo,
    QueueSettings,
)
from qm.outbound import OutgoingQueue, OutgoingState
from qm.store import CursorRecord, TransactionRecord

Uint32 = Annotated[int, Field(ge=0, le=INFINITE)]
DeliveryName = Literal["express", "recoverable"]


class QueueCreate(Strict):
    path: str = Field(description="`private$/name`, `private$\\name` or a public `name`")
    label: str = Field("", max_length=124, description="PROPID_Q_LABEL, at most 124 characters")
    transactional: bool = Field(False, description="Fixed at creation (PROPID_Q_TRANSACTION)")
    quota_kb: Uint32 = Field(INFINITE, description=f"Queue quota in kilobytes; {INFINITE} = unlimited")
    journal: bool = Field(False, description="Copy every received message to the queue's journal")
    journal_quota_kb: Uint32 = Field(
        INFINITE, description=f"Quota of the queue's journal in kilobytes; {INFINITE} = unlimited"
    )
    base_priority: int = Field(
        0, ge=-32768, le=32767, description="PROPID_Q_BASEPRIORITY; stored only, it does not reorder messages"
    )

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"path": "private$/orders", "label": "Orders", "journal": True}]},
    )

    def settings(self) -> QueueSettings:
        return QueueSettings(
            label=self.label,
            transactional=self.transactional,
            quota_kb=self.quota_kb,
            journal=self.journal,
            journal_quota_kb=self.journal_quota_kb,
            base_priority=self.base_priority,
        )


class QueueUpdate(Strict):
    """Only the fields given change; `transactional` is fixed at creation."""

    label: str | None = Field(None, max_length=124, description="New label, at most 124 characters")
    quota_kb: Uint32 | None = Field(None, description=f"New quota in kilobytes; {INFINITE} = unlimited")
    journal: bool | None = Field(None, description="Turn journaling of received messages on or off")
    journal_quota_kb: Uint32 | None = Field(None, description="New quota of the journal in kilobytes")
    base_priority: int | None = Field(None, ge=-32768, le=32767, description="New base priority")

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"quota_kb": 10240}]})

    def changes(self) -> QueueChanges:
        return QueueChanges(**self.model_dump())


class QueueOut(BaseModel):
    path: str = Field(description="The form used in URLs, e.g. `private$/orders`")
    pathname: str = Field(description="MSMQ's path name, e.g. `private$\\orders`")
    kind: Literal["public", "private", "system", "outgoing"] = Field(
        description="`outgoing`: the sending side of a remote queue (see /api/outgoing-queues)"
    )
    is_journal: bool = Field(description="A journal queue (`…;journal`)")
    label: str = Field(description="PROPID_Q_LABEL")
    transactional: bool = Field(description="Accepts only messages sent in a transaction")
    quota_kb: int = Field(description=f"Queue quota in kilobytes; {INFINITE} = unlimited")
    journal: bool = Field(description="Received messages are copied to the queue's journal")
    journal_quota_kb: int = Field(description=f"Quota of the journal in kilobytes; {INFINITE} = unlimited")
    base_priority: int = Field(description="PROPID_Q_BASEPRIORITY (stored only)")
    created_at: datetime = Field(description="UTC (PROPID_Q_CREATE_TIME)")
    modified_at: datetime = Field(description="UTC (PROPID_Q_MODIFY_TIME)")
    message_count: int = Field(description="Messages stored in the queue")
    byte_count: int = Field(description="Their bytes (body and extension): what quotas are checked against")

    @classmethod
    def of(cls, queue: Queue) -> QueueOut:
        settings = queue.settings
        return cls(
            path=queue.path.url_path,
            pathname=queue.path.pathname,
            kind=queue.path.kind.value,
            is_journal=queue.path.journal,
            label=settings.label,
            transactional=settings.transactional,
            quota_kb=settings.quota_kb,
            journal=settings.journal,
            journal_quota_kb=settings.journal_quota_kb,
            base_priority=settings.base_priority,
            created_at=queue.created_at,
            modified_at=queue.modified_at,
            message_count=queue.message_count,
            byte_count=queue.byte_count,
        )


class TransactionOut(BaseModel):
    id: str = Field(description="Pass as `transaction=` to send and receive inside it")
    created_at: datetime = Field(description="UTC")
    expires_at: datetime = Field(description="UTC; an unfinished transaction is aborted then")

    @classmethod
    def of(cls, record: TransactionRecord) -> TransactionOut:
        return cls(id=record.id, created_at=record.created_at, expires_at=record.expires_at)


class CursorCreate(Strict):
    queue: str = Field(description="Path of the queue to walk")

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"queue": "private$/orders"}]})


class CursorOut(BaseModel):
    id: str = Field(description="The cursor's handle")
    queue: str = Field(description="Path of the queue it walks")
    state: Literal["unpositioned", "on-message", "after-received"] = Field(
        description="Where it rests: before the first message, on one, or after one it received"
    )
    lookup_id: str | None = Field(description="The lookup ID it rests on or after; null when unpositioned")
    expires_at: datetime = Field(description="UTC; an idle cursor is closed then (each use extends it)")

    @classmethod
    def of(cls, record: CursorRecord, queue: str) -> CursorOut:
        states = {0: "unpositioned", 1: "on-message", 2: "after-received"}
        return cls(
            id=record.id,
            queue=queue,
            state=states[record.place.value],  # type: ignore[arg-type]
            lookup_id=None if record.place.value == 0 else str(record.position),
            expires_at=record.expires_at,
        )


class QueueManagerOut(BaseModel):
    guid: str = Field(description="The queue manager's GUID: source_machine of the messages it sends")
    quota_kb: int = Field(description=f"Machine quota in kilobytes over all queues; {INFINITE} = unlimited")
    throttled: bool = Field(description="Sends are refused with MQ_ERROR_INSUFFICIENT_RESOURCES while true")
    journal_quota_kb: int = Field(description="Quota of the computer journal, system$;journal")
    message_count: int = Field(description="Messages stored in all queues")
    byte_count: int = Field(description="Their bytes (body and extension)")

    @classmethod
    def of(cls, info: QueueManagerInfo) -> QueueManagerOut:
        return cls(
            guid=str(info.guid),
            quota_kb=info.quota_kb,
            throttled=info.throttled,
            journal_quota_kb=info.journal_quota_kb,
            message_count=info.message_count,
            byte_count=info.byte_count,
        )


class QueueManagerUpdate(Strict):
    """Only the fields given change."""

    quota_kb: Uint32 | None = Field(None, description=f"Machine quota in kilobytes; {INFINITE} = unlimited")
    throttled: bool | None = Field(None, description="Refuse every send (true) or accept them again")
    journal_quota_kb: Uint32 | None = Field(None, description="Quota of the computer journal in kilobytes")

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"throttled": True}]})


class OutgoingQueuePage(BaseModel):
    outgoing_queues: list[OutgoingQueueOut] = Field(description="In queue ID order")
    next_after: int | None = Field(description="Pass as `after` for the next page; null at the end")


class OutgoingQueueOut(BaseModel):
    id: int = Field(description="The outgoing queue's number in /api/outgoing-queues/{queue_id}")
    format_name: str = Field(description="`DIRECT=HTTP://host/msmq/...`: what applications send to")
    url: str = Field(description="Where its messages are POSTed")
    state: OutgoingState = Field(
        description="`connected` (messages waiting, the destination answers), `idle` (none waiting), "
        "`waiting-to-connect` (the last attempt failed; it retries at next_attempt_at) or `paused`"
    )
    message_count: int = Field(description="Messages waiting to be sent")
    byte_count: int = Field(description="Their bytes (body and extension)")
    delivered_count: int = Field(description="Messages the destination took since the queue was created")
    attempts: int = Field(description="Failed attempts in a row (0 while the destination answers)")
    last_error: str | None = Field(description="Why the last failed attempt failed; null after a delivery")
    last_attempt_at: datetime | None = Field(description="UTC; null before the first attempt")
    next_attempt_at: datetime | None = Field(description="When a waiting queue tries again")
    owner: str | None = Field(
        description="The gateway process (`host:pid:tag`) sending this queue now; null when none is"
    )
    lease_expires_at: datetime | None = Field(
        description="When the owner's lease runs out unless it renews it (a process that stopped "
        "without letting go is taken over after this)"
    )

    @classmethod
    def of(cls, outgoing: OutgoingQueue) -> OutgoingQueueOut:
        waiting = outgoing.attempts > 0
        return cls(
            id=outgoing.queue.id,
            format_name=outgoing.queue.path.pathname,
            url=outgoing.url,
            state=outgoing.state,
            message_count=outgoing.queue.message_count,
            byte_count=outgoing.queue.byte_count,
            delivered_count=outgoing.delivered_count,
            attempts=outgoing.attempts,
            last_error=outgoing.last_error,
            last_attempt_at=outgoing.last_attempt_at,
            next_attempt_at=outgoing.next_attempt_at if waiting else None,
            owner=outgoing.owner,
            lease_expires_at=outgoing.lease_expires_at if outgoing.owner else None,
        )
