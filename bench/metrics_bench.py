"""What watching the gateway costs: a /metrics scrape every second and an open console during the
end-to-end scenario (its throughput with and without, same run), and one scrape's time with
10,000 queues against one with a handful."""

from __future__ import annotations

import asyncio
import contextlib
import time
from datetime import UTC, datetime

import sqlalchemy as sa
from starlette.types import Message, Receive, Scope, Send

from bench.harness import Database
from bench.http_load import Connection, LoadResult, request_bytes
from qm.model import QueueSettings
from qm.paths import QueueKind, QueuePath
from storage import rows
from storage.tables import queues

SCRAPE_INTERVAL_S = 1.0
"""As often as a Prometheus asked to scrape every second would."""
MANY_QUEUES = 10_000
SCRAPES = 20
SCRAPE = request_bytes("GET", "/metrics")
SCRAPED_E2E = "end to end, /metrics every 1 s and a console"
"""The end-to-end row measured while a Prometheus scrapes and an operator's console is open."""
CONSOLE_POLL_S = 2.0
"""The console's refresh (app/static/console/app.js POLL_MS): the fastest it polls."""
CONSOLE_PAGE = 50
"""Messages in one page of the console's message list (app/static/console/queues.js PAGE)."""


def console_requests(queue: str) -> list[bytes]:
    """What one console refresh asks while it shows `queue`: the queue tree (queues and outgoing
    queues, their counts) and the open queue's first page of messages."""
    listed = f"/api/queues/{queue}/messages?limit={CONSOLE_PAGE}"
    return [request_bytes("GET", target) for target in ("/api/queues", "/api/outgoing-queues", listed)]


async def scraping(port: int, stop: asyncio.Event) -> list[float]:
    """Scrape every SCRAPE_INTERVAL_S until `stop`; each scrape's time in ms."""
    connection = await Connection.open(port)
    took: list[float] = []
    try:
        while not stop.is_set():
            started = time.perf_counter()
            status, _ = await connection.exchange(SCRAPE)
            if status != 200:
                raise RuntimeError(f"/metrics answered {status}")
            took.append((time.perf_counter() - started) * 1000)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), SCRAPE_INTERVAL_S)
    finally:
        await connection.close()
    return took


async def console_polling(port: int, queue: str, stop: asyncio.Event) -> int:
    """Refresh as an open console does, every CONSOLE_POLL_S until `stop`; the refreshes made."""
    connection = await Connection.open(port)
    refreshes = 0
    try:
        while not stop.is_set():
            for request in console_requests(queue):
                status, _ = await connection.exchange(request)
                if status != 200:
                    raise RuntimeError(f"the console's poll was answered {status}")
            refreshes += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), CONSOLE_POLL_S)
    finally:
        await connection.close()
    return refreshes


async def watched_while(
    port: int, queue: str, work: asyncio.Future[LoadResult]
) -> tuple[LoadResult, list[float], int]:
    """`work` with a 1 Hz scrape and an open console on `queue` beside it: its result, each
    scrape's time in ms, and the console refreshes made."""
    stop = asyncio.Event()
    scraper = asyncio.ensure_future(scraping(port, stop))
    console = asyncio.ensure_future(console_polling(port, queue, stop))
    try:
        result = await work
    finally:
        stop.set()
    return result, await scraper, await console


async def scrape_times(port: int, count: int = SCRAPES) -> tuple[list[float], int]:
    """`count` scrapes one after the other: each one's time in ms, and the size of the last."""
    connection = await Connection.open(port)
    took, size = [], 0
    try:
        for _ in range(count):
            started = time.perf_counter()
            status, body = await connection.exchange(SCRAPE)
            took.append((time.perf_counter() - started) * 1000)
            if status != 200:
                raise RuntimeError(f"/metrics answered {status}")
            size = len(body)
    finally:
        await connection.close()
    return took, size


def seed_queues(database: Database, count: int) -> None:
    """`count` private queues with journals, written as the gateway writes them (no gateway
    runs meanwhile), with totals on their rows as a busy machine has."""
    url = database.driver_target
    url = (
        f"sqlite:///{url}"
        if database.kind == "sqlite"
        else url.replace("postgresql://", "postgresql+psycopg://")
    )
    engine = sa.create_engine(url)
    now = datetime.now(UTC)
    try:
        with engine.begin() as connection:
            bases = [
                rows.queue_values(
                    QueuePath(QueueKind.PRIVATE, f"scraped-{n}"), QueueSettings(journal=True), now
                )
                | {"message_count": n % 100, "byte_count": (n % 100) * 1024}
                for n in range(count)
            ]
            connection.execute(sa.insert(queues), bases)
            ids = connection.execute(
                sa.select(queues.c.id, queues.c.name).where(queues.c.name.like("scraped-%"))
            ).all()
            journals = [
                rows.queue_values(QueuePath(QueueKind.PRIVATE, name, journal=True), QueueSettings(), now)
                | {"journal_of": queue_id}
                for queue_id, name in ids
            ]
            connection.execute(sa.insert(queues), journals)
    finally:
        engine.dispose()


async def observation_cost_us(requests: int = 100_000) -> tuple[float, float]:
    """What app/observed.py adds to one request, in this process: a bare ASGI app's CPU time
    per request, and the same app's behind the middleware (request ID, histogram, counter)."""
    from app.metrics import ProcessMetrics
    from app.observed import Observed

    async def bare(_scope: Scope, _receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 201, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"{}"})

    async def receive() -> Message:
        return {"type": "http.request"}

    async def send(_message: Message) -> None:
        return None

    scope: Scope = {
        "type": "http",
        "method": "POST",
        "path": "/api/queues/private$/orders/messages",
        "headers": [(b"host", b"127.0.0.1"), (b"content-type", b"application/json")],
    }
    observed = Observed(bare, ProcessMetrics(), "msmq", log_requests=False)
    timings = []
    for app in (bare, observed):
        started = time.process_time()  # CPU time: other work on the machine does not count
        for _ in range(requests):
            await app(scope, receive, send)
        timings.append((time.process_time() - started) / requests * 1e6)
    return timings[0], timings[1]
