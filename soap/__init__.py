"""The SRMP codec: HTTP body bytes and content type <-> typed SRMP envelope (reference §1-§5).

Pure: no I/O, no HTTP framework, no database. Errors are `SrmpError` carrying the status the
receiver answers. The receiving route calls, in this order:

    check_request_head(method, content_length)          # before reading the body (405/400/413)
    envelope = parse_request(body, content_type)          # reference §1.7 steps 2-6 (400/413)
    timers = envelope_timers(envelope, settings, arrival) # §3.3, both timer settings
    properties = message_properties(envelope, timers)     # qm.model.MessageProperties
"""

from soap.build import build_commitment_receipt, build_delivery_receipt, build_request, build_stream_receipt
from soap.envelope import SrmpEnvelope, envelope_timers, message_properties
from soap.errors import SrmpError
from soap.limits import DEFAULT_LIMITS, Limits
from soap.parse import check_request_head, parse_request
from soap.times import LayoutMismatch, TimerMapping, Timers, TimerSettings

__all__ = [
    "DEFAULT_LIMITS",
    "LayoutMismatch",
    "Limits",
    "SrmpEnvelope",
    "SrmpError",
    "TimerMapping",
    "TimerSettings",
    "Timers",
    "build_commitment_receipt",
    "build_delivery_receipt",
    "build_request",
    "build_stream_receipt",
    "check_request_head",
    "envelope_timers",
    "message_properties",
    "parse_request",
]
