"""JSON shapes of /api/triggers and /api/rules."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from app.parameters import Strict
from qm.triggers.conditions import make_condition, parse_token
from qm.triggers.model import Action, ActionKind, Condition, Invocation, ProcessingType, Rule, Trigger

ProcessingName = Literal["peek", "retrieval", "transactional-retrieval"]


class ConditionIn(Strict):
    property: str = Field(description="label, body, priority, app_specific, source_machine, message_class")
    operator: str = Field(
        description="contains, does_not_contain (label, body); equals, not_equal, greater_than, "
        "less_than (numbers); equals, not_equal (source_machine)"
    )
    value: str | int = Field(description="Text to look for, or the number to compare with")

    def condition(self) -> Condition:
        return make_condition(self.property, self.operator, str(self.value))


class ConditionOut(BaseModel):
    property: str = Field(description="The message property tested")
    operator: str = Field(description="How it is compared")
    value: str = Field(description="What it is compared with, as text")


class ActionIn(Strict):
    kind: Literal["webhook", "command"] = Field(
        "webhook", description="`webhook` (an HTTP request) or `command` (a program, if enabled)"
    )
    url: str = Field("", description="Webhook: http(s) URL within MSMQGW_TRIGGER_ALLOWED_URLS")
    method: str = Field("POST", description="Webhook: the HTTP method")
    headers: dict[str, str] = Field(
        default_factory=dict, description="Webhook: request headers; values may hold $MSG_* parameters"
    )
    body_template: str | None = Field(
        None, description="With $MSG_* parameters; omitted: a JSON document of every parameter"
    )
    command: list[str] = Field(
        default_factory=list, description="Command: executable, then one argument per item"
    )
    substitute_arguments: list[int] = Field(
        default_factory=list,
        description="Command: positions (1 = first argument) of the arguments whose $MSG_* parameters "
        "are replaced; every other argument is passed as written (see docs/triggers.md for the risk)",
    )

    def action(self) -> Action:
        return Action(
            kind=ActionKind(self.kind),
            url=self.url,
            method=self.method.upper(),
            headers=tuple(self.headers.items()),
            body_template=self.body_template,
            command=tuple(self.command),
            substitute_arguments=tuple(self.substitute_arguments),
        )


class ActionOut(BaseModel):
    kind: str = Field(description="`webhook` or `command`")
    url: str = Field(description="Webhook: the URL; empty for a command")
    method: str = Field(description="Webhook: the HTTP method")
    headers: dict[str, str] = Field(description="Webhook: request headers")
    body_template: str | None = Field(description="Webhook: the body with $MSG_* parameters; null: JSON")
    command: list[str] = Field(description="Command: executable, then its arguments; empty for a webhook")
    substitute_arguments: list[int] = Field(
        description="Command: positions of the arguments whose $MSG_* parameters are replaced"
    )


class RuleIn(Strict):
    name: str = Field(description="Unique among rules")
    description: str = Field("", description="Free text")
    conditions: list[ConditionIn | str] = Field(
        default_factory=list,
        description="All must hold (none: always fires); objects, or trigadm tokens such as "
        "`$MSG_LABEL_CONTAINS=marketing`",
    )
    action: ActionIn = Field(description="What happens when every condition holds")

    def parsed_conditions(self) -> list[Condition]:
        return [parse_token(item) if isinstance(item, str) else item.condition() for item in self.conditions]


class RuleOut(BaseModel):
    id: str = Field(description="The rule's GUID")
    name: str = Field(description="Unique among rules")
    description: str = Field(description="Free text")
    conditions: list[ConditionOut] = Field(description="All must hold; none: the rule always fires")
    action: ActionOut = Field(description="What happens when the rule fires")

    @classmethod
    def of(cls, rule: Rule) -> RuleOut:
        action = rule.action
        return cls(
            id=rule.id,
            name=rule.name,
            description=rule.description,
            conditions=[
                ConditionOut(property=item.property.value, operator=item.operator.value, value=item.value)
                for item in rule.conditions
            ],
            action=ActionOut(
                kind=action.kind.value,
                url=action.url,
                method=action.method,
                headers=dict(action.headers),
                body_template=action.body_template,
                command=list(action.command),
                substitute_arguments=list(action.substitute_arguments),
            ),
        )


class TriggerIn(Strict):
    name: str = Field(description="Unique among triggers")
    queue: str = Field(description="The monitored queue: `private$/name`, a journal or dead-letter queue")
    enabled: bool = Field(True, description="A disabled trigger evaluates nothing")
    serialized: bool = Field(False, description="One message at a time in queue order")
    processing: ProcessingName = Field(
        "peek",
        description="`peek` (messages stay), `retrieval` (each is received after its rules ran) or "
        "`transactional-retrieval` (received in a transaction; a transactional queue only)",
    )
    rules: list[str] = Field(default_factory=list, description="Rule IDs or names, in evaluation order")

    def processing_type(self) -> ProcessingType:
        return ProcessingType(self.processing)


class RulesIn(Strict):
    rules: list[str] = Field(description="Rule IDs or names, in evaluation order")


class AttachedRule(BaseModel):
    id: str = Field(description="The rule's GUID")
    name: str = Field(description="The rule's name")


class TriggerOut(BaseModel):
    id: str = Field(description="The trigger's GUID")
    name: str = Field(description="Unique among triggers")
    queue: str = Field(description="The monitored queue")
    enabled: bool = Field(description="A disabled trigger evaluates nothing")
    serialized: bool = Field(description="One message at a time in queue order")
    processing: str = Field(description="`peek`, `retrieval` or `transactional-retrieval`")
    rules: list[AttachedRule] = Field(description="Attached rules in evaluation order")

    @classmethod
    def of(cls, trigger: Trigger, names: dict[str, str]) -> TriggerOut:
        return cls(
            id=trigger.id,
            name=trigger.name,
            queue=trigger.queue,
            enabled=trigger.enabled,
            serialized=trigger.serialized,
            processing=trigger.processing.value,
            rules=[AttachedRule(id=rule_id, name=names.get(rule_id, "")) for rule_id in trigger.rule_ids],
        )


class InvocationOut(BaseModel):
    id: int = Field(description="Position in the log; pass as `after` to read on")
    at: datetime = Field(description="UTC")
    rule_id: str = Field(description="The rule whose action ran")
    rule_name: str = Field(description="Its name then")
    lookup_id: str = Field(description="Lookup ID of the message, as a decimal string")
    message_id: str = Field(description="`{GUID}\\sequence` of the message")
    outcome: str = Field(description="success, failure, or dead-lettered")
    duration_ms: float = Field(description="How long the action took, all attempts together")
    attempts: int = Field(description="How many times the action was tried")
    error: str | None = Field(description="Why the last attempt failed; null on success")

    @classmethod
    def of(cls, entry: Invocation) -> InvocationOut:
        return cls(
            id=entry.id,
            at=entry.at,
            rule_id=entry.rule_id,
            rule_name=entry.rule_name,
            lookup_id=str(entry.lookup_id),
            message_id=entry.message_id,
            outcome=entry.outcome.value,
            duration_ms=entry.duration_ms,
            attempts=entry.attempts,
            error=entry.error,
        )


class InvocationPage(BaseModel):
    invocations: list[InvocationOut] = Field(description="Log entries after `after`, oldest first")
    next_after: int = Field(description="Pass as `after` to read the entries that follow")
