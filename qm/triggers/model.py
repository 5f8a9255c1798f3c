"""Triggers, rules, conditions and actions as frozen values (reference §9.1)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime


class ProcessingType(enum.StrEnum):
    """Reference §9.4: what happens to a message the trigger looked at."""

    PEEK = "peek"
    """The message stays; several peeking triggers may share a queue."""
    RETRIEVAL = "retrieval"
    """Received when a rule fired and every action invoked succeeded; else it stays."""
    TRANSACTIONAL_RETRIEVAL = "transactional-retrieval"
    """Received in a transaction that the actions' success commits and a failure aborts."""

    @property
    def retrieves(self) -> bool:
        return self is not ProcessingType.PEEK


class Property(enum.StrEnum):
    """The message property a condition tests (reference §9.2, plus the message class)."""

    LABEL = "label"
    BODY = "body"
    PRIORITY = "priority"
    APP_SPECIFIC = "app_specific"
    SOURCE_MACHINE = "source_machine"
    MESSAGE_CLASS = "message_class"


class Operator(enum.StrEnum):
    CONTAINS = "contains"
    DOES_NOT_CONTAIN = "does_not_contain"
    EQUALS = "equals"
    NOT_EQUAL = "not_equal"
    GREATER_THAN = "greater_than"
    LESS_THAN = "less_than"


@dataclass(frozen=True, slots=True)
class Condition:
    """A test on one message property; `value` is the text as given, checked at creation."""

    property: Property
    operator: Operator
    value: str


class ActionKind(enum.StrEnum):
    WEBHOOK = "webhook"
    COMMAND = "command"


@dataclass(frozen=True, slots=True)
class Action:
    """An HTTP call (method, URL, headers, body template) or a command run without a shell.
    Templates and arguments may use the `$MSG_*` / `$TRIGGER_*` parameters of §9.3."""

    kind: ActionKind
    url: str = ""
    method: str = "POST"
    headers: tuple[tuple[str, str], ...] = ()
    body_template: str | None = None
    """None: a JSON document of every parameter."""
    command: tuple[str, ...] = ()
    """Executable first, then one argument per item."""
    substitute_arguments: tuple[int, ...] = ()
    """Positions (1 = the first argument after the executable) of the command arguments whose
    `$MSG_*` parameters are replaced; every other argument is passed exactly as written. Opt-in:
    a message field in an argument lets whoever sends to the queue choose what the program gets."""


@dataclass(frozen=True, slots=True)
class Rule:
    id: str
    name: str
    description: str
    conditions: tuple[Condition, ...]
    action: Action


@dataclass(frozen=True, slots=True)
class Trigger:
    id: str
    name: str
    queue: str
    """The monitored queue's path as responses show it (`private$/orders`)."""
    queue_id: int
    enabled: bool
    serialized: bool
    processing: ProcessingType
    rule_ids: tuple[str, ...]
    """Attached rules, in evaluation order."""


class Outcome(enum.StrEnum):
    SUCCESS = "success"
    FAILURE = "failure"
    DEAD_LETTERED = "dead-lettered"
    """Transactional retrieval gave up on the message after the attempt limit."""


@dataclass(frozen=True, slots=True)
class Invocation:
    """One entry of a trigger's invocation log: an action run (with its retries)."""

    trigger_id: str
    rule_id: str
    rule_name: str
    lookup_id: int
    message_id: str
    at: datetime
    outcome: Outcome
    duration_ms: float
    attempts: int
    error: str | None
    id: int = 0
    """Assigned by the store; the log is read in this order."""


@dataclass(frozen=True, slots=True)
class TriggerConfig:
    action_timeout_s: float = 10.0
    """One attempt of one action."""
    action_retries: int = 2
    """Further attempts after a failed one, with exponential backoff."""
    retry_backoff_s: float = 0.5
    concurrency: int = 4
    """Actions a non-serialized trigger runs at once."""
    attempt_limit: int = 5
    """Transactional retrieval: aborts before a message goes to the dead-letter queue (0: never)."""
    peek_once: bool = False
    """Process each message once per walk: no double activation after a priority jump."""
    lease_s: float = 15.0
    """How long a process holds a trigger without renewing (several gateway processes)."""
    wait_ms: int = 150_000
    """One cursor wait; shorter than the cursor idle timeout so the cursor stays open."""

    def action_budget_s(self, actions: int) -> float:
        """The longest the actions of one message can take, retries included."""
        backoff = sum(self.retry_backoff_s * 2.0**attempt for attempt in range(self.action_retries))
        return float(actions) * (self.action_timeout_s * (self.action_retries + 1) + backoff)
