"""uvicorn's httptools protocol: each response's head and body in one socket write, a hang-up
seen behind pipelined requests, and the HTTP-layer limits uvicorn lacks (HttpLimits).

uvicorn writes a response's status line and headers when the app starts the response, and the
body when the app sends it: two `send` system calls per answer, and on loopback the kernel's
TCP work for the reader happens inside each. Starlette sends both parts in the same step of
the event loop, so the head is held until the body comes (or until the end of that step, for
an answer whose body comes later) and the two go out together. The bytes on the wire are the
same; only the number of writes changes.
"""

from __future__ import annotations

import asyncio
import functools
import json
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

from app.client_certs import CLIENT_CERTIFICATE, peer_certificate, tls_extension
from app.settings import Settings, load_settings
from qm.errors import MqErrorCode

JOINED_AT_MOST = 64 * 1024
"""A later write at least this long goes out on its own after the held head (no copy)."""


class HeldHeadTransport(asyncio.Transport):
    """A transport that holds one write back until the next write, a close, or the end of the
    current event-loop step, whichever comes first."""

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__()
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        held, self._held = self._held, None
        if held is None:
            self._held = bytes(data)
            self._loop.call_soon(self.flush)
        elif len(data) < JOINED_AT_MOST:
            self._transport.write(held + bytes(data))
        else:
            self._transport.write(held)
            self._transport.write(data)

    def flush(self) -> None:
        held, self._held = self._held, None
        if held is not None and not self._transport.is_closing():
            self._transport.write(held)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def abort(self) -> None:
        self._held = None
        self._transport.abort()

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._transport.get_extra_info(name, default)

    def pause_reading(self) -> None:
        self._transport.pause_reading()

    def resume_reading(self) -> None:
        self._transport.resume_reading()

    def is_reading(self) -> bool:
        return self._transport.is_reading()

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + len(self._held or b"")

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._transport.set_write_buffer_limits(high, low)

    def can_write_eof(self) -> bool:
        return self._transport.can_write_eof()

    def write_eof(self) -> None:
        self.flush()
        self._transport.write_eof()

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self._transport.set_protocol(protocol)

    def get_protocol(self) -> asyncio.BaseProtocol:
        return self._transport.get_protocol()


@dataclass(frozen=True)
class HttpLimits:
    """What one connection may make the server hold or wait for (docs/security.md, Limits).

    httptools keeps a header's value until it ends, so a 64 MB header was held whole (and
    stalled every client while it was parsed); uvicorn times out only idle keep-alive
    connections, so a connection that never sent a whole request was held for ever."""

    max_header_bytes: int = 64 * 1024
    max_headers: int = 100
    header_timeout_s: float = 10.0
    body_timeout_s: float = 60.0
    max_connections: int = 1000

    @classmethod
    def of(cls, settings: Settings) -> HttpLimits:
        return cls(
            max_header_bytes=settings.http_max_header_bytes,
            max_headers=settings.http_max_headers,
            header_timeout_s=settings.http_header_timeout_s,
            body_timeout_s=settings.http_body_timeout_s,
            max_connections=settings.max_connections,
        )


@functools.cache
def environment_limits() -> HttpLimits:
    """The limits of the MSMQGW_* environment: what `serve --workers N` processes have."""
    return HttpLimits.of(load_settings())


class _HeadRefused(Exception):
    """Raised in a parser callback to stop parsing a request refused from its head."""


PIPELINED_AT_MOST = 64 * 1024
PIPELINED_REQUESTS_AT_MOST = 32
"""Bytes, and parsed requests, a client may send behind a request that waits for an earlier
one to be answered; more closes the connection (its requests end as if it had hung up)."""


