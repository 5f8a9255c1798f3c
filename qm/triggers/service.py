"""The trigger service: one supervised walker per enabled trigger that this process leases.

Each walker walks its queue with a cursor as MSMQ's service does (reference §9.5): from the
head, every message already there, then waiting at the end; a higher-priority arrival is
processed next wherever it lands, and with peeking the messages after it are processed
again (the double activation), unless `peek_once` is set.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from datetime import timedelta

from qm.cursors import CursorService
from qm.manager import QueueManager
from qm.reading import QueueReader
from qm.triggers.actions import ActionRunner
from qm.triggers.model import Rule, Trigger, TriggerConfig
from qm.triggers.port import TriggerStore
from qm.triggers.walker import TriggerWalker

log = logging.getLogger(__name__)


Definition = tuple[Trigger, tuple[Rule, ...]]


class TriggerService:
    """Starts, stops and restarts walkers as triggers change; call `refresh` periodically."""

    def __init__(
        self,
        manager: QueueManager,
        store: TriggerStore,
        runner: ActionRunner,
        config: TriggerConfig,
        holder: str | None = None,
    ) -> None:
        self.manager = manager
        self.store = store
        self.runner = runner
        self.config = config
        self.reader = QueueReader(manager)
        self.cursors = CursorService(manager)
        self.holder = holder or secrets.token_hex(8)
        self._walkers: dict[str, tuple[Definition, asyncio.Task[None]]] = {}

    async def refresh(self) -> None:
        """One pass: follow definition changes, renew leases, restart crashed walkers."""
        wanted = await self._definitions()
        for trigger_id, (definition, task) in list(self._walkers.items()):
            if wanted.get(trigger_id) != definition or task.done():
                await self._stop(trigger_id)
        now = self.manager.clock.now()
        until = now + timedelta(seconds=self.config.lease_s)
        for trigger_id, definition in wanted.items():
            if not await self.store.acquire_trigger_lease(trigger_id, self.holder, now, until):
                await self._stop(trigger_id)
            elif trigger_id not in self._walkers:
                self._start(definition)

    async def close(self) -> None:
        for trigger_id in list(self._walkers):
            await self._stop(trigger_id)
            with contextlib.suppress(Exception):
                await self.store.release_trigger_lease(trigger_id, self.holder)

    @property
    def running(self) -> frozenset[str]:
        return frozenset(trigger_id for trigger_id, (_d, task) in self._walkers.items() if not task.done())

    async def _definitions(self) -> dict[str, Definition]:
        rules = {rule.id: rule for rule in await self.store.list_rules()}
        return {
            trigger.id: (trigger, tuple(rules[rule_id] for rule_id in trigger.rule_ids if rule_id in rules))
            for trigger in await self.store.list_triggers()
            if trigger.enabled and trigger.rule_ids
        }

    def _start(self, definition: Definition) -> None:
        trigger, rules = definition
        task = asyncio.create_task(TriggerWalker(self, trigger, rules).run(), name=f"trigger {trigger.name}")
        self._walkers[trigger.id] = (definition, task)

    async def _stop(self, trigger_id: str) -> None:
        if trigger_id not in self._walkers:
            return
        (trigger, _rules), task = self._walkers.pop(trigger_id)
        if task.done() and not task.cancelled() and task.exception() is not None:
            log.error("trigger %s stopped: %r; restarting it", trigger.name, task.exception())
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
