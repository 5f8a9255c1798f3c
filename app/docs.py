"""Example values of the OpenAPI document shared by several routes, and the SOAP API's examples."""

from __future__ import annotations

import uuid
from typing import Any

from soap.build import build_request
from soap.envelope import Msmq, Path, Properties, Services, SrmpEnvelope
from soap.ids import MessageId
from soap.times import SrmpTime

MESSAGE_EXAMPLE: dict[str, Any] = {
    "lookup_id": "72057594037927940",
    "message_id": "{5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93}\\4",
    "queue": "private$/orders",
    "label": "urgent order",
    "body": "order 2",
    "body_base64": None,  # `body` carries it
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
TRANSACTION_EXAMPLE = {
    "id": "3f2b8c1d9e0a4b5c6d7e8f9012345678",
    "created_at": "2026-11-22T10:00:00Z",
    "expires_at": "2026-11-22T10:01:00Z",
}
CURSOR_EXAMPLE = {
    "id": "9c1e2f3a4b5c6d7e8f901234",
    "queue": "private$/orders",
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
    "stray_stream_receipts": 0,
    "refused": 2,
    "retry_later": 0,
    "timer_layout_mismatches": 1,
    "access_denied": 0,
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


# -- SRMP (/msmq/{path}) ------------------------------------------------------------------


def _srmp_request() -> str:
    """A recoverable message as a Windows sender POSTs it (the product's own builder frames it)."""
    sender = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
    sent, expires = SrmpTime.from_epoch(1795860000), SrmpTime.from_epoch(1795863600)
    envelope = SrmpEnvelope(
        path=Path(action="MSMQ:new order", to="http://gw01/msmq/private$/orders", id=MessageId(sender, 1)),
        properties=Properties(expires, sent),
        services=Services(durable=True),
        msmq=Msmq(message_class=0, priority=3, body_type=8, source_qm_guid=sender, ttrq=expires),
        body=b"order 1",
    )
    return build_request(envelope)[1].decode()


SRMP_REQUEST_EXAMPLE = _srmp_request()
