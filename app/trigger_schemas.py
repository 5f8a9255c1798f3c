"""JSON shapes of /api/triggers and /api/rules."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from qm.triggers.conditions import make_condition, parse_token
from qm.triggers.model import Action, ActionKind, Condition, Invocation, ProcessingType, Rule, Trigger

ProcessingName = Literal["peek", "retrieval", "transactional-retrieval"]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ConditionIn(Strict):
    property: str = Field(description="label, body, priority, app_specific, source_machine, message_class")
    operator: str = Field(
        description="contains, does_not_contain (label, body); equals, not_equal, greater_than, "
        "less_than (numbers); equals, not_equal (source_machine)"
    )
    value: str | int

    def condition(self) -> Condition:
        return make_condition(self.property, self.operator, str(self.value))


class ConditionOut(BaseModel):
    property: str
    operator: str
    value: str


class ActionIn(Strict):
    kind: Literal["webhook", "command"] = "webhook"
    url: str = Field("", description="Webhook: http(s) URL within MSMQGW_TRIGGER_ALLOWED_URLS")
    method: str = "POST"
    headers: dict[str, str] = Field(default_factory=dict)
    body_template: str | None = Field(
        None, description="With $MSG_* parameters; omitted: a JSON document of every parameter"
    )
    command: list[str] = Field(
        default_factory=list, description="Command: executable, then one argument per item"
    )

    def action(self) -> Action:
        return Action(
            kind=ActionKind(self.kind),
            url=self.url,
            method=self.method.upper(),
            headers=tuple(self.headers.items()),
            body_template=self.body_template,
            command=tuple(self.command),
        )


class ActionOut(BaseModel):
    kind: str
    url: str
    method: str
    headers: dict[str, str]
    body_template: str | None
    command: list[str]


class RuleIn(Strict):
    name: str
    description: str = ""
    conditions: list[ConditionIn | str] = Field(
        default_factory=list,
        description="All must hold (none: always fires); objects, or trigadm tokens such as "
        "`$MSG_LABEL_CONTAINS=marketing`",
    )
    action: ActionIn

    def parsed_conditions(self) -> list[Condition]:
        return [parse_token(item) if isinstance(item, str) else item.condition() for item in self.conditions]


class RuleOut(BaseModel):
    id: str
    name: str
    description: str
    conditions: list[ConditionOut]
    action: ActionOut

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
            ),
        )


class TriggerIn(Strict):
    name: str
    queue: str = Field(description="The monitored queue: `private$/name`, a journal or dead-letter queue")
    enabled: bool = True
    serialized: bool = Field(False, description="One message at a time in queue order")
    processing: ProcessingName = "peek"
    rules: list[str] = Field(default_factory=list, description="Rule IDs or names, in evaluation order")

    def processing_type(self) -> ProcessingType:
        return ProcessingType(self.processing)


class RulesIn(Strict):
    rules: list[str] = Field(description="Rule IDs or names, in evaluation order")


class AttachedRule(BaseModel):
    id: str
    name: str


class TriggerOut(BaseModel):
    id: str
    name: str
    queue: str
    enabled: bool
    serialized: bool
    processing: str
    rules: list[AttachedRule]

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
    id: int
    at: datetime
    rule_id: str
    rule_name: str
    lookup_id: str
    message_id: str
    outcome: str = Field(description="success, failure, or dead-lettered")
    duration_ms: float
    attempts: int
    error: str | None

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
    invocations: list[InvocationOut]
    next_after: int = Field(description="Pass as `after` to read the entries that follow")
