"""GET /metrics on a port of its own (MSMQGW_METRICS_PORT), for deployments that expose the API
and keep the scrape on an internal network. A deliberately tiny HTTP/1.1 server: one GET per
connection, the request head bounded in size and time, nothing else answered. Every worker
process binds the port (SO_REUSEPORT); any of them answers the same numbers."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from http import HTTPStatus

from app.edge import split_host
from app.metrics import CONTENT_TYPE

MAX_HEAD_BYTES = 8192
HEAD_TIMEOUT_S = 10.0
METRICS_PATH = b"/metrics"

Scrape = Callable[[], Awaitable[bytes]]


async def serve_metrics(
    host: str, port: int, scrape: Scrape, names: frozenset[str] | None = None
) -> asyncio.Server:
    """`names`: the `Host` names answered (app.edge.allowed_hosts; None: any), so that a page
    rebinding its own name to this address cannot read the metrics (421 otherwise)."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            status, body = await _answer(reader, scrape, names)
            content_type = CONTENT_TYPE if status == HTTPStatus.OK else "text/plain; charset=utf-8"
            head = (
                f"HTTP/1.1 {status.value} {status.phrase}\r\nContent-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            )
            writer.write(head.encode("ascii") + body)
            await writer.drain()
        except (ConnectionError, TimeoutError):
            pass  # the scraper went away: nothing is owed to it
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    return await asyncio.start_server(answer, host, port, reuse_port=True, limit=MAX_HEAD_BYTES)


async def _answer(
    reader: asyncio.StreamReader, scrape: Scrape, names: frozenset[str] | None
) -> tuple[HTTPStatus, bytes]:
    try:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT_S)
    except asyncio.LimitOverrunError:
        return HTTPStatus.REQUEST_HEADER_FIELDS_TOO_LARGE, b"request head too large\n"
    except asyncio.IncompleteReadError:
        return HTTPStatus.BAD_REQUEST, b"incomplete request\n"
    method, _, rest = head.partition(b" ")
    target = rest.split(b" ", 1)[0].split(b"?", 1)[0]
    if target != METRICS_PATH:
        return HTTPStatus.NOT_FOUND, b"only /metrics is served on this port\n"
    if method != b"GET":
        return HTTPStatus.METHOD_NOT_ALLOWED, b"GET only\n"
    if names is not None and not _names_us(head, names):
        return HTTPStatus.MISDIRECTED_REQUEST, b"Host is not a name of this gateway (MSMQGW_ALLOWED_HOSTS)\n"
    return HTTPStatus.OK, await scrape()


def _names_us(head: bytes, names: frozenset[str]) -> bool:
    """Exactly one `Host` field, naming the gateway (as the API's edge decides)."""
    hosts = [
        value.strip()
        for name, _, value in (line.partition(b":") for line in head.split(b"\r\n")[1:])
        if name.strip().lower() == b"host"
    ]
    return len(hosts) == 1 and split_host(hosts[0].decode("latin-1"))[0] in names
