"""The scenarios of issue 5, each on SQLite and PostgreSQL, each against a fresh gateway process."""

from __future__ import annotations

import asyncio
import itertools
import json
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from bench import requests as rq
from bench.auth_bench import auth_rows
from bench.ceiling import run_ceiling
from bench.decode_bench import decode_rows
from bench.e2e_load import CONSUMERS, LATENCY_CONSUMERS, PRODUCERS, paced_latency, producers_and_consumers
from bench.harness import Database, Gateway, client_cpu_seconds, migrate, settle
from bench.http_load import (
    LoadResult,
    closed_loop,
    one_if_ok,
    percentile,
    repeat,
)
from bench.metrics_bench import (
    MANY_QUEUES,
    SCRAPED_E2E,
    observation_cost_us,
    scrape_times,
    seed_queues,
    watched_while,
)
from bench.seed import seed_depth


@dataclass(frozen=True)
class Profile:
    name: str
    ceiling_single: int
    ceiling_batched: int
    seconds: float
    """How long each load scenario runs (closed loops stop sending then)."""
    prepared: int
    """SRMP envelopes built before the clock starts (each message has its own ID)."""
    latency_seconds: float
    depths: tuple[int, ...]
    receive_stock: int
    """Messages put in a queue (by SQL) for the receive scenarios to take."""


QUICK = Profile("quick", 200, 3000, 4.0, 6000, 4.0, (0, 20_000), 20_000)
FULL = Profile("full", 1000, 20_000, 10.0, 40_000, 10.0, (0, 100_000, 1_000_000), 150_000)

SEND_CONCURRENCY = (1, 16, 64)
LATENCY_RATE = 500
WORKERS = 2
"""`serve --workers` for the rows that show what both cores of the machine give."""

Row = dict[str, Any]
SCENARIOS = frozenset({"ceiling", "srmp", "rest", "auth", "decode", "e2e", "latency", "depth", "metrics"})


_created = itertools.count(1)


