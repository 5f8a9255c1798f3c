"""POST /msmq/{queue path}: MSMQ messages from Windows senders over HTTP (SRMP, reference §1.7).

SRMP senders understand only the status: 200 (stored, or a duplicate), 400 (never retried:
malformed, unknown or non-local queue), 500 and 503 (retried later). No body, ever.
"""

from __future__ import annotations

import logging
from dataclasses import asdict
from http import HTTPStatus
from typing import Any, Literal
from urllib.parse import urlsplit

from fastapi import APIRouter
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from app import answers as a
from app.admin_queues import srmp_admin_queue_refused
from app.auth import srmp_refusal
from app.docs import SRMP_REQUEST_EXAMPLE, SRMP_STATISTICS_EXAMPLE
from app.gateway import Gateway, GatewayDep
from qm.errors import MqError, MqErrorCode, QuotaExceeded
from qm.manager import SINGLE_MESSAGE_TRANSACTION
from qm.model import MessageProperties
from qm.outbound import srmp_source
from qm.streams import StreamPosition
from soap import (
    DEFAULT_LIMITS,
    SrmpEnvelope,
    SrmpError,
    TimerSettings,
    check_request_head,
    envelope_timers,
    message_properties,
    parse_request,
)
from soap.envelope import CommitmentReceipt
from soap.ids import DEFAULT_MESSAGE_ID
from soap.urls import parse_http_url, queue_path_of
from storage.errors import DATABASE_ERRORS, is_unavailable

router = APIRouter(tags=["srmp"])
Outcome = Literal["stored", "duplicates", "stream_receipts", "stray_stream_receipts"]
_METRIC_OUTCOMES: dict[Outcome, str] = {
    "stored": "stored",
    "duplicates": "duplicate",
    "stream_receipts": "stream_receipt",
    "stray_stream_receipts": "stray_stream_receipt",
}
"""Outcome -> the `outcome` label of msmqgw_srmp_requests_total."""
log = logging.getLogger(__name__)

_RETRY_LATER = {QuotaExceeded: HTTPStatus.SERVICE_UNAVAILABLE}
_REFUSED_FOR_GOOD = frozenset(
    {
        MqErrorCode.MQ_ERROR_QUEUE_NOT_FOUND,
        MqErrorCode.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME,
        MqErrorCode.MQ_ERROR_ILLEGAL_FORMATNAME,
        MqErrorCode.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION,
        MqErrorCode.MQ_ERROR_TRANSACTION_USAGE,
        MqErrorCode.MQ_ERROR_ILLEGAL_PROPERTY_VALUE,
        MqErrorCode.MQ_ERROR_ILLEGAL_PROPERTY_SIZE,
        MqErrorCode.MQ_ERROR_LABEL_TOO_LONG,
        MqErrorCode.MQ_ERROR_INSUFFICIENT_RESOURCES,
    }
)


SRMP_OPENAPI: dict[str, Any] = {
    "/msmq/{path}": {
        "post": {
            "tags": ["srmp"],
            "summary": "Receive an SRMP message from an MSMQ sender",
            "description": "The body is an SRMP request as Windows MSMQ POSTs it (multipart/related: SOAP "
            "envelope plus the body as an attachment). The queue comes from the envelope's `<to>`, which "
            "must name a host in MSMQGW_LOCAL_HOST_NAMES. Answers 200 with an empty body once the message "
            "is stored. Any case of the virtual directory, `\\` separators and absolute request targets "
            "are accepted; other methods get 405.",
            "operationId": "receive_srmp_msmq__path__post",
            "parameters": [
                {
                    "in": "path",
                    "name": "path",
                    "required": True,
                    "schema": {"title": "Path", "type": "string"},
                }
            ],
            "requestBody": {
                "required": True,
                "content": {
                    "multipart/related": {
                        "schema": {"type": "string", "format": "binary"},
                        "example": SRMP_REQUEST_EXAMPLE,
                    }
                },
            },
            "responses": {
                "200": {"description": "Stored (or a duplicate of a stored message); no body"},
                "400": {"description": "Malformed, or not for a queue of this gateway: the sender gives up"},
                "413": {"description": "Larger than the configured maximum"},
                "500": {"description": "Machine quota reached or throttled: the sender retries"},
                "503": {"description": "Queue quota reached or store unavailable: the sender retries"},
            },
        }
    }
}
"""The SRMP endpoint in the OpenAPI document: it is served by `SrmpRequestTarget` below the
router, so FastAPI does not see it."""


