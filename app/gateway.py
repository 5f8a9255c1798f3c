"""The objects a request needs, built once per application in the lifespan."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Query, Request

from app.metrics import ProcessMetrics
from app.parameters import AbsentIfEmpty
from app.settings import Settings
from qm.cursors import CursorService
from qm.errors import MqError, MqErrorCode
from qm.manager import QueueManager
from qm.outgoing import OutgoingQueues
from qm.reading import QueueReader


@dataclass
class SrmpCounters:
    """What the SRMP route did since this process started (GET /api/srmp/statistics)."""

    stored: int = 0
    duplicates: int = 0
    """Answered 200 and dropped: a message ID seen recently, or a stream message out of order."""
    stream_receipts: int = 0
    """Receipts for streams this gateway sends, consumed rather than stored."""
    stray_stream_receipts: int = 0
    """Receipts for streams this gateway does not send (stray, late or forged): answered 200, dropped."""
    refused: int = 0
    """Answered 400: the sender gives up."""
    retry_later: int = 0
    """Answered 413, 500 or 503."""
    timer_layout_mismatches: int = 0
    access_denied: int = 0
    """Answered 400 and stored nowhere: the sender may not write to the queue (docs/security.md)."""


@dataclass(frozen=True)
class Gateway:
    settings: Settings
    manager: QueueManager
    reader: QueueReader
    cursors: CursorService
    outgoing: OutgoingQueues
    srmp: SrmpCounters = field(default_factory=SrmpCounters)
    metrics: ProcessMetrics = field(default_factory=ProcessMetrics)


def gateway_of(request: Request) -> Gateway:
    """For the hot routes, which take the request anyway: a dependency costs FastAPI a nested
    solve of its own on every request (about 25 us)."""
    gateway: Gateway = request.app.state.gateway
    return gateway


async def _gateway(request: Request) -> Gateway:
    # async although it awaits nothing: FastAPI runs a plain `def` dependency in a worker
    # thread, a thread hand-off on every request.
    return gateway_of(request)


GatewayDep = Annotated[Gateway, Depends(_gateway)]

TimeoutMs = Annotated[
    int,
    Query(
        ge=0,
        description="How long to wait for a message, in ms; 0 = do not wait. Capped by the server "
        "setting MSMQGW_MAX_WAIT_MS (default 60000).",
    ),
]
TransactionParam = Annotated[
    str | None,
    AbsentIfEmpty,
    Query(
        description="Transaction ID from POST /api/transactions, or `single` for a one-message transaction"
    ),
]


DecodeParam = Annotated[
    bool,
    Query(
        description="Include `decoded`: the body as the gateway reads it (XML, JSON, .NET binary "
        "serialization, COM VARIANT values, NServiceBus headers; docs/bodies.md). Costs CPU: off by default"
    ),
]


def _decode_param(decode: DecodeParam = False) -> bool:
    return decode


DECODE = Depends(_decode_param)
"""For routes that answer messages through `message_response`: declares (and validates) `decode`,
which `app.http.decode_requested` reads."""


REST_WAIT = ("timeout_ms", "wait again after a 204")
"""How a REST client names the wait, and what it does when one ends without a message."""


def check_wait(gateway: Gateway, timeout_ms: int, words: tuple[str, str] = REST_WAIT) -> int:
    """`timeout_ms`, or MQ_ERROR_INVALID_PARAMETER above MSMQGW_MAX_WAIT_MS, told in the
    caller's `words` (its name for the wait; what to do after an empty answer)."""
    if timeout_ms > gateway.settings.max_wait_ms:
        name, again = words
        raise MqError(
            MqErrorCode.MQ_ERROR_INVALID_PARAMETER,
            f"{name} is {timeout_ms}; one wait lasts at most {gateway.settings.max_wait_ms} ms here "
            f"(MSMQGW_MAX_WAIT_MS): {again}",
        )
    return timeout_ms


def canonical_queue(gateway: Gateway, path: str) -> str:
    """The queue's name as responses show it; resolved before any work, so that a path that
    cannot be shown never fails a request after a message was taken."""
    return gateway.manager.resolve(path).url_path
