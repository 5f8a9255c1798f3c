"""uvicorn's httptools protocol: each response's head and body in one socket write, and a
hang-up seen behind pipelined requests.

uvicorn writes a response's status line and headers when the app starts the response, and the
body when the app sends it: two `send` system calls per answer, and on loopback the kernel's
TCP work for the reader happens inside each. Starlette sends both parts in the same step of
the event loop, so the head is held until the body comes (or until the end of that step, for
an answer whose body comes later) and the two go out together. The bytes on the wire are the
same; only the number of writes changes.
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol, RequestResponseCycle

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

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._running: RequestResponseCycle | None = None
        self._unparsed = bytearray()

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(HeldHeadTransport(transport, self.loop))

    def data_received(self, data: bytes) -> None:
        if not (self.pipeline or self._unparsed):
            super().data_received(data)
            return
        self._unparsed += data
        if len(self._unparsed) > PIPELINED_AT_MOST:
            self.transport.close()

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        if len(self.pipeline) > PIPELINED_REQUESTS_AT_MOST:
            self.transport.close()
        elif self.pipeline:  # queued: go on reading, so that a hang-up is seen (data_received)
            self.flow.resume_reading()

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
        queued = [cycle for cycle, _ in self.pipeline]
        for cycle in (self._running, *queued):
            if cycle is not None and not cycle.response_complete:
                cycle.disconnected = True
                cycle.message_event.set()
        super().connection_lost(exc)
