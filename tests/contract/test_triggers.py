"""The trigger service on each store, with a real webhook server on loopback: the seed's
two sequences, each processing type, failures, the cursor rule, the attempt limit and
dead letter, serialized order, restart, and leases between processes."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import pytest

from app.trigger_actions import HttpAndCommandRunner
from qm.clock import SettableClock
from qm.manager import QueueManager
from qm.model import MessageProperties, QueueSettings
from qm.paths import SystemQueue, system_queue_path
from qm.reading import QueueReader
from qm.triggers.actions import AllowList
from qm.triggers.admin import TriggerAdmin, TriggerSpec
from qm.triggers.conditions import make_condition
from qm.triggers.model import Action, ActionKind, Condition, Outcome, ProcessingType, Trigger, TriggerConfig
from qm.triggers.service import TriggerService
from tests.contract.support import WatchedWakeUps, new_queue
from tests.webhook_server import Hit, WebhookServer

pytestmark = pytest.mark.anyio
QUEUE = "private$/MyQueue"
WAIT_MS = 60_000


@dataclass
class Rig:
    manager: QueueManager
    server: WebhookServer
    admin: TriggerAdmin
    runner: HttpAndCommandRunner
    config: TriggerConfig
    services: list[TriggerService] = field(default_factory=list)

    def service(self, holder: str = "one") -> TriggerService:
        started = TriggerService(self.manager, self.manager.store.triggers, self.runner, self.config, holder)
        self.services.append(started)
        return started

    async def trigger(
        self,
        processing: ProcessingType = ProcessingType.PEEK,
        serialized: bool = True,
        conditions: Sequence[Condition] = (),
        path: str = QUEUE,
    ) -> Trigger:
        action = Action(ActionKind.WEBHOOK, url=f"{self.server.url}/hook")
        rule = await self.admin.create_rule("MyRule1", "", conditions, action)
        spec = TriggerSpec("PrivateTrigger", path, True, serialized, processing, (rule.id,))
        return await self.admin.create_trigger(spec)


@asynccontextmanager
async def rig(
    manager: QueueManager,
    status_for: Callable[[Hit], int] | None = None,
    hangs: Callable[[Hit], bool] | None = None,
    **config: object,
) -> AsyncIterator[Rig]:
    settings = TriggerConfig(**{"action_retries": 0, "retry_backoff_s": 0.01, "wait_ms": WAIT_MS, **config})  # type: ignore[arg-type]
    async with WebhookServer(status_for, hangs) as server:
        allow = AllowList(url_prefixes=(server.url,))
        runner = HttpAndCommandRunner(allow)
        built = Rig(manager, server, TriggerAdmin(manager, manager.store.triggers, allow), runner, settings)
        try:
            yield built
        finally:
            for service in built.services:
                await service.close()
            await runner.close()


def bodies(hits: Sequence[Hit]) -> list[str]:
    return [hit.json()["msg_body_as_string"] for hit in hits]


async def send(manager: QueueManager, texts: Sequence[str], priority: int = 3, path: str = QUEUE) -> None:
    transaction = "single" if (await manager.get_queue(path)).settings.transactional else None
    for text in texts:
        await manager.send(path, MessageProperties(body=text.encode(), priority=priority), transaction)


async def remaining(reader: QueueReader, path: str = QUEUE) -> list[str]:
    return [message.properties.body.decode() for message in await reader.browse(path, 0, 100)]


async def test_same_priority_fires_once_per_message_in_order(
    manager: QueueManager, watched: WatchedWakeUps, reader: QueueReader
) -> None:
    await new_queue(manager, QUEUE)
    async with rig(manager) as r:
        await send(manager, ["1", "2"])
        await r.trigger()
        await r.service().refresh()
        await r.server.until(2)
        await watched.until_waiting()
        await send(manager, ["3", "4"])
        await r.server.until(4)
        await watched.until_waiting()  # at the end of the queue again, nothing more fired
        assert bodies(r.server.hits) == ["1", "2", "3", "4"]
        assert await remaining(reader) == ["1", "2", "3", "4"]  # peeking leaves them


@pytest.mark.parametrize(("peek_once", "expected"), [(False, "1234534"), (True, "12345")])
async def test_mixed_priority_double_activation(
    manager: QueueManager, watched: WatchedWakeUps, peek_once: bool, expected: str
) -> None:
    """Seed sequence 2: message 5 (higher priority) lands between 2 and 3; the service
    processes 5 next, then 3 and 4 again — unless peek_once is set."""
    await new_queue(manager, QUEUE)
    async with rig(manager, peek_once=peek_once) as r:
        await send(manager, ["1", "2"], priority=1)
        await send(manager, ["3", "4"], priority=0)
        await r.trigger()
        await r.service().refresh()
        await r.server.until(4)
        await watched.until_waiting()
        await send(manager, ["5"], priority=1)
        await r.server.until(len(expected))
        await watched.until_waiting()
        assert "".join(bodies(r.server.hits)) == expected


async def test_retrieval_receives_only_when_the_rules_fired_and_the_action_succeeded(
    manager: QueueManager, watched: WatchedWakeUps, reader: QueueReader
) -> None:
    await new_queue(manager, QUEUE)

    def status_for(hit: Hit) -> int:
        return 500 if hit.json()["msg_body_as_string"] == "bad" else 204

    async with rig(manager, status_for, action_retries=1) as r:
        await send(manager, ["good", "bad", "skip", "good2"])
        skip = make_condition("body", "does_not_contain", "skip")
        trigger = await r.trigger(ProcessingType.RETRIEVAL, conditions=[skip])
        await r.service().refresh()
        await r.server.until(4)  # bad is tried twice (one retry)
        await watched.until_waiting()
        assert bodies(r.server.hits) == ["good", "bad", "bad", "good2"]
        assert await remaining(reader) == ["bad", "skip"]
        log = await manager.store.triggers.list_invocations(trigger.id, 0, 10)
        assert [(entry.outcome, entry.attempts) for entry in log] == [
            (Outcome.SUCCESS, 1),
            (Outcome.FAILURE, 2),
            (Outcome.SUCCESS, 1),
        ]
        assert log[1].error == f"HTTP 500 from {r.server.url}/hook"
        assert log[1].rule_name == "MyRule1"


async def test_transactional_retrieval_failure_returns_the_message_behind_the_cursor(
    manager: QueueManager, watched: WatchedWakeUps, reader: QueueReader
) -> None:
    """Serialized: the aborted message is back in its place, and the cursor does not return to it."""
    await new_queue(manager, QUEUE, QueueSettings(transactional=True))

    def status_for(hit: Hit) -> int:
        return 500 if hit.json()["msg_body_as_string"] == "bad" else 200

    async with rig(manager, status_for, attempt_limit=0) as r:
        await send(manager, ["bad", "ok"])
        await r.trigger(ProcessingType.TRANSACTIONAL_RETRIEVAL)
        await r.service().refresh()
        await r.server.until(2)
        await watched.until_waiting()
        await send(manager, ["ok2"])
        await r.server.until(3)
        await watched.until_waiting()
        assert bodies(r.server.hits) == ["bad", "ok", "ok2"]
        [back] = await reader.browse(QUEUE, 0, 10)
        assert (back.properties.body, back.abort_count) == (b"bad", 1)


async def test_transactional_retrieval_loop_ends_at_the_attempt_limit_in_the_dead_letter_queue(
    manager: QueueManager, reader: QueueReader
) -> None:
    """Non-serialized: the returned message meets the waiting cursor again (the seed's loop)
    until the attempt limit moves it to the transactional dead-letter queue, class 0xC004."""
    await new_queue(manager, QUEUE, QueueSettings(transactional=True))
    async with rig(manager, lambda _hit: 503, attempt_limit=3) as r:
        await send(manager, ["bad"])
        trigger = await r.trigger(ProcessingType.TRANSACTIONAL_RETRIEVAL, serialized=False)
        await r.service().refresh()
        dead = await reader.peek(system_queue_path(SystemQueue.DEADXACT).url_path, WAIT_MS)
        assert dead is not None
        assert dead.properties.body == b"bad"
        assert dead.properties.message_class == 0xC004  # MessageClass.NACK_RECEIVE_REJECTED
        assert dead.destination_queue == "private$\\MyQueue"
        assert await remaining(reader) == []
        log = await manager.store.triggers.list_invocations(trigger.id, 0, 10)
        assert [entry.outcome for entry in log] == [Outcome.FAILURE] * 3 + [Outcome.DEAD_LETTERED]
        assert len(r.server.hits) == 3


async def test_stopping_a_walker_that_loops_on_aborts_ends_its_cursor_wait(
    manager: QueueManager, watched: WatchedWakeUps
) -> None:
    """A non-serialized transactional walker waits both on its cursor and for messages an
    abort put back. Stopped, it must end both waits: a cursor wait left running goes on
    reading a cursor its walker closed (MQ_ERROR_INVALID_HANDLE), and the store after it."""
    await new_queue(manager, QUEUE, QueueSettings(transactional=True))
    async with rig(manager) as r:
        await r.trigger(ProcessingType.TRANSACTIONAL_RETRIEVAL, serialized=False)
        service = r.service()
        await service.refresh()
        await watched.until_waiting()
        await service.close()
        assert watched.waiting == 0


async def test_restart_processes_the_remaining_messages_again(
    manager: QueueManager, watched: WatchedWakeUps
) -> None:
    await new_queue(manager, QUEUE)
    async with rig(manager) as r:
        await send(manager, ["1", "2"])
        await r.trigger()
        first = r.service()
        await first.refresh()
        await r.server.until(2)
        await watched.until_waiting()  # stop it at rest, as a process would (see below)
        await first.close()
        await r.service().refresh()
        await r.server.until(4)
        await watched.until_waiting()
        assert bodies(r.server.hits) == ["1", "2", "1", "2"]


async def test_one_process_runs_a_trigger_until_it_lets_go(
    manager: QueueManager, watched: WatchedWakeUps
) -> None:
    """Several gateway processes share a database: the lease decides which one walks."""
    await new_queue(manager, QUEUE)
    async with rig(manager) as r:
        trigger = await r.trigger()
        one, two = r.service("one"), r.service("two")
        await one.refresh()
        await two.refresh()
        assert (one.running, two.running) == (frozenset({trigger.id}), frozenset[str]())
        await watched.until_waiting()
        await one.close()
        await two.refresh()
        assert two.running == {trigger.id}


async def test_serialized_trigger_acts_in_queue_order_non_serialized_concurrently(
    manager: QueueManager,
) -> None:
    """A non-serialized trigger has several actions in flight at once (up to the limit);
    a serialized one never more than one."""
    await new_queue(manager, QUEUE)
    async with rig(manager, concurrency=3) as r:
        r.server.hold.clear()
        await send(manager, ["1", "2", "3", "4"])
        await r.trigger(serialized=False)
        await r.service().refresh()
        hits = await r.server.until(3)  # three requests in flight, none answered yet
        assert sorted(bodies(hits)) == ["1", "2", "3"]
        r.server.hold.set()
        await r.server.until(4)


def hangs_on(text: str) -> Callable[[Hit], bool]:
    return lambda hit: bool(hit.json()["msg_body_as_string"] == text)


async def test_a_hanging_webhook_times_out_and_never_blocks_sends(
    manager: QueueManager, watched: WatchedWakeUps
) -> None:
    await new_queue(manager, QUEUE)
    # The limit is long enough that the hang's request reaches the server on a loaded machine
    # (the HTTP client is made before the timed attempt: ActionRunner.prepare).
    async with rig(manager, hangs=hangs_on("hang"), action_timeout_s=2.0) as r:
        trigger = await r.trigger()
        await send(manager, ["hang"])
        await r.service().refresh()
        await r.server.until(1)
        await send(manager, ["ok"])  # while the action hangs
        await r.server.until(2)  # serialized: the hang's entry is logged before "ok" is acted on
        [entry, *_rest] = await manager.store.triggers.list_invocations(trigger.id, 0, 10)
        assert (entry.outcome, entry.error) == (Outcome.FAILURE, "no answer within 2.0 s")
        await watched.until_waiting()


async def test_a_crash_during_a_retrieval_action_leaves_the_message_to_come_back(
    manager: QueueManager, reader: QueueReader, clock: SettableClock
) -> None:
    """The trigger holds a two-phase lock while acting; the process dies (its walker is
    cancelled mid-action): the lock expires and the message is available again."""
    await new_queue(manager, QUEUE)
    async with rig(manager, hangs=hangs_on("m")) as r:
        await r.trigger(ProcessingType.RETRIEVAL)
        await send(manager, ["m"])
        service = r.service()
        await service.refresh()
        await r.server.until(1)
        await service.close()
        assert await remaining(reader) == []  # locked, not lost
        clock.advance(r.config.action_budget_s(1) + 10)
        await manager.release_expired()
        assert await remaining(reader) == ["m"]