async def answer_srmp(scope: Scope, receive: Receive, gateway: Gateway) -> HTTPStatus:
    """Read, parse and store one SRMP request; the status is all the sender gets."""
    path = scope["path"]
    try:
        envelope = await _read_envelope(scope, receive)
        outcome = await _store(envelope, gateway, scope)
    except SrmpError as error:
        return _refused(HTTPStatus(error.status), error.reason, path, gateway)
    except QuotaExceeded as error:
        status = HTTPStatus.INTERNAL_SERVER_ERROR if error.machine else HTTPStatus.SERVICE_UNAVAILABLE
        return _refused(status, error.detail, path, gateway)
    except MqError as error:
        status = (
            HTTPStatus.BAD_REQUEST if error.code in _REFUSED_FOR_GOOD else HTTPStatus.INTERNAL_SERVER_ERROR
        )
        return _refused(status, error.detail, path, gateway)
    except DATABASE_ERRORS as error:
        log.exception("SRMP message to %s not stored", path)
        status = HTTPStatus.SERVICE_UNAVAILABLE if is_unavailable(error) else HTTPStatus.INTERNAL_SERVER_ERROR
        return _refused(status, "the message store failed", path, gateway)
    setattr(gateway.srmp, outcome, getattr(gateway.srmp, outcome) + 1)
    gateway.metrics.srmp(HTTPStatus.OK, _METRIC_OUTCOMES[outcome])
    return HTTPStatus.OK


@router.get(
    "/api/srmp/statistics",
    summary="What the SRMP route did since this process started",
    description="Counters of this gateway process (each process of a deployment counts its own).",
    responses=a.answers(a.ok(SRMP_STATISTICS_EXAMPLE), store=False),
)
async def statistics(gateway: GatewayDep) -> dict[str, int]:
    return asdict(gateway.srmp)


async def _read_envelope(scope: Scope, receive: Receive) -> SrmpEnvelope:
    headers = Headers(scope=scope)
    chunked = "chunked" in headers.get("transfer-encoding", "").lower()
    check_request_head(scope["method"], headers.get("content-length"), chunked=chunked)
    chunks, size, more = [], 0, True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise SrmpError(HTTPStatus.BAD_REQUEST, "the sender went away before the body ended")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > DEFAULT_LIMITS.max_request_bytes:
            raise SrmpError(HTTPStatus.REQUEST_ENTITY_TOO_LARGE, "the request body is too large")
        chunks.append(chunk)
        more = message.get("more_body", False)
    return parse_request(b"".join(chunks), headers.get("content-type"))


