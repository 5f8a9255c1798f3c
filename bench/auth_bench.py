"""REST send and receive with an API key beside the same without credentials, in one run
(issue 18 item 8): what checking a key and a right costs per request. Each pair runs in the
order A B B A, so that a drift of the machine over the run weighs on both alike; the target
compares the best run of each (the least disturbed by other work on the machine)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from bench.harness import Database, Gateway, _environment, gateway_executable
from bench.http_load import Connection, LoadResult, closed_loop, one_if_ok, repeat, request_bytes
from bench.requests import body, received_count
from bench.seed import seed_depth

if TYPE_CHECKING:
    from bench.suite import StoreRun

ORDER = (False, True, True, False)
PLAIN, KEYED = "no credentials", "API key"
SEND_CONCURRENCY, RECEIVE_CONCURRENCY = 64, 16
PRINCIPAL = "bench"


def bench_key(database: Database) -> dict[str, str]:
    """A key whose principal may send to and receive from the bench's `auth-*` queues only, made
    with the CLI before any gateway runs (so its scrypt hash is no gateway's CPU), as the
    Authorization header."""
    environment = _environment(database, {})

    def cli(*arguments: str) -> Any:
        done = subprocess.run(
            [*gateway_executable(), *arguments], env=environment, check=True, capture_output=True
        )
        return json.loads(done.stdout)

    cli("grant", PRINCIPAL, "RECEIVE_MESSAGE,WRITE_MESSAGE", "--queue", "private$/auth-*")
    return {"Authorization": f"Bearer {cli('keys', 'create', '--principal', PRINCIPAL)['key']}"}


async def _first(gateway: Gateway, request: bytes) -> None:
    """One request before the clock starts: the key's one verification (scrypt) is not in the
    figures, which are about every request after it."""
    connection = await Connection.open(gateway.port)
    try:
        await connection.exchange(request)
    finally:
        await connection.close()


async def auth_rows(run: StoreRun) -> None:
    from bench.suite import create_queue

    seconds = run.profile.seconds
    key = bench_key(run.database)
    for keyed in ORDER:

        async def send(gateway: Gateway, k: bool = keyed) -> LoadResult:
            queue = create_queue(gateway, "auth-send")
            headers = {"Content-Type": "application/octet-stream"} | (key if k else {})
            request = request_bytes("POST", f"/api/queues/{queue}/messages", body(), headers)
            await _first(gateway, request)
            return await closed_loop(
                gateway.port, SEND_CONCURRENCY, repeat(request, 10**9), one_if_ok((201,)), None, seconds
            )

        await run.measured(f"REST send, {KEYED if keyed else PLAIN}", SEND_CONCURRENCY, send)
    for keyed in ORDER:

        async def receive(gateway: Gateway, k: bool = keyed) -> LoadResult:
            queue = create_queue(gateway, "auth-receive")
            stock = run.profile.receive_stock
            seed_depth(run.database, queue.removeprefix("private$/"), stock)
            headers = {"Accept": "application/octet-stream"} | (key if k else {})
            request = request_bytes("POST", f"/api/queues/{queue}/receive?timeout_ms=0", b"", headers)
            await _first(gateway, request)
            return await closed_loop(
                gateway.port, RECEIVE_CONCURRENCY, repeat(request, 10**9), received_count, stock, seconds
            )

        await run.measured(f"REST receive, {KEYED if keyed else PLAIN}", RECEIVE_CONCURRENCY, receive)


def auth_targets(rows: list[dict[str, Any]], store: str) -> list[tuple[str, float | None]]:
    """(target, keyed / plain, best of the A B B A runs): messages per second, and messages
    per gateway CPU second, which a machine shared with other work disturbs less."""
    found = []
    for operation in ("send", "receive"):
        plain, keyed = f"REST {operation}, {PLAIN}", f"REST {operation}, {KEYED}"
        rate = _ratio(_best(rows, store, keyed, "per_s", max), _best(rows, store, plain, "per_s", max))
        found.append((f"REST {operation} with an API key / without >= 0.95", rate))
        # CPU per message the other way round: less CPU per message is more messages per CPU second.
        cpu = _ratio(
            _best(rows, store, plain, "gateway_cpu_ms_per_msg", min),
            _best(rows, store, keyed, "gateway_cpu_ms_per_msg", min),
        )
        found.append((f"REST {operation} with an API key / without, per CPU s >= 0.95", cpu))
    return found


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    return round(numerator / denominator, 2) if numerator is not None and denominator else None


def _best(
    rows: list[dict[str, Any]], store: str, scenario: str, key: str, pick: Callable[[list[float]], float]
) -> float | None:
    values = [
        row[key] for row in rows if row["store"] == store and row["scenario"] == scenario and key in row
    ]
    return pick(values) if values else None
