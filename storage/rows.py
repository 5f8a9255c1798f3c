"""Conversions between table rows and the queue manager's frozen values."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

from qm.model import (
    INFINITE,
    Delivery,
    Message,
    MessageProperties,
    NewMessage,
    Queue,
    QueueManagerInfo,
    QueueSettings,
)
from qm.paths import QueueKind, QueuePath
from qm.store import CursorPlace, CursorRecord, TransactionRecord
from qm.streams import StreamPosition
from storage import tables

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
Row = Mapping[Any, Any]
"""A result row as a mapping (SQLAlchemy's RowMapping is keyed by names and columns)."""


def to_us(moment: datetime) -> int:
    """Aware datetime -> integer microseconds since the epoch."""
    delta = moment - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_us(value: int) -> datetime:
    return _EPOCH + timedelta(microseconds=value)


def optional_us(moment: datetime | None) -> int | None:
    return None if moment is None else to_us(moment)


def optional_time(value: int | None) -> datetime | None:
    return None if value is None else from_us(value)


def queue_from_row(row: Row, journal_queue_id: int | None = None) -> Queue:
    path = QueuePath(QueueKind(row["kind"]), row["name"], row["journal_of"] is not None)
    settings = QueueSettings(
        label=row["label"],
        transactional=row["transactional"],
        quota_kb=row["quota_kb"],
        journal=row["journal"],
        journal_quota_kb=row["journal_quota_kb"],
        base_priority=row["base_priority"],
    )
    return Queue(
        id=row["id"],
        path=path,
        settings=settings,
        created_at=from_us(row["created_at"]),
        modified_at=from_us(row["modified_at"]),
        message_count=row["message_count"],
        byte_count=row["byte_count"],
        journal_queue_id=journal_queue_id,
    )


def queue_values(path: QueuePath, settings: QueueSettings, now: datetime) -> dict[str, Any]:
    return {
        "path_key": path.key,
        "kind": path.kind.value,
        "name": path.name,
        "label": settings.label,
        "transactional": settings.transactional,
        "quota_kb": settings.quota_kb,
        "journal": settings.journal,
        "journal_quota_kb": settings.journal_quota_kb,
        "base_priority": settings.base_priority,
        "created_at": to_us(now),
        "modified_at": to_us(now),
        "message_count": 0,
        "byte_count": 0,
    }


def manager_from_row(
    row: Row, totals: Row | None = None, journal_quota_kb: int = INFINITE
) -> QueueManagerInfo:
    return QueueManagerInfo(
        guid=uuid.UUID(row["guid"]),
        quota_kb=row["quota_kb"],
        throttled=row["throttled"],
        message_count=int(totals["message_count"] or 0) if totals else 0,
        byte_count=int(totals["byte_count"] or 0) if totals else 0,
        journal_quota_kb=journal_quota_kb,
    )


def message_values(message: NewMessage, lookup_id: int, message_id: str) -> dict[str, Any]:
    """One `messages` row for a new message (Available, or Locked by its transaction)."""
    properties = message.properties
    in_transaction = message.transaction_id is not None
    return {
        "lookup_id": lookup_id,
        "queue_id": message.queue_id,
        "state": tables.LOCKED if in_transaction else tables.AVAILABLE,
        "transaction_id": message.transaction_id,
        "txn_op": tables.TXN_ENQUEUE if in_transaction else None,
        "lock_tag": None,
        "lock_expires_at": None,
        "purge_pending": False,
        "message_id": message_id,
        "correlation_id": properties.correlation_id,
        "label": properties.label,
        "body": properties.body,
        "body_size": len(properties.body) + len(properties.extension),
        "body_type": properties.body_type,
        "priority": properties.priority,
        "message_class": int(properties.message_class),
        "app_specific": properties.app_specific,
        "extension": properties.extension,
        "response_queue": properties.response_queue,
        "admin_queue": properties.admin_queue,
        "acknowledge": int(properties.acknowledge),
        "journal": int(properties.journal),
        "delivery": int(properties.delivery),
        "ttbr_seconds": properties.time_to_be_received,
        "ttrq_seconds": properties.time_to_reach_queue,
        "sent_time": to_us(message.sent_time),
        "arrived_time": to_us(message.arrived_time),
        "source_machine": str(message.source_machine),
        "ttbr_deadline": optional_us(message.ttbr_deadline),
        "ttrq_deadline": optional_us(message.ttrq_deadline),
        "first_in_xact": message.first_in_transaction,
        "last_in_xact": message.last_in_transaction,
        "abort_count": 0,
        "destination_queue": message.destination_queue,
        "transactional": message.transactional,
        "original_arrived_time": optional_us(message.original_arrived_time),
        "received_time": optional_us(message.received_time),
        "dead_lettered_time": optional_us(message.dead_lettered_time),
        "srmp_stream_id": None if message.stream is None else message.stream.stream_id,
        "srmp_ordinal": None if message.stream is None else message.stream.current,
        "srmp_source": message.srmp_source,
    }


def message_from_row(row: Row) -> Message:
    properties = MessageProperties(
        body=bytes(row["body"]),
        label=row["label"],
        body_type=row["body_type"],
        priority=row["priority"],
        message_class=row["message_class"],
        correlation_id=None if row["correlation_id"] is None else bytes(row["correlation_id"]),
        app_specific=row["app_specific"],
        extension=bytes(row["extension"]),
        response_queue=row["response_queue"],
        admin_queue=row["admin_queue"],
        acknowledge=row["acknowledge"],
        journal=row["journal"],
        delivery=Delivery(row["delivery"]),
        time_to_be_received=row["ttbr_seconds"],
        time_to_reach_queue=row["ttrq_seconds"],
        sent_time=from_us(row["sent_time"]),
        source_machine=uuid.UUID(row["source_machine"]),
        message_id=row["message_id"],
    )
    return Message(
        lookup_id=row["lookup_id"],
        queue_id=row["queue_id"],
        message_id=row["message_id"],
        properties=properties,
        sent_time=from_us(row["sent_time"]),
        arrived_time=from_us(row["arrived_time"]),
        source_machine=uuid.UUID(row["source_machine"]),
        ttbr_deadline=optional_time(row["ttbr_deadline"]),
        ttrq_deadline=optional_time(row["ttrq_deadline"]),
        first_in_transaction=row["first_in_xact"],
        last_in_transaction=row["last_in_xact"],
        abort_count=row["abort_count"],
        transaction_id=row["transaction_id"],
        lock_tag=row["lock_tag"],
        destination_queue=row["destination_queue"],
        transactional=bool(row["transactional"]),
        stream=_stream_of(row),
        srmp_source=row["srmp_source"],
    )


def _stream_of(row: Row) -> StreamPosition | None:
    stream_id = row["srmp_stream_id"]
    return None if stream_id is None else StreamPosition(stream_id, row["srmp_ordinal"] or 0)


def transaction_from_row(row: Row) -> TransactionRecord:
    return TransactionRecord(row["id"], from_us(row["created_at"]), from_us(row["expires_at"]))


def cursor_from_row(row: Row) -> CursorRecord:
    return CursorRecord(
        id=row["id"],
        queue_id=row["queue_id"],
        place=CursorPlace(row["place"]),
        position=row["position"],
        expires_at=from_us(row["expires_at"]),
    )


def cursor_values(record: CursorRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "queue_id": record.queue_id,
        "place": record.place.value,
        "position": record.position,
        "expires_at": to_us(record.expires_at),
    }
