"""The queue manager's values as the SOAP API's field values (names as in schema.py)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from qm.model import Delivery, Message, Queue


def message_values(message: Message, queue: str, decoded: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The Message type's values; `decoded` is bodies' DecodedBody as JSON, when asked for."""
    properties = message.properties
    values = {
        "lookupId": message.lookup_id,
        "messageId": message.message_id,
        "queue": queue,
        "body": properties.body,
        "label": properties.label,
        "bodyType": properties.body_type,
        "priority": properties.priority,
        "class": properties.message_class,
        "correlationId": properties.correlation_id,
        "appSpecific": properties.app_specific,
        "extension": properties.extension,
        "responseQueue": properties.response_queue,
        "adminQueue": properties.admin_queue,
        "acknowledge": properties.acknowledge,
        "journal": properties.journal,
        "delivery": "recoverable" if properties.delivery is Delivery.RECOVERABLE else "express",
        "timeToBeReceived": properties.time_to_be_received,
        "timeToReachQueue": properties.time_to_reach_queue,
        "bodySize": message.body_size,
        "sentTime": message.sent_time,
        "arrivedTime": message.arrived_time,
        "sourceMachine": str(message.source_machine),
        "firstInTransaction": message.first_in_transaction,
        "lastInTransaction": message.last_in_transaction,
        "abortCount": message.abort_count,
        "destinationQueue": message.destination_queue,
    }
    if decoded is not None:
        values["decoded"] = decoded_values(decoded)
    return values


def decoded_values(decoded: Mapping[str, Any]) -> dict[str, Any]:
    """DecodedBody's values: the value as JSON text, headers as key/value pairs."""
    headers = decoded.get("headers") or {}
    return {
        "format": decoded["format"],
        "type": decoded.get("type"),
        "encoding": decoded.get("encoding"),
        "value": None if decoded.get("value") is None else json.dumps(decoded["value"], ensure_ascii=False),
        "text": decoded.get("text"),
        "envelope": decoded.get("envelope"),
        "header": [{"key": key, "value": value} for key, value in headers.items()],
        "reason": decoded.get("reason"),
        "warning": list(decoded.get("warnings") or ()),
    }


def sent_values(message: Message, queue: str) -> dict[str, Any]:
    return {
        "lookupId": message.lookup_id,
        "messageId": message.message_id,
        "queue": queue,
        "priority": message.properties.priority,
    }


def queue_values(queue: Queue) -> dict[str, Any]:
    settings = queue.settings
    return {
        "path": queue.path.url_path,
        "pathname": queue.path.pathname,
        "kind": queue.path.kind.value,
        "isJournal": queue.path.journal,
        "label": settings.label,
        "transactional": settings.transactional,
        "quota": settings.quota_kb,
        "journal": settings.journal,
        "journalQuota": settings.journal_quota_kb,
        "basePriority": settings.base_priority,
        "createTime": queue.created_at,
        "modifyTime": queue.modified_at,
        "messageCount": queue.message_count,
        "byteCount": queue.byte_count,
    }


def transaction_values(transaction_id: str, created_at: datetime, expires_at: datetime) -> dict[str, Any]:
    return {"id": transaction_id, "createdAt": created_at, "expiresAt": expires_at}