class OneWriteHttpToolsProtocol(HttpToolsProtocol):
    """`serve`'s HTTP protocol (uvicorn's `http=`): httptools, one write per answer, and a
    connection that keeps being read while requests wait behind a running one.

    uvicorn parses a pipelined request, queues it and stops reading the socket until the
    running request is answered; a client that hangs up meanwhile is not noticed, and when it
    is, only the last request parsed hears of it. A long-polling receive with a request behind
    it then took a message for a client that was gone. Here bytes that follow a queued request
    are kept unparsed (up to PIPELINED_AT_MOST) while the socket is still read, so the end of
    the connection is seen, and every request of the connection hears of it."""

    limits: ClassVar[HttpLimits | None] = None
    """Set by `serve`; None: from the environment (a worker process of `serve --workers`)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._limits = type(self).limits or environment_limits()
        self._running: RequestResponseCycle | None = None
        self._unparsed = bytearray()
        self._head_bytes: int | None = 0
        """Bytes received since the request head began; None while no head is being read."""
        self._header_count = 0
        self._refusal: tuple[HTTPStatus, str] | None = None
        self._phase: str | None = "head"
        """"head" or "body" while a request is being read, None between requests."""
        self._phase_began = 0.0
        self._watchdog: asyncio.TimerHandle | None = None
        self._tls: dict[str, Any] = {}
        """What each request's scope gets from the TLS connection (app/client_certs.py)."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(HeldHeadTransport(transport, self.loop))
        self._tls = _tls_scope(transport.get_extra_info("ssl_object"))
        if len(self.connections) > self._limits.max_connections:
            self._refuse(HTTPStatus.SERVICE_UNAVAILABLE, "the gateway serves as many connections as it may")
            return
        self._phase_began = self.loop.time()
        self._arm_watchdog()

    def data_received(self, data: bytes) -> None:
        if not (self.pipeline or self._unparsed):
            if self._head_bytes is not None:
                self._head_bytes += len(data)
            super().data_received(data)
            head_bytes = self._head_bytes
            if head_bytes is not None and head_bytes > self._limits.max_header_bytes:
                self._refuse(
                    HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE,
                    f"the request head is over {self._limits.max_header_bytes} bytes",
                )
            return
        self._unparsed += data
        if len(self._unparsed) > PIPELINED_AT_MOST:
            self.transport.close()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self._tls:
            self.scope.update(self._tls)  # type: ignore[typeddict-item]
        self._header_count = 0
        self._head_bytes = self._head_bytes or 0
        if self._phase != "head":
            self._phase, self._phase_began = "head", self.loop.time()

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_count += 1
        if self._header_count > self._limits.max_headers:
            self._refusal = (
                HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE,
                f"the request has more than {self._limits.max_headers} header fields",
            )
            raise _HeadRefused  # uvicorn answers a parser error with send_400_response
        super().on_header(name, value)

    def send_400_response(self, msg: str) -> None:
        if self._refusal is None:
            super().send_400_response(msg)
        else:
            self._refuse(*self._refusal)

    def on_headers_complete(self) -> None:
        self._head_bytes = None
        self._phase, self._phase_began = "body", self.loop.time()
        super().on_headers_complete()
        if len(self.pipeline) > PIPELINED_REQUESTS_AT_MOST:
            self.transport.close()
        elif self.pipeline:  # queued: go on reading, so that a hang-up is seen (data_received)
            self.flow.resume_reading()

    def on_message_complete(self) -> None:
        self._phase = None
        self._head_bytes = 0
        super().on_message_complete()

    def _arm_watchdog(self) -> None:
        interval = min(self._limits.header_timeout_s, self._limits.body_timeout_s) / 2
        self._watchdog = self.loop.call_later(interval, self._look)

    def _cancel_timers(self) -> None:
        if self._watchdog is not None:
            self._watchdog.cancel()
            self._watchdog = None

    def _look(self) -> None:
        """The connection's one timer, every half of the shorter timeout (cheaper than a timer
        per request): a head or a body that takes too long ends the connection, so either is
        cut off between once and one and a half times its timeout."""
        if self.transport.is_closing():
            return
        late = self.loop.time() - self._phase_began
        if self._phase == "head" and late > self._limits.header_timeout_s:
            self._refuse(
                HTTPStatus.REQUEST_TIMEOUT,
                f"the request head did not arrive within {self._limits.header_timeout_s:g} s",
            )
            return
        if self._phase == "body" and late > self._limits.body_timeout_s:
            if not (self.flow.read_paused or self.pipeline):
                self.transport.close()  # the body stopped coming; its request reads a disconnect
                return
            # The gateway stopped reading it (the app is not reading yet, or the request waits
            # behind another): not the client's delay; the clock starts again.
            self._phase_began = self.loop.time()
        self._arm_watchdog()

    def _refuse(self, status: HTTPStatus, detail: str) -> None:
        """Answer from the protocol and close: a problem+json document, unless an answer of
        this connection is under way (then only close; answers cannot interleave)."""
        if self.transport.is_closing():
            return
        self._cancel_timers()
        running = self._running
        if running is None or running.response_complete:
            self.transport.write(_problem_answer(status, detail))
        self.transport.close()

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: Any) -> None:
        self._running = cycle
        super()._start_asgi_task(cycle, app)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self._unparsed and not self.pipeline and not self.transport.is_closing():
            self.loop.call_soon(self._parse_held)

    def _parse_held(self) -> None:
        if self.pipeline or self.parser is None:  # another request queued first, or closed
            return
        held, self._unparsed = bytes(self._unparsed), bytearray()
        self.data_received(held)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timers()
        queued = [cycle for cycle, _ in self.pipeline]
        for cycle in (self._running, *queued):
            if cycle is not None and not cycle.response_complete:
                cycle.disconnected = True
                cycle.message_event.set()
        super().connection_lost(exc)


def _tls_scope(ssl_object: Any) -> dict[str, Any]:
    """The ASGI TLS extension and the verified client certificate, read once per connection."""
    if ssl_object is None:
        return {}
    certificate = peer_certificate(ssl_object)
    found: dict[str, Any] = {"extensions": {"tls": tls_extension(ssl_object, certificate)}}
    if certificate is not None:
        found[CLIENT_CERTIFICATE] = certificate
    return found


_CODE_OF = {
    HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE: MqErrorCode.MQ_ERROR_INSUFFICIENT_RESOURCES,
    HTTPStatus.SERVICE_UNAVAILABLE: MqErrorCode.MQ_ERROR_INSUFFICIENT_RESOURCES,
    HTTPStatus.REQUEST_TIMEOUT: MqErrorCode.MQ_ERROR_IO_TIMEOUT,
}


def _problem_answer(status: HTTPStatus, detail: str) -> bytes:
    """A whole HTTP/1.1 answer with a problem+json body (app.errors.problem's fields)."""
    code = _CODE_OF[status]
    body = json.dumps(
        {
            "type": f"urn:msmq-gateway:error:{code.name}",
            "title": code.name,
            "status": int(status),
            "detail": detail,
            "mq_error": code.name,
            "mq_error_code": code.hex,
        },
        separators=(",", ":"),
    ).encode()
    head = (
        f"HTTP/1.1 {int(status)} {status.phrase}\r\ncontent-type: application/problem+json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    )
    return head.encode("latin-1") + body
