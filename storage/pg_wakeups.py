"""Wake-ups across processes on PostgreSQL: LISTEN/NOTIFY on one dedicated connection.

Every gateway process listens on one channel. A change is signalled in-process at once
and published with NOTIFY right after the commit that made it, as `queue_id:messages` pairs;
the other processes wake as many waiting receives of each queue (and every other watcher)
when the notification arrives. A pair without a count wakes every waiter of the queue.
Messages that woke a receive waiting in this process are not counted again in the pair
(`7:0` still wakes the peeks and cursors elsewhere): one message wakes one receive across
all processes, not one in each. A wake-up handed on here with no taker left to take it is
published as well.

Changes are published only while another gateway process listens. A NOTIFY is a transaction
of its own, with a transaction ID and so a flushed commit record: one per message when
nobody else was listening cost about a tenth of a lone process's CPU. Processes make
themselves known on the channel: `hello:<pid>` when a process begins to listen (its
listening connection's server PID), `here:<pid>` in answer, `bye:<pid>` when it stops. A
process that learns of another while changes it made went unpublished (it knew of no other)
publishes `*`, which wakes every watcher of every queue in the other processes, so that what
it committed before it knew is looked at again. A peer that vanished without `bye` is dropped
once its PID no longer names a server session (checked at most every PEERS_CHECKED_EVERY_S
while publishing).
Every process on a database must therefore run a release that speaks this: an older one
would not be told of the others' messages except by its safety poll.

Correctness never depends on it: receives claim rows with SKIP LOCKED, so a lost
notification costs latency, not messages, and a slow safety poll covers the time the
listening connection is down.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Iterable

import asyncpg
import sqlalchemy as sa

from qm.wakeups import Watch
from storage.wakeups import LocalWakeUps

CHANNEL = "msmq_gateway_wakeup"
HELLO, HERE, BYE = "hello", "here", "bye"
EVERY_QUEUE = "*"
PEERS_CHECKED_EVERY_S = 30.0
_RECONNECT_DELAY_S = 1.0
_NOTIFY = "SELECT pg_notify($1, $2)"
_LIVE_SESSIONS = "SELECT pid FROM pg_stat_activity WHERE pid = ANY($1::int[])"
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
        self._control: list[str] = []
        """Presence parts and `*`, published whether or not peers are known."""
        self._peers: set[int] = set()
        """Server PIDs of the other processes' listening connections."""
        self._peers_checked = 0.0
        self._dropped = False
        """Changes went unpublished (no peer known): a peer learned of now must look again."""
        self._wanted = asyncio.Event()
        self._connection: asyncpg.Connection | None = None
        self._task: asyncio.Task[None] | None = None
        self._connected_before = False

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
        if self._connection is not None:
            with contextlib.suppress(Exception):
                await self._connection.execute(_NOTIFY, CHANNEL, f"{BYE}:{self._connection.get_server_pid()}")
        await self._disconnect()

    @property
    def peers(self) -> frozenset[int]:
        """The other listening processes known here (their connections' server PIDs)."""
        return frozenset(self._peers)

    def watch(self, queue_id: int, takes: bool = False) -> Watch:
        return self._local.watch(queue_id, takes)

    def signal(self, queue_ids: Iterable[int]) -> None:
        self._local.signal(queue_ids)

    def pass_on(self, queue_id: int) -> None:
        self._local.pass_on(queue_id)

    def _announce(self, queue_id: int, messages: int) -> None:
        """For the other processes: `messages` that no receive waiting here was woken for.
        Nothing while none is known (learning of one publishes `*`)."""
        if self._peers:
            self._pending[queue_id] += messages
            self._wanted.set()
        else:
            self._dropped = True

    def _publish(self, part: str) -> None:
        self._control.append(part)
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
        """Listen, then say hello: the answers come after this process began to listen."""
        connection = await asyncpg.connect(self._dsn)
        await connection.add_listener(CHANNEL, self._on_notification)
        self._connection = connection
        await connection.execute(_NOTIFY, CHANNEL, f"{HELLO}:{connection.get_server_pid()}")
        if self._connected_before:
            self._local.wake_every_watcher()  # what was announced while the channel was down
        self._connected_before = True

    async def _publish_forever(self) -> None:
        assert self._connection is not None
        while True:
            await self._wanted.wait()
            self._wanted.clear()
            parts, self._control = self._control, []
            batch, self._pending = self._pending, Counter()
            if self._peers:
                parts += [f"{queue_id}:{messages}" for queue_id, messages in sorted(batch.items())]
                await self._forget_vanished_peers()
            if parts:
                await self._connection.execute(_NOTIFY, CHANNEL, ",".join(parts))

    async def _forget_vanished_peers(self) -> None:
        """Drop peers whose PID names no server session now (they ended without `bye`)."""
        now = time.monotonic()
        if now - self._peers_checked < PEERS_CHECKED_EVERY_S or self._connection is None:
            return
        self._peers_checked = now
        checked = set(self._peers)
        live = {row["pid"] for row in await self._connection.fetch(_LIVE_SESSIONS, sorted(checked))}
        self._peers.difference_update(checked - live)  # not those learned of meanwhile

    def _on_notification(self, connection: object, pid: int, _channel: str, payload: str) -> None:
        own = self._connection
        if own is not None and pid == own.get_server_pid():
            return  # our own NOTIFY: already signalled in-process
        if payload.startswith(f"{BYE}:"):
            self._peers.discard(pid)
            return
        self._learn(pid)
        for part in payload.split(","):
            if part.startswith(f"{HELLO}:") and own is not None:
                self._publish(f"{HERE}:{own.get_server_pid()}")
            elif part == EVERY_QUEUE:
                self._local.wake_every_watcher()
        for queue_id, messages in parse_payload(payload):
            self._local.signal_from_elsewhere(queue_id, messages)

    def _learn(self, pid: int) -> None:
        """A notification from a process not known here: from now on changes are published,
        and if some went unpublished, `*` makes the others look again."""
        if pid not in self._peers:
            self._peers.add(pid)
            if self._dropped:
                self._dropped = False
                self._publish(EVERY_QUEUE)

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
