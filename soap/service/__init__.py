"""The SOAP API for clients that are not MSMQ (SOAP 1.1, document/literal, described by WSDL).

Pure, like the SRMP codec beside it: the route calls, in this order,

    call = parse_call(body, content_type, request_limits(max_body_bytes))  # or ServiceFault
    ... one queue-manager call per operation ...
    response_envelope(call.operation, values)   # or fault_envelope(fault)

and serves `wsdl_document(address)` at GET /soap?wsdl.
"""

from dataclasses import replace

from soap.limits import DEFAULT_LIMITS, Limits
from soap.service import calls
from soap.service.calls import Call, LookupAction
from soap.service.decode import parse_call
from soap.service.encode import fault_envelope, response_envelope
from soap.service.faults import FaultCode, ServiceFault, client_fault
from soap.service.schema import TARGET_NAMESPACE
from soap.service.values import message_values, queue_values, sent_values, transaction_values
from soap.service.wsdl import wsdl_document

ENVELOPE_OVERHEAD_BYTES = 64 * 1024
"""Room for the envelope, the other properties and their markup around a message body."""


def request_limits(max_body_bytes: int) -> Limits:
    """The codec's limits for a request that may carry a body of `max_body_bytes` as base64."""
    return replace(DEFAULT_LIMITS, max_envelope_bytes=request_size_limit(max_body_bytes))


def request_size_limit(max_body_bytes: int) -> int:
    return (max_body_bytes + 2) // 3 * 4 + ENVELOPE_OVERHEAD_BYTES


__all__ = [
    "TARGET_NAMESPACE",
    "Call",
    "FaultCode",
    "LookupAction",
    "ServiceFault",
    "calls",
    "client_fault",
    "fault_envelope",
    "message_values",
    "parse_call",
    "queue_values",
    "request_limits",
    "request_size_limit",
    "response_envelope",
    "sent_values",
    "transaction_values",
    "wsdl_document",
]
