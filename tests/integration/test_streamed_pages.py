"""A browse page of large bodies is written message by message: the gateway never holds the
whole answer serialised (nor its copies), and answers other requests while it writes it.

The full-size case of issue 18 item 7 (100 bodies of 4 MB) is scripts/answer_memory.py; here
the same shape at a test's scale: 16 bodies of 128 KiB."""

from __future__ import annotations

import asyncio
import inspect
import json
import random
import tracemalloc
from asyncio import selector_events
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.main import create_app
from app.settings import Settings
from qm.clock import SettableClock
from tests.integration.support import create_queue

pytestmark = pytest.mark.anyio

QUEUE = "private$/large"
COUNT = 16
SIZE = 128 * 1024
PAGE_BYTES = COUNT * SIZE
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


ANSWER_BYTES = 64 * PAGE_BYTES
"""The cap of `large_app`'s answers: every message fits in one page."""
SMALL_ANSWER_BYTES = 4 * SIZE
"""The cap of `small_answers`: three messages a page (each weighs its base64 and a little)."""


@pytest.fixture
def answer_bytes() -> int:
    return ANSWER_BYTES


@pytest.fixture
async def large_app(settings: Settings, clock: SettableClock, answer_bytes: int) -> AsyncIterator[FastAPI]:
    """A gateway taking bodies of SIZE, holding COUNT of them, its answers capped at `answer_bytes`."""
    larger = settings.model_copy(update={"max_body_bytes": SIZE, "max_answer_bytes": answer_bytes})
    application = create_app(larger, clock)
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            await create_queue(client, QUEUE)
            randomness = random.Random(18)
            for number in range(COUNT):
                body = bytes([number]) + randomness.randbytes(SIZE - 1)  # binary: base64 in JSON
                sent = await client.post(f"/api/queues/{QUEUE}/messages", content=body)
                assert sent.status_code == 201, sent.text
        yield application


async def get(app: FastAPI, path: str, send: Send, query: bytes = b"limit=1000") -> None:
    """One GET through the whole app, its answer handed to `send` part by part as it comes."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": query,
        "headers": [(b"host", b"localhost")],
        "client": ("127.0.0.1", 50000),
        "server": ("localhost", 80),
    }

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    await app(scope, receive, send)


class Answer:
    """An answer's parts as they arrive; `parts` counts its body's parts."""

    def __init__(self) -> None:
        self.status = 0
        self.body = bytearray()
        self.parts = 0

    async def send(self, message: MutableMapping[str, Any]) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
        else:
            self.body += message.get("body", b"")
            self.parts += 1


async def test_healthz_is_answered_while_a_large_page_is_written(large_app: FastAPI) -> None:
    """The probe is asked once the page's first part is out, and the page's client reads no
    more until the probe has its answer: a page written in one step cannot wait for that."""
    events: list[str] = []
    health = Answer()
    answered = asyncio.Event()
    page = Answer()

    async def probe() -> None:
        await get(large_app, "/healthz", health.send)
        events.append("healthz answered")
        answered.set()

    async def read_page(message: MutableMapping[str, Any]) -> None:
        await page.send(message)
        if message["type"] == "http.response.body":
            if page.parts == 1:
                events.append("page begun")
                asyncio.get_running_loop().create_task(probe())
            elif message.get("more_body"):
                await asyncio.wait_for(answered.wait(), timeout=10)  # reached only on failure
            else:
                events.append("page ended")

    await get(large_app, f"/api/queues/{QUEUE}/messages", read_page)
    assert events == ["page begun", "healthz answered", "page ended"]
    assert health.status == 200 and page.status == 200
    found = json.loads(page.body)["messages"]
    assert [message["body_base64"] is not None for message in found] == [True] * COUNT


def _socket_read_line() -> int:
    reader = vars(selector_events)["_SelectorSocketTransport"]._read_ready__data_received
    lines, first = inspect.getsourcelines(reader)
    return first + next(number for number, line in enumerate(lines) if "self._sock.recv(" in line)


SOCKET_READS = tracemalloc.Filter(False, selector_events.__file__, _socket_read_line())
"""What the event loop reads from the store's sockets: asyncpg keeps each pooled connection's
last read (a body, after a read of one) until that connection reads again, however the answer
is written. What the driver makes of it (the rows' values) still counts."""


def held() -> int:
    """What Python holds that tracemalloc traced, but the store's socket reads."""
    snapshot = tracemalloc.take_snapshot().filter_traces([SOCKET_READS])
    return sum(statistic.size for statistic in snapshot.statistics("filename"))


@dataclass
class Measured:
    written: int = 0
    """The answer's bytes."""
    peak: int = 0
    """Python's peak allocation while the app answered, over what it held before."""
    held: int = 0
    """The most it held (but the store's socket reads) as it handed a part of the answer on,
    the part in hand, over what it held before: what it keeps, not what passes."""


async def measured(app: FastAPI, path: str, query: bytes = b"limit=1000") -> Measured:
    """An answer of the app, measured; its parts are counted, not kept."""
    result = Measured()

    async def measure(message: MutableMapping[str, Any]) -> None:
        part = message.get("body", b"")
        result.written += len(part)
        if len(part) > 1:  # not a separator
            result.held = max(result.held, held() - before)

    tracemalloc.start()
    try:
        before = held()
        start, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        await get(app, path, measure, query)
        result.peak = tracemalloc.get_traced_memory()[1] - start
    finally:
        tracemalloc.stop()
    return result


async def test_a_large_page_is_not_held_serialised(large_app: FastAPI) -> None:
    """The allocations during the browse peak near the page's bodies as read from the store
    (once), not at several times them: the JSON is made one message at a time and dropped once
    written. (One read of the store: its socket buffers are a body or two.)"""
    answer = await measured(large_app, f"/api/queues/{QUEUE}/messages")
    assert answer.written > PAGE_BYTES * 4 // 3  # every body, in base64
    assert answer.peak < PAGE_BYTES * 3 // 2, f"peak {answer.peak} for {PAGE_BYTES} bytes of bodies"


@pytest.mark.parametrize("answer_bytes", [SMALL_ANSWER_BYTES])
async def test_an_export_reads_pages_within_the_cap(large_app: FastAPI) -> None:
    """An export streams the whole queue, a page of at most MSMQGW_MAX_ANSWER_BYTES at a time.
    (Measured by what it holds: its many reads leave socket buffers in many pooled connections.)"""
    answer = await measured(large_app, f"/api/queues/{QUEUE}/messages/export", b"")
    assert answer.written > PAGE_BYTES * 4 // 3
    assert answer.held < SMALL_ANSWER_BYTES * 2, f"held {answer.held} for pages of {SMALL_ANSWER_BYTES} bytes"


async def test_an_export_of_chosen_messages_reads_them_one_at_a_time(large_app: FastAPI) -> None:
    transport = httpx.ASGITransport(app=large_app)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        page = (await client.get(f"/api/queues/{QUEUE}/messages", params={"limit": 1000})).json()
    query = "&".join(f"lookup_id={message['lookup_id']}" for message in page["messages"]).encode()
    answer = await measured(large_app, f"/api/queues/{QUEUE}/messages/export", query)
    assert answer.written > PAGE_BYTES * 4 // 3
    assert answer.held < 6 * SIZE, f"held {answer.held} for bodies of {SIZE} bytes"
