"""Wake-ups across processes on PostgreSQL: LISTEN/NOTIFY on one dedicated connection.

Every gateway process listens on one channel. A change is signalled in-process at once
and published with NOTIFY right after the commit that made it, as `queue_id:messages` pairs;
the other processes wake as many waiting receives of each queue (and every other watcher)
when the notification arrives. A pair without a count wakes every waiter of the queue.
Messages that woke a receive waiting in this process are not counted again in the pair
(`7:0` still wakes the peeks and cursors elsewhere): one message wakes one receive across
all processes, not one in each. A wake-up handed on here with no taker left to take it is
published as well.
Correctness never depends on it: receives claim rows with SKIP LOCKED, so a lost
notification costs latency, not messages, and a slow safety poll covers the time the
listening connection is down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import Counter
from collections.abc import Iterable

import asyncpg
import sqlalchemy as sa

from qm.wakeups import Watch
from storage.wakeups import LocalWakeUps

CHANNEL = "msmq_gateway_wakeup"
_RECONNECT_DELAY_S = 1.0
_MAX_COUNTED = 10_000
"""More messages than this in one notification wake no more waiters than this."""
log = logging.getLogger(__name__)


def asyncpg_dsn(url: str) -> str:
    return sa.engine.make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


class PostgresWakeUps:
    def __init__(self, url: str, safety_poll_interval: float) -> None:
        self._dsn = asyncpg_dsn(url)
        self._local = LocalWakeUps(safety_poll_interval, unclaimed=self._announce)
        self._pending: Counter[int] = Counter()
        self._wanted = asyncio.Event()
        self._connection: asyncpg.Connection | None = None
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Listen before serving, so that no notification sent after start-up is missed."""
        try:
            await self._connect()
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as error:
            log.warning("wake-up channel not available yet (%s); retrying in the background", error)
        self._task = asyncio.create_task(self._run(), name="postgres-wakeups")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self._disconnect()

    def watch(self, queue_id: int, takes: bool = False) -> Watch:
        return self._local.watch(queue_id, takes)

    def signal(self, queue_ids: Iterable[int]) -> None:
        self._local.signal(queue_ids)

    def pass_on(self, queue_id: int) -> None:
        self._local.pass_on(queue_id)

    def _announce(self, queue_id: int, messages: int) -> None:
        """For the other processes: `messages` that no receive waiting here was woken for."""
        self._pending[queue_id] += messages
        self._wanted.set()

    async def _run(self) -> None:
        """Keep a listening connection, and publish pending signals on it; reconnect on failure."""
        while True:
            try:
                if self._connection is None:
                    await self._connect()
                await self._publish_forever()
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as error:
                log.warning("wake-up channel lost (%s); reconnecting", error)
                await self._disconnect()
                await asyncio.sleep(_RECONNECT_DELAY_S)

    async def _connect(self) -> None:
        connection = await asyncpg.connect(self._dsn)
        await connection.add_listener(CHANNEL, self._on_notification)
        self._connection = connection

    async def _publish_forever(self) -> None:
        assert self._connection is not None
        while True:
            await self._wanted.wait()
            self._wanted.clear()
            batch, self._pending = self._pending, Counter()
            payload = ",".join(f"{queue_id}:{messages}" for queue_id, messages in sorted(batch.items()))
            await self._connection.execute("SELECT pg_notify($1, $2)", CHANNEL, payload)

    def _on_notification(self, connection: object, pid: int, _channel: str, payload: str) -> None:
        own = self._connection
        if own is not None and pid == own.get_server_pid():
            return  # our own NOTIFY: already signalled in-process
        for queue_id, messages in parse_payload(payload):
            self._local.signal_from_elsewhere(queue_id, messages)

    async def _disconnect(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(Exception):
                await connection.close(timeout=2)


def parse_payload(payload: str) -> list[tuple[int, int | None]]:
    """`7:3,8:0,9` -> [(7, 3), (8, 0), (9, None)]: each queue with the number of receives to
    wake there (None: a change of unknown size, every one). Malformed parts are ignored: the
    payload is only a hint."""
    changes: list[tuple[int, int | None]] = []
    for part in payload.split(","):
        queue, _, messages = part.partition(":")
        if not queue.isdigit():
            continue
        if not messages:
            changes.append((int(queue), None))
        elif messages.isdigit():
            changes.append((int(queue), min(int(messages), _MAX_COUNTED)))
    return changes
