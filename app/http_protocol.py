"""uvicorn's httptools protocol, with each response's head and body sent in one socket write.

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

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

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


class OneWriteHttpToolsProtocol(HttpToolsProtocol):
    """`serve`'s HTTP protocol (uvicorn's `http=`): httptools, one write per answer."""

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(HeldHeadTransport(transport, self.loop))
