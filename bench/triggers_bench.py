"""Trigger throughput and the receive latency a trigger adds.

    .venv/bin/python bench/triggers_bench.py [--messages 500] [--database-url URL]

1. messages/s through a peek trigger (non-serialized and serialized) with a local webhook:
   time from the first send until the webhook has seen every message;
2. send+receive round trip on a queue, without and with a peek trigger walking that queue.
Prints a table and JSON. SQLite file in a temporary directory unless a URL is given.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from app.trigger_actions import HttpAndCommandRunner
from qm.clock import SystemClock
from qm.config import ManagerConfig
from qm.manager import QueueManager
from qm.model import MessageProperties, QueueSettings
from qm.reading import QueueReader
from qm.triggers.actions import AllowList
from qm.triggers.admin import TriggerAdmin, TriggerSpec
from qm.triggers.model import Action, ActionKind, TriggerConfig
from qm.triggers.service import TriggerService
from storage.engine import make_engine
from storage.migrate import upgrade
from storage.store import SqlStore
from storage.wakeups import LocalWakeUps


class Hook:
    """A minimal HTTP/1.1 server counting POSTs (keep-alive, so the client reuses connections)."""

    def __init__(self) -> None:
        self.count = 0
        self.target = 0
        self.done = asyncio.Event()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                await reader.readexactly(length)
                self.count += 1
                if self.count >= self.target:
                    self.done.set()
                writer.write(b"HTTP/1.1 204 No Content\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()


async def throughput(manager: QueueManager, hook: Hook, url: str, n: int, serialized: bool) -> float:
    path = f"private$/bench-{'s' if serialized else 'n'}"
    await manager.create_queue(path, QueueSettings())
    allow = AllowList(url_prefixes=(url,))
    admin = TriggerAdmin(manager, manager.store.triggers, allow)
    rule = await admin.create_rule(f"r-{path}", "", (), Action(ActionKind.WEBHOOK, url=f"{url}/hook"))
    await admin.create_trigger(TriggerSpec(f"t-{path}", path, True, serialized, rules=(rule.id,)))
    runner = HttpAndCommandRunner(allow)
    service = TriggerService(manager, manager.store.triggers, runner, TriggerConfig(concurrency=16))
    hook.count, hook.target, hook.done = 0, n, asyncio.Event()
    await service.refresh()
    started = time.perf_counter()
    for index in range(n):
        await manager.send(path, MessageProperties(body=f"m{index}".encode()))
    await hook.done.wait()
    elapsed = time.perf_counter() - started
    await service.close()
    await runner.close()
    return n / elapsed


async def round_trips(manager: QueueManager, path: str, n: int) -> float:
    reader = QueueReader(manager)
    samples = []
    for index in range(n):
        started = time.perf_counter()
        await manager.send(path, MessageProperties(body=f"x{index}".encode()))
        await reader.receive(path, 1000)
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


async def latency(manager: QueueManager, url: str, n: int) -> tuple[float, float]:
    path = "private$/bench-latency"
    await manager.create_queue(path, QueueSettings())
    without = await round_trips(manager, path, n)
    allow = AllowList(url_prefixes=(url,))
    admin = TriggerAdmin(manager, manager.store.triggers, allow)
    rule = await admin.create_rule("r-lat", "", (), Action(ActionKind.WEBHOOK, url=f"{url}/hook"))
    await admin.create_trigger(TriggerSpec("t-lat", path, True, False, rules=(rule.id,)))
    runner = HttpAndCommandRunner(allow)
    service = TriggerService(manager, manager.store.triggers, runner, TriggerConfig())
    await service.refresh()
    with_trigger = await round_trips(manager, path, n)
    await service.close()
    await runner.close()
    return without, with_trigger


async def main(database_url: str, n: int) -> dict[str, float]:
    store = SqlStore(make_engine(database_url))
    manager = QueueManager(store, LocalWakeUps(1.0), SystemClock(), ManagerConfig())
    await manager.start()
    hook = Hook()
    server = await asyncio.start_server(hook.serve, "127.0.0.1", 0)
    url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
    try:
        result = {
            "peek_non_serialized_msgs_per_s": await throughput(manager, hook, url, n, serialized=False),
            "peek_serialized_msgs_per_s": await throughput(manager, hook, url, n, serialized=True),
        }
        without, with_trigger = await latency(manager, url, max(50, n // 5))
        result |= {
            "receive_round_trip_ms_without": without,
            "receive_round_trip_ms_with_trigger": with_trigger,
        }
    finally:
        server.close()
        await store.close()
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--messages", type=int, default=500)
    parser.add_argument("--database-url")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        url = arguments.database_url or f"sqlite+aiosqlite:///{Path(directory) / 'bench.db'}"
        upgrade(url)
        numbers = asyncio.run(main(url, arguments.messages))
    for name, value in numbers.items():
        print(f"{name:40} {value:10.2f}")
    print(json.dumps(numbers))