async def _store(envelope: SrmpEnvelope, gateway: GatewayDep, scope: Scope) -> Outcome:
    """Store the message; the outcome names the counter it adds to."""
    if envelope.stream_receipt is not None:
        return "stream_receipts" if await _our_stream_receipt(envelope, gateway) else "stray_stream_receipts"
    settings = gateway.settings
    queue = _local_queue(envelope, gateway)
    timers = envelope_timers(
        envelope,
        TimerSettings(settings.srmp_timer_mapping, settings.srmp_timer_layout_mismatch),
        gateway.manager.clock.now(),
    )
    if timers.layout_mismatch:
        gateway.srmp.timer_layout_mismatches += 1
        gateway.metrics.srmp_timer_layout_mismatches.inc()
        log.warning(
            "timer layout mismatch from %s (message %s): %s",
            envelope.msmq.source_qm_guid if envelope.msmq else "?",
            envelope.message_id.text,
            timers,
        )
    properties = message_properties(envelope, timers)
    await _admit(queue, properties, envelope, gateway, scope)
    duplicate_key = None if envelope.message_id == DEFAULT_MESSAGE_ID else envelope.message_id.text
    transaction = SINGLE_MESSAGE_TRANSACTION if envelope.stream is not None else None
    eod = envelope.msmq.eod if envelope.msmq is not None else None
    boundaries = None if envelope.stream is None else (bool(eod and eod.first), bool(eod and eod.last))
    source = srmp_source(_client(scope)[0])
    stored = await gateway.manager.deliver(
        queue, properties, transaction, duplicate_key, boundaries, _stream_position(envelope), source
    )
    if stored is None:
        log.info("duplicate SRMP message %s to %s dropped", duplicate_key, queue)
        return "duplicates"
    return "stored"


async def _admit(
    queue: str, properties: MessageProperties, envelope: SrmpEnvelope, gateway: Gateway, scope: Scope
) -> None:
    """The SRMP sender's WRITE_MESSAGE on the queue (docs/security.md). A refused
    message is stored nowhere, earns its NACK (class 0x8004) where it asked for one, and is
    answered 400, the status of a message the receiver will not take: the sender gives up."""
    path = gateway.manager.resolve(queue)
    client = _client(scope)
    security = scope["app"].state.security
    refusal = await srmp_refusal(security, scope, path)
    if refusal is None:
        admin_queue = await srmp_admin_queue_refused(security, gateway.manager, scope, properties)
        if admin_queue is None:
            return
        # Its acknowledgments would be written there: refused as a whole, with no NACK (that
        # would go to the very queue it may not write).
        gateway.srmp.access_denied += 1
        raise SrmpError(
            HTTPStatus.BAD_REQUEST,
            f"the SRMP sender from {client[0]} may not write to its admin queue {admin_queue.url_path}",
        )
    gateway.srmp.access_denied += 1
    nack = await gateway.manager.refuse_arrival(
        path, properties, envelope.message_id.text, srmp_source(client[0])
    )
    raise SrmpError(HTTPStatus.BAD_REQUEST, refusal + ("; negative acknowledgment sent" if nack else ""))


def _client(scope: Scope) -> tuple[str, int]:
    """The sender's address and port as the server (or a trusted proxy's header) gives them."""
    client: tuple[str, int] = scope.get("client") or ("", 0)
    return client


async def _our_stream_receipt(envelope: SrmpEnvelope, gateway: GatewayDep) -> bool:
    """A receipt for a stream this gateway sends (reference §4.7) settles its outgoing messages;
    with a `<commitmentReceipt>` it is a final receipt (§4.4) as well, settled after the stream
    part. False for any other stream: a stray or late receipt (another gateway's, a stream
    already gone, a guess) settles nothing and is dropped, answered 200 like a hit so that a
    prober learns nothing, and is never stored (no queue of ours is its destination)."""
    receipt = envelope.stream_receipt
    assert receipt is not None
    settled = await gateway.manager.outgoing_stream_acknowledged(receipt.stream_id.text, receipt.last_ordinal)
    if settled is None:
        return False
    log.info(
        "stream receipt for %s up to %d: %d messages delivered",
        receipt.stream_id.text,
        receipt.last_ordinal,
        settled,
    )
    if envelope.commitment_receipt is not None:
        await _final_receipt(envelope, envelope.commitment_receipt, gateway)
    return True


