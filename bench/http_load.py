"""A small keep-alive HTTP/1.1 load generator on raw asyncio streams.

httpx costs ~100 us of client CPU per request; this costs a few. Requests are prepared as
bytes before the clock starts, so the measured loop is write, read the head, read
Content-Length bytes (or the chunks of a streamed answer: browse pages, exports).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field


def request_bytes(
    method: str, target: str, body: bytes = b"", headers: dict[str, str] | None = None
) -> bytes:
    lines = [f"{method} {target} HTTP/1.1", "Host: 127.0.0.1"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    @classmethod
    async def open(cls, port: int) -> Connection:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        return cls(reader, writer)

    async def exchange(self, request: bytes) -> tuple[int, bytes]:
        """Send one prepared request; return the status and the response body."""
        self._writer.write(request)
        head = await self._reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        length = 0
        for line in head.split(b"\r\n")[1:]:
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
                break
            if line.lower() == b"transfer-encoding: chunked":
                return status, await self._chunks()
        body = await self._reader.readexactly(length) if length else b""
        return status, body

    async def _chunks(self) -> bytes:
        """A chunked body (streamed answers: browse pages, exports), read to its last chunk."""
        parts = []
        while size := int((await self._reader.readuntil(b"\r\n")).split(b";")[0], 16):
            parts.append(await self._reader.readexactly(size))
            await self._reader.readexactly(2)
        await self._reader.readuntil(b"\r\n")  # no trailers are sent: the empty line
        return b"".join(parts)

    async def close(self) -> None:
        self._writer.close()
        try:
            await self._writer.wait_closed()
        except OSError:
            pass


@dataclass
class LoadResult:
    completed: int = 0
    """Requests answered with an expected status."""
    items: int = 0
    """Messages moved (a batched receive moves many per request)."""
    errors: int = 0
    elapsed_s: float = 0.0
    latencies_ms: list[float] = field(default_factory=list)
    statuses: dict[int, int] = field(default_factory=dict)
    client_cpu_s: float | None = None
    """CPU seconds of this process during the loop alone (not preparing requests or seeding)."""
    skipped: int = 0
    """Paced sends not made because every connection was still waiting (rate not kept)."""
    reached_at: float = 0.0
    """perf_counter() when `target_items` was reached."""

    @property
    def rate(self) -> float:
        return self.items / self.elapsed_s if self.elapsed_s else 0.0


Counter = Callable[[int, bytes], int]
"""How many messages one response carried, from its status and body."""


def one_if_ok(expected: Iterable[int]) -> Counter:
    wanted = frozenset(expected)
    return lambda status, _body: 1 if status in wanted else 0


async def closed_loop(
    port: int,
    concurrency: int,
    requests: Iterator[bytes],
    count: Counter,
    target_items: int | None = None,
    duration_s: float | None = None,
) -> LoadResult:
    """`concurrency` connections, each sending its next request as soon as the last is answered,
    until `requests` runs out, `target_items` messages were counted or `duration_s` is over."""
    result = LoadResult()
    connections = [await Connection.open(port) for _ in range(concurrency)]
    done = asyncio.Event()
    deadline = None if duration_s is None else time.perf_counter() + duration_s

    async def worker(connection: Connection) -> None:
        for request in requests:
            if done.is_set() or (deadline is not None and time.perf_counter() > deadline):
                return
            started = time.perf_counter()
            status, body = await connection.exchange(request)
            result.latencies_ms.append((time.perf_counter() - started) * 1000)
            result.statuses[status] = result.statuses.get(status, 0) + 1
            moved = count(status, body)
            if moved or status < 300:
                result.completed += 1
            else:
                result.errors += 1
            result.items += moved
            if target_items is not None and result.items >= target_items and not done.is_set():
                result.reached_at = time.perf_counter()
                done.set()

    started, cpu_started = time.perf_counter(), time.process_time()
    await asyncio.gather(*(worker(connection) for connection in connections))
    result.elapsed_s = time.perf_counter() - started
    result.client_cpu_s = time.process_time() - cpu_started
    for connection in connections:
        await connection.close()
    return result


def repeat(request: bytes, times: int) -> Iterator[bytes]:
    return itertools.repeat(request, times)


def percentile(values: list[float], fraction: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


NULL_SERVER = """
import asyncio, sys

async def serve(reader, writer):
    try:
        while True:
            head = await reader.readuntil(b"\\r\\n\\r\\n")
            length = 0
            for line in head.split(b"\\r\\n"):
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            if length:
                await reader.readexactly(length)
            writer.write(b"HTTP/1.1 200 OK\\r\\ncontent-length: 0\\r\\n\\r\\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        writer.close()

async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", int(sys.argv[1]))
    async with server:
        await server.serve_forever()

asyncio.run(main())
"""
"""A server that does nothing but answer: what the load generator alone can drive."""
