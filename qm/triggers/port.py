"""What triggers need from persistence; part of the store port (qm.store.Store)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from qm.disposal import Placement
from qm.triggers.model import Invocation, Rule, Trigger


class TriggerStore(Protocol):
    async def save_trigger(self, trigger: Trigger, now: datetime, create: bool) -> None:
        """Insert (create) or replace a trigger with its ordered rule attachments;
        MQ_ERROR_QUEUE_EXISTS-style conflicts surface as MqError (name taken)."""
        ...

    async def get_trigger(self, key: str) -> Trigger | None:
        """By ID, or else by name."""
        ...

    async def list_triggers(self) -> list[Trigger]: ...

    async def delete_trigger(self, trigger_id: str) -> bool: ...

    async def save_rule(self, rule: Rule, now: datetime, create: bool) -> None: ...

    async def get_rule(self, key: str) -> Rule | None:
        """By ID, or else by name."""
        ...

    async def list_rules(self) -> list[Rule]: ...

    async def delete_rule(self, rule_id: str) -> bool:
        """Delete the rule and detach it from every trigger."""
        ...

    async def add_invocation(self, invocation: Invocation) -> None: ...

    async def list_invocations(self, trigger_id: str, after: int, limit: int) -> list[Invocation]:
        """The trigger's log in order, entries with an id above `after`."""
        ...

    async def acquire_trigger_lease(
        self, trigger_id: str, holder: str, now: datetime, until: datetime
    ) -> bool:
        """Hold (or keep holding) the right to run the trigger until `until`; False when
        another holder's lease has not expired."""
        ...

    async def release_trigger_lease(self, trigger_id: str, holder: str) -> None: ...

    async def reject_message(
        self,
        queue_id: int,
        lookup_id: int,
        placements: Sequence[Placement],
        now: datetime,
        invocation: Invocation,
    ) -> bool:
        """Remove an available message, place its dead-letter copy (and NACK) and log the
        invocation entry in one transaction; False (nothing done) when it is no longer available."""
        ...
