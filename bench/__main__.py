"""`python -m bench [--quick] [--stores sqlite,postgresql] [--no-peer]`: run, print, save JSON."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Coroutine
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import peer_rabbitmq
from bench.e2e_load import CONSUMERS, PRODUCERS
from bench.harness import client_cpu_seconds, free_port, postgres_database, postgres_up, sqlite_database
from bench.http_load import NULL_SERVER, closed_loop, one_if_ok
from bench.report import table, targets
from bench.requests import srmp_requests
from bench.suite import FULL, QUICK, SCENARIOS, Profile, Row, StoreRun

RESULTS = Path(__file__).resolve().parent / "results"


def machine() -> dict[str, Any]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "host": platform.node(),
        "cpu": model,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "system": platform.platform(),
        "load_average_at_start": os.getloadavg(),
    }


async def null_baseline(messages: int, profile_seconds: float) -> Row:
    """What the load generator drives against a server that does nothing: its own ceiling."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", NULL_SERVER, str(port)])  # noqa: ASYNC220 (starts at once)
    try:
        for _ in range(200):
            try:
                _reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                break
            except OSError:
                await asyncio.sleep(0.05)
        prepared = srmp_requests(port, "private$/null", messages, True)
        before = client_cpu_seconds()
        result = await closed_loop(port, 64, iter(prepared), one_if_ok((200,)), None, profile_seconds)
        row: Row = {
            "store": "-",
            "scenario": "null server (load generator alone)",
            "concurrency": 64,
            "messages": result.items,
            "per_s": round(result.rate, 1),
            "client_cpu_s": round(client_cpu_seconds() - before, 2),
        }
        print(row, flush=True)
        return row
    finally:
        server.terminate()
        server.wait()


async def peer(profile: Profile) -> Row:
    outcome = await peer_rabbitmq.end_to_end(profile.seconds, PRODUCERS, CONSUMERS)
    row: Row = {
        "store": "rabbitmq",
        "scenario": "end to end",
        "concurrency": f"{PRODUCERS}+{CONSUMERS}",
        "messages": outcome["messages"],
        "per_s": round(outcome["per_s"], 1),
    }
    print(row, flush=True)
    return row


async def main(arguments: argparse.Namespace) -> int:
    profile = QUICK if arguments.quick else FULL
    started = datetime.now(UTC)
    at_start = machine()  # the load average before the run, not after it
    rows: list[Row] = [await null_baseline(profile.prepared, profile.seconds)]
    stores = arguments.stores.split(",")
    for kind in stores:
        if kind == "postgresql" and not postgres_up():
            print("PostgreSQL at 127.0.0.1:5432 is down: skipped", file=sys.stderr)
            continue
        opener = sqlite_database if kind == "sqlite" else postgres_database
        with opener() as database:
            await StoreRun(database, profile, rows).run(frozenset(arguments.only.split(",")))
    if not arguments.no_pipeline:
        rows.extend(pipeline_rows(arguments.pipeline_rows or profile_pipeline_rows(arguments.quick)))
    if not arguments.no_peer:
        if peer_rabbitmq.rabbitmq_up():
            rows.append(await peer(profile))
        else:
            print("RabbitMQ at 127.0.0.1:5672 is down: no peer figures", file=sys.stderr)
    report = {
        "profile": profile.name,
        "started": started.isoformat(timespec="seconds"),
        "minutes": round((datetime.now(UTC) - started).total_seconds() / 60, 1),
        "machine": at_start | {"load_average_at_end": os.getloadavg()},
        "rows": rows,
        "targets": targets(rows),
    }
    print()
    print(table(report))
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{started.strftime('%Y%m%dT%H%M%SZ')}-{profile.name}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(f"\nwritten {path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path}")
    return 0


def profile_pipeline_rows(quick: bool) -> int:
    return 100_000 if quick else 1_000_000


def pipeline_rows(count: int) -> list[Row]:
    """The pipeline scenario (bench/pipeline_archive.py): Spark's archive and report beside
    the same archive work without Spark, local[1] and local[2], JVM start timed apart."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        print("pipeline: PySpark is not installed (pip install -e '.[pipeline]'): skipped", file=sys.stderr)
        return []
    from bench import pipeline_archive

    found = pipeline_archive.bench_rows(count, pipeline_archive.measure(count, ["local[1]", "local[2]"]))
    for row in found:
        print(row, flush=True)
    return found


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="about a minute per store, smaller depths")
    parser.add_argument("--stores", default="sqlite,postgresql")
    parser.add_argument("--no-peer", action="store_true", help="skip RabbitMQ")
    parser.add_argument("--no-pipeline", action="store_true", help="skip the Spark pipeline scenario")
    parser.add_argument(
        "--pipeline-rows",
        type=int,
        default=0,
        help="rows for the pipeline scenario (1,000,000; --quick 100,000)",
    )
    parser.add_argument(
        "--only",
        default=",".join(sorted(SCENARIOS)),
        help="comma-separated subset of: " + ", ".join(sorted(SCENARIOS)),
    )
    return parser.parse_args(argv)


def run(work: Coroutine[Any, Any, int]) -> int:
    """On uvloop where it is installed (a dependency of the gateway, off Windows): the load
    generator then takes about half the CPU per request it takes on the standard loop, CPU
    that the gateway and the database share on a small machine. The RabbitMQ peer's client
    runs on the same loop."""
    try:
        import uvloop
    except ImportError:
        return asyncio.run(work)
    return uvloop.run(work)


if __name__ == "__main__":
    time.tzset()
    sys.exit(run(main(parse(sys.argv[1:]))))
