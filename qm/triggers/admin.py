"""Managing triggers and rules: every check a definition must pass before it is stored."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Sequence

from qm.errors import MqError, MqErrorCode
from qm.manager import QueueManager
from qm.model import Queue
from qm.triggers.actions import AllowList, check_action
from qm.triggers.conditions import invalid
from qm.triggers.model import Action, Condition, Invocation, ProcessingType, Rule, Trigger
from qm.triggers.port import TriggerStore

MAX_NAME = 124


def conflict(detail: str) -> MqError:
    """A definition that contradicts another (answered 409)."""
    return MqError(MqErrorCode.MQ_ERROR_ILLEGAL_OPERATION, detail)


def not_found(what: str, key: str) -> MqError:
    return MqError(MqErrorCode.MQ_ERROR_INVALID_HANDLE, f"no {what} {key!r}")


@dataclasses.dataclass(frozen=True, slots=True)
class TriggerSpec:
    """A trigger as a caller defines it (rules by ID or name)."""

    name: str
    queue: str
    enabled: bool = True
    serialized: bool = False
    processing: ProcessingType = ProcessingType.PEEK
    rules: tuple[str, ...] = ()


class TriggerAdmin:
    def __init__(self, manager: QueueManager, store: TriggerStore, allow_list: AllowList) -> None:
        self._qm = manager
        self._store = store
        self.allow_list = allow_list

    # -- rules ------------------------------------------------------------------------

    async def create_rule(
        self, name: str, description: str, conditions: Sequence[Condition], action: Action
    ) -> Rule:
        rule = self._checked_rule(Rule(str(uuid.uuid4()), name, description, tuple(conditions), action))
        await self._unique_rule_name(rule)
        await self._store.save_rule(rule, self._qm.clock.now(), create=True)
        return rule

    async def replace_rule(
        self, key: str, name: str, description: str, conditions: Sequence[Condition], action: Action
    ) -> Rule:
        current = await self.rule(key)
        rule = self._checked_rule(Rule(current.id, name, description, tuple(conditions), action))
        await self._unique_rule_name(rule)
        await self._store.save_rule(rule, self._qm.clock.now(), create=False)
        return rule

    async def rule(self, key: str) -> Rule:
        rule = await self._store.get_rule(key)
        if rule is None:
            raise not_found("rule", key)
        return rule

    async def rules(self) -> list[Rule]:
        return await self._store.list_rules()

    async def delete_rule(self, key: str) -> None:
        rule = await self.rule(key)
        await self._store.delete_rule(rule.id)

    def _checked_rule(self, rule: Rule) -> Rule:
        _check_name("rule", rule.name)
        check_action(rule.action)
        self.allow_list.check(rule.action)
        return rule

    async def _unique_rule_name(self, rule: Rule) -> None:
        other = await self._store.get_rule(rule.name)
        if other is not None and other.id != rule.id:
            raise conflict(f"a rule named {rule.name!r} exists")

    # -- triggers ---------------------------------------------------------------------

    async def create_trigger(self, spec: TriggerSpec) -> Trigger:
        trigger = await self._checked_trigger(str(uuid.uuid4()), spec)
        await self._store.save_trigger(trigger, self._qm.clock.now(), create=True)
        return trigger

    async def replace_trigger(self, key: str, spec: TriggerSpec) -> Trigger:
        current = await self.trigger(key)
        trigger = await self._checked_trigger(current.id, spec)
        await self._store.save_trigger(trigger, self._qm.clock.now(), create=False)
        return trigger

    async def trigger(self, key: str) -> Trigger:
        trigger = await self._store.get_trigger(key)
        if trigger is None:
            raise not_found("trigger", key)
        return trigger

    async def triggers(self) -> list[Trigger]:
        return await self._store.list_triggers()

    async def delete_trigger(self, key: str) -> None:
        trigger = await self.trigger(key)
        await self._store.delete_trigger(trigger.id)

    async def attach(self, key: str, rule_key: str, position: int | None = None) -> Trigger:
        trigger = await self.trigger(key)
        rule = await self.rule(rule_key)
        ids = [rule_id for rule_id in trigger.rule_ids if rule_id != rule.id]
        ids.insert(len(ids) if position is None else max(0, position), rule.id)
        return await self._save_rules(trigger, ids)

    async def detach(self, key: str, rule_key: str) -> Trigger:
        trigger = await self.trigger(key)
        rule = await self.rule(rule_key)
        if rule.id not in trigger.rule_ids:
            raise not_found(f"rule attached to trigger {trigger.name!r}:", rule_key)
        return await self._save_rules(
            trigger, [rule_id for rule_id in trigger.rule_ids if rule_id != rule.id]
        )

    async def invocations(self, key: str, after: int, limit: int) -> list[Invocation]:
        trigger = await self.trigger(key)
        return await self._store.list_invocations(trigger.id, after, limit)

    async def _save_rules(self, trigger: Trigger, rule_ids: list[str]) -> Trigger:
        changed = dataclasses.replace(trigger, rule_ids=tuple(rule_ids))
        await self._store.save_trigger(changed, self._qm.clock.now(), create=False)
        return changed

    async def _checked_trigger(self, trigger_id: str, spec: TriggerSpec) -> Trigger:
        _check_name("trigger", spec.name)
        queue = await self._qm.get_queue(spec.queue)
        rule_ids = await self._rule_ids(spec.rules)
        trigger = Trigger(
            trigger_id,
            spec.name,
            queue.path.url_path,
            queue.id,
            spec.enabled,
            spec.serialized,
            spec.processing,
            rule_ids,
        )
        await self._check_neighbours(trigger, queue)
        return trigger

    async def _rule_ids(self, keys: Sequence[str]) -> tuple[str, ...]:
        ids: list[str] = []
        for key in keys:
            rule = await self._store.get_rule(key)
            if rule is None:
                raise invalid(f"no rule {key!r} to attach")
            if rule.id in ids:
                raise invalid(f"rule {key!r} is attached twice")
            ids.append(rule.id)
        return tuple(ids)

    async def _check_neighbours(self, trigger: Trigger, queue: Queue) -> None:
        """Reference §9.4-§9.5: a retrieving trigger is its queue's only trigger, a
        transactional one needs a transactional queue, and a queue's triggers agree on
        serialization. Names are unique."""
        if trigger.processing is ProcessingType.TRANSACTIONAL_RETRIEVAL and not queue.settings.transactional:
            raise MqError(
                MqErrorCode.MQ_ERROR_TRANSACTION_USAGE,
                f"transactional retrieval needs a transactional queue; {queue.path.url_path} is not",
            )
        others = [other for other in await self._store.list_triggers() if other.id != trigger.id]
        if any(other.name == trigger.name for other in others):
            raise conflict(f"a trigger named {trigger.name!r} exists")
        neighbours = [other for other in others if other.queue_id == queue.id]
        if neighbours and (trigger.processing.retrieves or any(n.processing.retrieves for n in neighbours)):
            raise conflict(
                f"{queue.path.url_path} already has trigger {neighbours[0].name!r}; a retrieving "
                "trigger must be the only trigger on its queue"
            )
        if any(other.serialized != trigger.serialized for other in neighbours):
            raise conflict(f"the triggers on {queue.path.url_path} must all be serialized or all not")


def _check_name(what: str, name: str) -> None:
    if not name.strip() or len(name) > MAX_NAME or any(ord(char) < 32 for char in name):
        raise invalid(f"a {what} name has 1 to {MAX_NAME} printable characters")
