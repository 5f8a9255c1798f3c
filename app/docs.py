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


def example(value: Any, description: str = "Success") -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"example": value}}}


QUEUE_EXAMPLE: dict[str, Any] = {
    "path": "private$/orders",
    "pathname": "private$\\orders",
    "kind": "private",
    "is_journal": False,
    "label": "Orders",
    "transactional": False,
    "quota_kb": 4294967295,
    "journal": True,
    "journal_quota_kb": 4294967295,
    "base_priority": 0,
    "created_at": "2026-11-22T10:00:00Z",
    "modified_at": "2026-11-22T10:00:00Z",
    "message_count": 3,
    "byte_count": 21,
}
QUEUE_NOT_FOUND = problem_example("MQ_ERROR_QUEUE_NOT_FOUND", "0xC00E0003", 404, "no queue private$/orders")
ILLEGAL_PATH = problem_example(
    "MQ_ERROR_ILLEGAL_QUEUE_PATHNAME",
    "0xC00E0014",
    400,
    "'bad,name': the queue name contains the character ','",
)
TRANSACTION_SEQUENCE = problem_example(
    "MQ_ERROR_TRANSACTION_SEQUENCE",
    "0xC00E0051",
    409,
    "no active transaction '3f…' (unknown, finished, or timed out)",
)
INVALID_HANDLE = problem_example(
    "MQ_ERROR_INVALID_HANDLE", "0xC00E0007", 404, "no open cursor '9c…' (closed or idle too long)"
)
TRANSACTION_EXAMPLE = {
    "id": "3f2b8c1d9e0a4b5c6d7e8f9012345678",
    "created_at": "2026-11-22T10:00:00Z",
    "expires_at": "2026-11-22T10:01:00Z",
}
CURSOR_EXAMPLE = {
    "id": "9c1e2f3a4b5c6d7e8f901234",
    "queue_id": 4,
    "state": "on-message",
    "lookup_id": "72057594037927938",
    "expires_at": "2026-11-22T10:05:00Z",
}
QUEUE_MANAGER_EXAMPLE = {
    "guid": "5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93",
    "quota_kb": 4294967295,
    "throttled": False,
    "journal_quota_kb": 4294967295,
    "message_count": 3,
    "byte_count": 21,
}
SENT_EXAMPLE = {
    "lookup_id": "72057594037927938",
    "message_id": "{5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93}\\2",
    "queue": "private$/orders",
    "priority": 6,
    "transaction": None,
}
NO_CONTENT = {"description": "Done; no body"}

OUTGOING_QUEUE_EXAMPLE = {
    "id": 7,
    "format_name": "DIRECT=HTTP://gw02.example.net/msmq/private$/orders",
    "url": "HTTP://gw02.example.net/msmq/private$/orders",
    "state": "waiting-to-connect",
    "message_count": 12,
    "byte_count": 12288,
    "delivered_count": 4031,
    "attempts": 3,
    "last_error": "ConnectError: [Errno 111] Connection refused",
    "last_attempt_at": "2026-11-23T02:10:04.120000Z",
    "next_attempt_at": "2026-11-23T02:10:08.120000Z",
    "owner": None,
    "lease_expires_at": None,
}

SRMP_STATISTICS_EXAMPLE = {
    "stored": 10412,
    "duplicates": 37,
    "stream_receipts": 0,
    "refused": 2,
    "retry_later": 0,
    "timer_layout_mismatches": 1,
}


# -- the SOAP API (/soap) ---------------------------------------------------------------

_SOAP_SEND = """\
<soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/" xmlns:gw="urn:msmq-gateway:soap:v1">
  <soap:Body>
    <gw:Send>
      <gw:queue>private$/orders</gw:queue>
      <gw:message>
        <gw:body>b3JkZXIgMQ==</gw:body>
        <gw:label>new order</gw:label>
        <gw:priority>5</gw:priority>
      </gw:message>
    </gw:Send>
  </soap:Body>
</soap:Envelope>
"""
SOAP_REQUEST_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "content": {"text/xml": {"schema": {"type": "string"}, "example": _SOAP_SEND}},
    }
}
SOAP_RESPONSE_EXAMPLE: dict[str, Any] = {
    "schema": {"type": "string"},
    "example": "<?xml version='1.0' encoding='utf-8'?>\n"
    '<soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/" '
    'xmlns:gw="urn:msmq-gateway:soap:v1"><soap:Body><gw:SendResponse>'
    "<gw:lookupId>144115188075855873</gw:lookupId>"
    "<gw:messageId>{5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93}\\1</gw:messageId>"
    "<gw:queue>private$/orders</gw:queue><gw:priority>5</gw:priority>"
    "</gw:SendResponse></soap:Body></soap:Envelope>",
}
SOAP_FAULT_EXAMPLE: dict[str, Any] = {
    "schema": {"type": "string"},
    "example": "<?xml version='1.0' encoding='utf-8'?>\n"
    '<soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/" '
    'xmlns:gw="urn:msmq-gateway:soap:v1"><soap:Body><soap:Fault>'
    "<faultcode>soap:Client</faultcode>"
    "<faultstring>MQ_ERROR_QUEUE_NOT_FOUND (0xC00E0003): no queue private$/orders</faultstring>"
    "<detail><gw:MqError><gw:name>MQ_ERROR_QUEUE_NOT_FOUND</gw:name><gw:code>0xC00E0003</gw:code>"
    "<gw:description>no queue private$/orders</gw:description></gw:MqError></detail>"
    "</soap:Fault></soap:Body></soap:Envelope>",
}
WSDL_EXAMPLE = """\
<?xml version="1.0" encoding="utf-8"?>
<wsdl:definitions xmlns:wsdl="http://schemas.xmlsoap.org/wsdl/" \
xmlns:soap="http://schemas.xmlsoap.org/wsdl/soap/" ... targetNamespace="urn:msmq-gateway:soap:v1" \
name="MsmqGateway">
  ...
  <wsdl:service name="MsmqGateway">
    <wsdl:port name="MsmqGatewayPort" binding="tns:MsmqGatewayBinding">
      <soap:address location="http://127.0.0.1:8080/soap"/>
    </wsdl:port>
  </wsdl:service>
</wsdl:definitions>
"""
