"""OpenAPI fragments shared by several routes: examples of messages and problems."""

from __future__ import annotations

from typing import Any

MESSAGE_EXAMPLE: dict[str, Any] = {
    "lookup_id": "72057594037927940",
    "message_id": "{5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93}\\4",
    "queue": "private$/orders",
    "label": "urgent order",
    "body": "order 2",
    "body_base64": "b3JkZXIgMg==",
    "body_size": 7,
    "body_type": 0,
    "priority": 6,
    "message_class": 0,
    "message_class_name": "MQMSG_CLASS_NORMAL",
    "correlation_id": None,
    "app_specific": 0,
    "extension_base64": "",
    "response_queue": None,
    "admin_queue": None,
    "acknowledge": 0,
    "journal": 0,
    "delivery": "recoverable",
    "time_to_be_received": 4294967295,
    "time_to_reach_queue": 4294967295,
    "sent_time": "2026-11-22T10:00:00Z",
    "arrived_time": "2026-11-22T10:00:00Z",
    "source_machine": "5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93",
    "first_in_transaction": False,
    "last_in_transaction": False,
    "abort_count": 0,
    "destination_queue": None,
    "lock_tag": None,
    "lock_expires_at": None,
}


def problem_example(name: str, code: str, status: int, detail: str) -> dict[str, Any]:
    return {
        "description": name,
        "content": {
            "application/problem+json": {
                "example": {
                    "type": f"urn:msmq-gateway:error:{name}",
                    "title": name,
                    "status": status,
                    "detail": detail,
                    "mq_error": name,
                    "mq_error_code": code,
                }
            }
        },
    }


_MESSAGE_200: dict[str, Any] = {
    "description": "The message: JSON, or with `Accept: application/octet-stream` the raw body "
    "with its properties in `X-Msmq-*` headers",
    "content": {
        "application/json": {
            "schema": {"$ref": "#/components/schemas/MessageOut"},
            "example": MESSAGE_EXAMPLE,
        },
        "application/octet-stream": {"schema": {"type": "string", "format": "binary"}, "example": "order 2"},
    },
}

MESSAGE_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: _MESSAGE_200,
    204: {"description": "No message arrived within timeout_ms (MQ_ERROR_IO_TIMEOUT)"},
    404: problem_example("MQ_ERROR_QUEUE_NOT_FOUND", "0xC00E0003", 404, "no queue private$/orders"),
}

LOOKUP_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: _MESSAGE_200,
    404: problem_example(
        "MQ_ERROR_MESSAGE_NOT_FOUND", "0xC00E0088", 404, "private$/orders: no next message to lookup ID 5"
    ),
}

SEND_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {
                "schema": {"$ref": "#/components/schemas/MessageIn"},
                "example": {"body": "order 1", "label": "new order", "priority": 5},
            },
            "application/octet-stream": {
                "schema": {"type": "string", "format": "binary"},
                "example": "raw body bytes; properties in X-Msmq-Label, X-Msmq-Priority, ...",
            },
        },
    }
}
