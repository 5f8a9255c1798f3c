"""The end-to-end load shapes: producers and long-polling consumers on one queue at once, and
a paced sender whose stamped messages give the latency from send to receive."""

from __future__ import annotations

import asyncio
import time

from bench import requests as rq
from bench.http_load import Connection, LoadResult, closed_loop, one_if_ok, repeat

PRODUCERS = 16
CONSUMERS = 16
LATENCY_CONSUMERS = 8
LATENCY_WARM_UP_S = 1.0
"""The latency scenario's first second at the same rate, whose latencies are not counted:
new pooled connections, the server's first (custom) plans on each, the gateway's caches."""
LONG_POLL_MS = 1000


async def producers_and_consumers(port: int, queue: str, seconds: float) -> LoadResult:
    """Producers send for `seconds` while long-polling consumers take; the rate is everything
    sent over the time until the last of it was received."""
    started = time.perf_counter()
    consumed = LoadResult()
    sent_all = asyncio.Event()
    sent = LoadResult()

    async def consumers() -> None:
        nonlocal consumed
        request = rq.rest_receive(queue, LONG_POLL_MS)
        connections = [await Connection.open(port) for _ in range(CONSUMERS)]

        async def consume(connection: Connection) -> None:
            while not (sent_all.is_set() and consumed.items >= sent.items):
                status, answer = await connection.exchange(request)
                consumed.items += rq.received_count(status, answer)
                if status not in (200, 204):
                    consumed.errors += 1
            consumed.reached_at = consumed.reached_at or time.perf_counter()

        await asyncio.gather(*(consume(connection) for connection in connections))
        for connection in connections:
            await connection.close()

    consuming = asyncio.ensure_future(consumers())
    sent = await closed_loop(
        port, PRODUCERS, repeat(rq.rest_send(queue), 10**9), one_if_ok((201,)), None, seconds
    )
    sent_all.set()
    await consuming
    consumed.elapsed_s = consumed.reached_at - started
    consumed.errors += sent.errors
    consumed.latencies_ms = sent.latencies_ms
    return consumed


async def paced_latency(port: int, queue: str, rate: int, seconds: float) -> LoadResult:
    """Send at a fixed rate (stamped bodies); consumers long-poll; latency = receive - send,
    for the messages sent after LATENCY_WARM_UP_S at the same rate (steady state: the
    gateway's pool and the server's per-connection plans are in place by then)."""
    total = int(rate * (seconds + LATENCY_WARM_UP_S))
    measured_from = time.perf_counter() + LATENCY_WARM_UP_S
    result = LoadResult()
    idle: asyncio.Queue[Connection] = asyncio.Queue()
    for _ in range(32):
        idle.put_nowait(await Connection.open(port))
    readers = [await Connection.open(port) for _ in range(LATENCY_CONSUMERS)]
    received = 0
    everything = asyncio.Event()

    async def consume(connection: Connection) -> None:
        nonlocal received
        request = rq.rest_receive(queue, LONG_POLL_MS)
        while not everything.is_set():
            status, body = await connection.exchange(request)
            if status == 200:
                sent = float(body[:20].rstrip(b"."))
                if sent >= measured_from:
                    result.latencies_ms.append((time.perf_counter() - sent) * 1000)
                received += 1
                if received >= total:
                    everything.set()

    async def send_one(connection: Connection) -> None:
        status, _ = await connection.exchange(rq.rest_send(queue, rq.stamped_body()))
        idle.put_nowait(connection)
        if status != 201:
            result.errors += 1

    consumers = [asyncio.ensure_future(consume(connection)) for connection in readers]
    loop = asyncio.get_running_loop()
    started = loop.time()
    sends = []
    behind = 0
    for index in range(total):
        delay = started + index / rate - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        if idle.empty():
            behind += 1  # every connection is still waiting: the gateway is not keeping the rate
            continue
        sends.append(asyncio.ensure_future(send_one(idle.get_nowait())))
    total -= behind
    if received >= total:
        everything.set()
    result.skipped = behind
    await asyncio.gather(*sends)
    await asyncio.wait_for(everything.wait(), timeout=60)
    result.elapsed_s = loop.time() - started
    result.items = received
    await asyncio.gather(*consumers)
    return result