async def _final_receipt(envelope: SrmpEnvelope, commitment: CommitmentReceipt, gateway: GatewayDep) -> None:
    """Settle the original; a receipt for a message that no longer waits (it did not ask for a
    dead letter, or an earlier copy of this receipt settled it) is dropped, answered 200."""
    assert envelope.stream_receipt is not None
    message_class = envelope.msmq.message_class if envelope.msmq is not None else None
    original = commitment.id.text
    settled = await gateway.manager.final_receipt_received(
        envelope.stream_receipt.stream_id.text, original, commitment.positive, message_class
    )
    decision = "positive" if commitment.positive else "negative"
    if settled:
        log.info("final receipt for %s: %s (class %s)", original, decision, message_class)
    else:
        log.info(
            "final receipt for %s (%s, class %s) settles nothing here", original, decision, message_class
        )


def _stream_position(envelope: SrmpEnvelope) -> StreamPosition | None:
    stream = envelope.stream
    if stream is None:
        return None
    return StreamPosition(
        stream.stream_id.text, stream.current, stream.previous, stream.send_receipts_to, envelope.path.to
    )


def _local_queue(envelope: SrmpEnvelope, gateway: GatewayDep) -> str:
    """The queue named by `<to>`, which must be on this gateway (not the request line)."""
    url = parse_http_url(envelope.path.to, "<to>")
    virtual_directory, queue = queue_path_of(url)
    hosts = gateway.manager.config.local_host_names
    if url.host.casefold() not in hosts:
        raise SrmpError(HTTPStatus.BAD_REQUEST, f"<to> host {url.host!r} is not this gateway")
    if virtual_directory.casefold() != gateway.settings.srmp_virtual_directory.casefold():
        raise SrmpError(
            HTTPStatus.BAD_REQUEST, f"<to> virtual directory {virtual_directory!r} is not served here"
        )
    return queue.url_path


def _refused(status: HTTPStatus, reason: str, path: str, gateway: Gateway) -> HTTPStatus:
    if status == HTTPStatus.BAD_REQUEST:
        gateway.srmp.refused += 1
        gateway.metrics.srmp(status, "refused")
    else:
        gateway.srmp.retry_later += 1
        gateway.metrics.srmp(status, "retry_later")
    log.info("SRMP POST to %s answered %d: %s", path, status, reason)
    return status


class SrmpRequestTarget:
    """ASGI middleware that serves the SRMP endpoint itself, ahead of FastAPI's routing (the
    hot path of the gateway: a Windows sender's POST costs no route matching, dependency
    solving or Request object). It takes the request targets Windows senders write
    (reference §1.1): any case of the virtual directory, `\\` separators and the absolute
    form `http://host/msmq/...`; other methods there get a bodiless 405, as SRMP expects."""

    def __init__(self, app: ASGIApp, virtual_directory: str) -> None:
        self._app = app
        self._prefix = f"/{virtual_directory.strip('/')}/".casefold()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = _srmp_path(scope["path"], self._prefix) if scope["type"] == "http" else None
        if path is None:
            await self._app(scope, receive, send)
        elif scope["method"] != "POST":
            await _bare(send, HTTPStatus.METHOD_NOT_ALLOWED, [(b"allow", b"POST")])
        else:
            gateway: Gateway = scope["app"].state.gateway
            try:
                status = await answer_srmp(dict(scope, path=path), receive, gateway)
            except Exception:  # an empty 500 still: the sender retries later
                log.exception("SRMP POST to %s failed", path)
                status = HTTPStatus.INTERNAL_SERVER_ERROR
            await _bare(send, status)


def _srmp_path(target: str, prefix: str) -> str | None:
    """`/msmq/...` for a target in the SRMP virtual directory, else None."""
    if "://" in target:
        target = urlsplit(target).path
    unified = target.replace("\\", "/")
    if unified[: len(prefix)].casefold() != prefix:
        return None
    return "/msmq/" + unified[len(prefix) :]


async def _bare(send: Send, status: HTTPStatus, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    """A response with no body: all an SRMP sender reads is the status."""
    head = [*(headers or []), (b"content-length", b"0")]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": b""})