def create_queue(gateway: Gateway, name: str) -> str:
    """A new queue `name-<n>` (every scenario gets its own, on the run's one database)."""
    path = f"private$/{name}-{next(_created)}"
    request = urllib.request.Request(
        gateway.base_url + "/api/queues",
        data=json.dumps({"path": path}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=30):
        pass
    return path


class StoreRun:
    """All scenarios on one database; each appends rows to `rows`."""

    def __init__(self, database: Database, profile: Profile, rows: list[Row]) -> None:
        self.database = database
        self.profile = profile
        self.rows = rows

    def row(self, scenario: str, concurrency: int | str, result: LoadResult | None, **extra: Any) -> Row:
        row: Row = {"store": self.database.kind, "scenario": scenario, "concurrency": concurrency}
        if result is not None:
            row |= {
                "messages": result.items,
                "per_s": round(result.rate, 1),
                "p50_ms": round(percentile(result.latencies_ms, 0.5), 2),
                "p99_ms": round(percentile(result.latencies_ms, 0.99), 2),
                "errors": result.errors,
            }
            if result.skipped:
                row["skipped"] = result.skipped
        row |= extra
        self.rows.append(row)
        print(_line(row), flush=True)
        return row

    async def measured(
        self,
        scenario: str,
        concurrency: int | str,
        work: Callable[[Gateway], Awaitable[LoadResult]],
        settings: dict[str, str] | None = None,
        workers: int = 1,
    ) -> Row:
        """Run `work` against a fresh gateway on a settled database; add its peak RSS and both
        sides' CPU seconds."""
        settle(self.database)
        gateway = Gateway(self.database, settings, workers)
        try:
            client_before, gateway_before = client_cpu_seconds(), gateway.cpu_seconds()
            result = await work(gateway)
            client_cpu = client_cpu_seconds() - client_before
            if result.client_cpu_s is not None:
                client_cpu = result.client_cpu_s
            gateway_cpu = gateway.cpu_seconds() - gateway_before
        finally:
            peak, _ = gateway.stop()
        return self.row(
            scenario,
            concurrency,
            result,
            rss_mb=round(peak, 1),
            gateway_cpu_s=round(gateway_cpu, 2),
            client_cpu_s=round(client_cpu, 2),
            # CPU per message: what the gateway costs whatever share of the cores it got
            gateway_cpu_ms_per_msg=round(1000 * gateway_cpu / max(result.items, 1), 2),
        )

    async def run(self, only: frozenset[str] = SCENARIOS) -> None:
        migrate(self.database)
        if "ceiling" in only:
            self.ceiling()
        for name, scenario in (
            ("srmp", self.srmp_send),
            ("rest", self.rest_send_receive),
            ("auth", self.authenticated),
            ("decode", self.decode),
            ("e2e", self.end_to_end),
            ("latency", self.latency),
            ("depth", self.depth),
            ("metrics", self.metrics_scrape),
        ):
            if name in only:
                await scenario()

    def ceiling(self) -> None:
        for per_commit, count in ((1, self.profile.ceiling_single), (100, self.profile.ceiling_batched)):
            rates = run_ceiling(self.database, count, per_commit)
            self.row(
                f"ceiling {per_commit}/commit",
                "-",
                None,
                messages=count,
                per_s=round(rates["insert_per_s"], 1),
                claim_per_s=round(rates["claim_per_s"], 1),
            )

    async def srmp_send(self) -> None:
        seconds, prepared = self.profile.seconds, self.profile.prepared
        for recoverable in (True, False):
            kind = "recoverable" if recoverable else "express"
            for concurrency in SEND_CONCURRENCY if recoverable else (64,):

                async def work(gateway: Gateway, c: int = concurrency, r: bool = recoverable) -> LoadResult:
                    queue = create_queue(gateway, f"srmp-{c}-{r}")
                    envelopes = rq.srmp_requests(gateway.port, queue, prepared, r)
                    return await closed_loop(
                        gateway.port, c, iter(envelopes), one_if_ok((200,)), None, seconds
                    )

                await self.measured(f"SRMP send {kind}", concurrency, work)
                if recoverable and concurrency == max(SEND_CONCURRENCY):
                    name = f"SRMP send {kind}, {WORKERS} workers"
                    await self.measured(name, concurrency, work, workers=WORKERS)

    async def rest_send_receive(self) -> None:
        seconds = self.profile.seconds
        for express in (False, True):

            async def send(gateway: Gateway, e: bool = express) -> LoadResult:
                request = rq.rest_send(create_queue(gateway, "rest-send"), express=e)
                return await closed_loop(
                    gateway.port, 64, repeat(request, 10**9), one_if_ok((201,)), None, seconds
                )

            await self.measured("REST send " + ("express" if express else "recoverable"), 64, send)
        for batch, concurrency in ((1, 16), (100, 4)):

            async def receive(gateway: Gateway, b: int = batch, c: int = concurrency) -> LoadResult:
                return await self.receive_from_stock(
                    gateway, "rest-receive", self.profile.receive_stock, b, c
                )

            await self.measured(f"REST receive x{batch}", concurrency, receive)

    async def authenticated(self) -> None:
        await auth_rows(self)

    async def decode(self) -> None:
        """The body decoder on one core (in this process), then a JSON receive without and with
        `decode=true`, same run, same stock."""
        for row in decode_rows(self.profile.seconds / 3):
            self.row(row.pop("scenario"), "-", None, **row)
        for decode in (False, True):

            async def receive(gateway: Gateway, d: bool = decode) -> LoadResult:
                stock = self.profile.receive_stock
                return await self.receive_from_stock(gateway, "rest-decode", stock, 1, 16, d)

            await self.measured("REST receive JSON" + (" decode=true" if decode else ""), 16, receive)

    async def receive_from_stock(
        self,
        gateway: Gateway,
        name: str,
        stock: int,
        batch: int,
        concurrency: int,
        decode: bool | None = None,
    ) -> LoadResult:
        """Receive (timeout 0) for the scenario's duration from a queue holding `stock` messages."""
        queue = create_queue(gateway, name)
        seed_depth(self.database, queue.removeprefix("private$/"), stock)
        requests = repeat(rq.rest_receive(queue, 0, batch, decode), 10**9)
        return await closed_loop(
            gateway.port, concurrency, requests, rq.received_count, stock, self.profile.seconds
        )

    async def end_to_end(self) -> None:
        async def work(gateway: Gateway) -> LoadResult:
            queue = create_queue(gateway, "e2e")
            return await producers_and_consumers(gateway.port, queue, self.profile.seconds)

        scrapes: list[float] = []
        refreshes: list[int] = []

        async def scraped(gateway: Gateway) -> LoadResult:
            queue = create_queue(gateway, "e2e")
            work = asyncio.ensure_future(producers_and_consumers(gateway.port, queue, self.profile.seconds))
            result, took, refreshed = await watched_while(gateway.port, queue, work)
            scrapes.extend(took)
            refreshes.append(refreshed)
            return result

        concurrency = f"{PRODUCERS}+{CONSUMERS}"
        # Without, with, with, without: the machine's drift over the four runs cancels out of
        # the ratio (report.targets: /metrics every 1 s and an open console cost < 5 %).
        await self.measured("end to end", concurrency, work)
        scraped_row = await self.measured(SCRAPED_E2E, concurrency, scraped)
        await self.measured(SCRAPED_E2E + " (2)", concurrency, scraped)
        await self.measured("end to end (2)", concurrency, work)
        scraped_row |= {
            "scrapes": len(scrapes),
            "scrape_p50_ms": round(percentile(scrapes, 0.5), 2),
            "console_refreshes": sum(refreshes),
        }
        await self.measured(f"end to end, {WORKERS} workers", concurrency, work, workers=WORKERS)

    async def latency(self) -> None:
        async def work(gateway: Gateway) -> LoadResult:
            queue = create_queue(gateway, "latency")
            return await paced_latency(gateway.port, queue, LATENCY_RATE, self.profile.latency_seconds)

        name, concurrency = f"latency @{LATENCY_RATE}/s", f"1+{LATENCY_CONSUMERS}"
        await self.measured(name, concurrency, work)
        await self.measured(f"{name}, {WORKERS} workers", concurrency, work, workers=WORKERS)

    async def depth(self) -> None:
        seconds = self.profile.seconds
        for depth in self.profile.depths:

            async def send(gateway: Gateway, d: int = depth) -> LoadResult:
                queue = create_queue(gateway, f"depth-{d}")
                seed_depth(self.database, queue.removeprefix("private$/"), d)
                request = rq.rest_send(queue)
                return await closed_loop(
                    gateway.port, 64, repeat(request, 10**9), one_if_ok((201,)), None, seconds
                )

            async def receive(gateway: Gateway, d: int = depth) -> LoadResult:
                stock = d + self.profile.receive_stock
                return await self.receive_from_stock(gateway, f"depth-{d}", stock, 1, 16)

            await self.measured(f"depth {depth:,} send", 64, send)
            await self.measured(f"depth {depth:,} receive", 16, receive)

    async def metrics_scrape(self) -> None:
        """One scrape's time with the queues the run made so far, then with MANY_QUEUES more,
        each against a fresh gateway on the same database (their ratio is the cost of the queues)."""
        few = await self.scraped_gateway()
        seed_queues(self.database, MANY_QUEUES)
        many = await self.scraped_gateway()
        for name, (took, size, cpu_ms) in (("before seeding", few), (f"{MANY_QUEUES:,} queues more", many)):
            row = self.row(
                f"/metrics scrape, {name}",
                1,
                None,
                scrapes=len(took),
                p50_ms=round(percentile(took, 0.5), 2),
                p99_ms=round(percentile(took, 0.99), 2),
                bytes=size,
                # At one scrape a second, the share of one core the scrapes take.
                gateway_cpu_ms_per_scrape=round(cpu_ms, 2),
            )
        row["vs_before"] = round(percentile(many[0], 0.5) / max(percentile(few[0], 0.5), 1e-9), 1)
        bare_us, observed_us = await observation_cost_us()
        self.row(
            "request observed (ID, histogram, counter), in process",
            "-",
            None,
            bare_us=round(bare_us, 2),
            observed_us=round(observed_us, 2),
            added_us=round(observed_us - bare_us, 2),
        )

    async def scraped_gateway(self) -> tuple[list[float], int, float]:
        """SCRAPES scrapes of a fresh gateway: their times (ms), the text's size, and the
        gateway's CPU time per scrape (ms)."""
        settle(self.database)
        gateway = Gateway(self.database)
        try:
            cpu_before = gateway.cpu_seconds()
            took, size = await scrape_times(gateway.port)
            cpu_ms = 1000 * (gateway.cpu_seconds() - cpu_before) / len(took)
        finally:
            gateway.stop()
        return took, size, cpu_ms


def _line(row: Row) -> str:
    return "  ".join(f"{key}={value}" for key, value in row.items() if key != "store") + f"  [{row['store']}]"
