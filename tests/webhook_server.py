"""A real HTTP server on loopback for trigger webhooks: records each request, answers with
the status a test chooses, and lets tests wait for hits instead of sleeping."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

WAIT_LIMIT_S = 20.0
"""Only reached when a test fails."""


@dataclass(frozen=True)
class Hit:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class WebhookServer:
    """`status_for(hit)` decides each answer (default 200); `hold` keeps answers back;
    a hit for which `hangs(hit)` is true is never answered."""

    def __init__(
        self, status_for: Callable[[Hit], int] | None = None, hangs: Callable[[Hit], bool] | None = None
    ) -> None:
        self.hits: list[Hit] = []
        self.status_for = status_for or (lambda _hit: 200)
        self.hangs = hangs or (lambda _hit: False)
        self._never = asyncio.Event()
        self.hold = asyncio.Event()
        self.hold.set()
        self._changed = asyncio.Condition()
        self._server: asyncio.Server | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> WebhookServer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *_exc: object) -> None:
        assert self._server is not None
        self.hold.set()
        self._never.set()
        self._server.close()
        await self._server.wait_closed()

    async def until(self, count: int) -> list[Hit]:
        """Wait until at least `count` requests arrived; return them all."""
        async with asyncio.timeout(WAIT_LIMIT_S), self._changed:
            await self._changed.wait_for(lambda: len(self.hits) >= count)
        return list(self.hits)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
            request_line, *header_lines = head.split("\r\n")
            method, path, _version = request_line.split(" ", 2)
            headers = {
                name.strip().lower(): value.strip()
                for name, _sep, value in (line.partition(":") for line in header_lines if line)
            }
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            hit = Hit(method, path, headers, body)
            async with self._changed:
                self.hits.append(hit)
                self._changed.notify_all()
            await self.hold.wait()
            if self.hangs(hit):
                await self._never.wait()
            status = self.status_for(hit)
            writer.write(f"HTTP/1.1 {status} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".encode())
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()
