"""Triggers, rules, attachments, the invocation log, leases, and rejecting a message."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as postgresql_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncConnection

from qm.disposal import Placement, Reason
from qm.triggers.model import (
    Action,
    ActionKind,
    Condition,
    Invocation,
    Operator,
    Outcome,
    ProcessingType,
    Property,
    Rule,
    Trigger,
)
from storage import rows
from storage.consequences import Consequences
from storage.database import Database
from storage.tables import AVAILABLE, messages
from storage.trigger_tables import (
    trigger_attachments,
    trigger_invocations,
    trigger_leases,
    trigger_rules,
    triggers,
)

Row = Mapping[Any, Any]
tr = triggers.c
ru = trigger_rules.c
at = trigger_attachments.c
iv = trigger_invocations.c
le = trigger_leases.c
m = messages.c


class SqlTriggers:
    def __init__(self, db: Database) -> None:
        self._db = db
        self._invocation_listeners: list[Callable[[Invocation], None]] = []

    # -- triggers ---------------------------------------------------------------------

    async def save_trigger(self, trigger: Trigger, now: datetime, create: bool) -> None:
        values = _trigger_values(trigger, now)
        async with self._db.transaction() as connection:
            if create:
                await connection.execute(
                    sa.insert(triggers).values({**values, "created_at": rows.to_us(now)})
                )
            else:
                await connection.execute(sa.update(triggers).where(tr.id == trigger.id).values(values))
                await connection.execute(sa.delete(trigger_attachments).where(at.trigger_id == trigger.id))
            attached = [
                {"trigger_id": trigger.id, "rule_id": rule_id, "position": position}
                for position, rule_id in enumerate(trigger.rule_ids)
            ]
            if attached:
                await connection.execute(sa.insert(trigger_attachments), attached)

    async def get_trigger(self, key: str) -> Trigger | None:
        found = await self._triggers(sa.or_(tr.id == key, tr.name == key))
        by_id = [trigger for trigger in found if trigger.id == key]
        return next(iter(by_id or found), None)

    async def list_triggers(self) -> list[Trigger]:
        return await self._triggers(sa.true())

    async def _triggers(self, where: sa.ColumnElement[bool]) -> list[Trigger]:
        async with self._db.engine.connect() as connection:
            found = (await connection.execute(sa.select(triggers).where(where).order_by(tr.name))).mappings()
            records = list(found)
            ids = [row["id"] for row in records]
            statement = (
                sa.select(at.trigger_id, at.rule_id).where(at.trigger_id.in_(ids)).order_by(at.position)
            )
            attached: dict[str, list[str]] = {}
            for row in await connection.execute(statement):
                attached.setdefault(row.trigger_id, []).append(row.rule_id)
        return [_trigger_from_row(row, attached.get(row["id"], [])) for row in records]

    async def delete_trigger(self, trigger_id: str) -> bool:
        async with self._db.transaction() as connection:
            result = await connection.execute(sa.delete(triggers).where(tr.id == trigger_id))
        return bool(result.rowcount)

    # -- rules ------------------------------------------------------------------------

    async def save_rule(self, rule: Rule, now: datetime, create: bool) -> None:
        values = _rule_values(rule, now)
        async with self._db.transaction() as connection:
            if create:
                await connection.execute(
                    sa.insert(trigger_rules).values({**values, "created_at": rows.to_us(now)})
                )
            else:
                await connection.execute(sa.update(trigger_rules).where(ru.id == rule.id).values(values))

    async def get_rule(self, key: str) -> Rule | None:
        found = await self._rules(sa.or_(ru.id == key, ru.name == key))
        by_id = [rule for rule in found if rule.id == key]
        return next(iter(by_id or found), None)

    async def list_rules(self) -> list[Rule]:
        return await self._rules(sa.true())

    async def _rules(self, where: sa.ColumnElement[bool]) -> list[Rule]:
        async with self._db.engine.connect() as connection:
            found = await connection.execute(sa.select(trigger_rules).where(where).order_by(ru.name))
            return [_rule_from_row(row) for row in found.mappings()]

    async def delete_rule(self, rule_id: str) -> bool:
        async with self._db.transaction() as connection:
            await connection.execute(sa.delete(trigger_attachments).where(at.rule_id == rule_id))
            result = await connection.execute(sa.delete(trigger_rules).where(ru.id == rule_id))
        return bool(result.rowcount)

    # -- the invocation log -----------------------------------------------------------

    def on_invocation(self, listener: Callable[[Invocation], None]) -> None:
        """Call `listener` with each invocation once its log entry is committed (metrics)."""
        self._invocation_listeners.append(listener)

    def _logged(self, invocation: Invocation) -> None:
        for listener in self._invocation_listeners:
            listener(invocation)

    async def add_invocation(self, invocation: Invocation) -> None:
        async with self._db.transaction() as connection:
            await connection.execute(sa.insert(trigger_invocations).values(_invocation_values(invocation)))
        self._logged(invocation)

    async def list_invocations(self, trigger_id: str, after: int, limit: int) -> list[Invocation]:
        statement = (
            sa.select(trigger_invocations)
            .where(iv.trigger_id == trigger_id, iv.id > after)
            .order_by(iv.id)
            .limit(limit)
        )
        async with self._db.engine.connect() as connection:
            return [_invocation_from_row(row) for row in (await connection.execute(statement)).mappings()]

    # -- leases -----------------------------------------------------------------------

    async def acquire_trigger_lease(
        self, trigger_id: str, holder: str, now: datetime, until: datetime
    ) -> bool:
        async with self._db.transaction() as connection:
            renewed = await connection.execute(
                sa.update(trigger_leases)
                .where(
                    le.trigger_id == trigger_id, sa.or_(le.holder == holder, le.expires_at <= rows.to_us(now))
                )
                .values(holder=holder, expires_at=rows.to_us(until))
            )
            if renewed.rowcount:
                return True
            return await self._new_lease(connection, trigger_id, holder, until)

    async def _new_lease(
        self, connection: AsyncConnection, trigger_id: str, holder: str, until: datetime
    ) -> bool:
        insert = sqlite_insert if self._db.sqlite else postgresql_insert
        statement = (
            insert(trigger_leases)
            .values(trigger_id=trigger_id, holder=holder, expires_at=rows.to_us(until))
            .on_conflict_do_nothing()
        )
        return bool((await connection.execute(statement)).rowcount)

    async def release_trigger_lease(self, trigger_id: str, holder: str) -> None:
        async with self._db.transaction() as connection:
            await connection.execute(
                sa.delete(trigger_leases).where(le.trigger_id == trigger_id, le.holder == holder)
            )

    # -- the attempt limit ------------------------------------------------------------

    async def reject_message(
        self,
        queue_id: int,
        lookup_id: int,
        placements: Sequence[Placement],
        now: datetime,
        invocation: Invocation,
    ) -> bool:
        async with self._db.transaction() as connection:
            statement = (
                sa.delete(messages)
                .where(m.lookup_id == lookup_id, m.queue_id == queue_id, m.state == AVAILABLE)
                .returning(*messages.c)
            )
            row = (await connection.execute(statement)).mappings().first()
            if row is None:
                return False
            consequences = Consequences(self._db, connection, now)
            receipts = await consequences.final_receipts_earned([row], Reason.REJECTED)
            await consequences.settle([row], [*placements, *receipts])
            await connection.execute(sa.insert(trigger_invocations).values(_invocation_values(invocation)))
        self._logged(invocation)
        return True


def _trigger_values(trigger: Trigger, now: datetime) -> dict[str, Any]:
    return {
        "id": trigger.id,
        "name": trigger.name,
        "queue_id": trigger.queue_id,
        "queue": trigger.queue,
        "enabled": trigger.enabled,
        "serialized": trigger.serialized,
        "processing": trigger.processing.value,
        "modified_at": rows.to_us(now),
    }


def _trigger_from_row(row: Row, rule_ids: list[str]) -> Trigger:
    return Trigger(
        id=row["id"],
        name=row["name"],
        queue=row["queue"],
        queue_id=row["queue_id"],
        enabled=bool(row["enabled"]),
        serialized=bool(row["serialized"]),
        processing=ProcessingType(row["processing"]),
        rule_ids=tuple(rule_ids),
    )


def _rule_values(rule: Rule, now: datetime) -> dict[str, Any]:
    conditions = [[item.property.value, item.operator.value, item.value] for item in rule.conditions]
    action = rule.action
    action_document = {
        "kind": action.kind.value,
        "url": action.url,
        "method": action.method,
        "headers": [list(header) for header in action.headers],
        "body_template": action.body_template,
        "command": list(action.command),
        "substitute_arguments": list(action.substitute_arguments),
    }
    return {
        "id": rule.id,
        "name": rule.name,
        "description": rule.description,
        "conditions": json.dumps(conditions),
        "action": json.dumps(action_document),
        "modified_at": rows.to_us(now),
    }


def _rule_from_row(row: Row) -> Rule:
    conditions = tuple(
        Condition(Property(prop), Operator(op), value) for prop, op, value in json.loads(row["conditions"])
    )
    document = json.loads(row["action"])
    action = Action(
        kind=ActionKind(document["kind"]),
        url=document["url"],
        method=document["method"],
        headers=tuple((name, value) for name, value in document["headers"]),
        body_template=document["body_template"],
        command=tuple(document["command"]),
        # Rules stored before the opt-in existed substitute nothing (the safe reading).
        substitute_arguments=tuple(document.get("substitute_arguments", ())),
    )
    return Rule(row["id"], row["name"], row["description"], conditions, action)


def _invocation_values(invocation: Invocation) -> dict[str, Any]:
    return {
        "trigger_id": invocation.trigger_id,
        "rule_id": invocation.rule_id,
        "rule_name": invocation.rule_name,
        "lookup_id": invocation.lookup_id,
        "message_id": invocation.message_id,
        "at": rows.to_us(invocation.at),
        "outcome": invocation.outcome.value,
        "duration_ms": invocation.duration_ms,
        "attempts": invocation.attempts,
        "error": invocation.error,
    }


def _invocation_from_row(row: Row) -> Invocation:
    return Invocation(
        id=row["id"],
        trigger_id=row["trigger_id"],
        rule_id=row["rule_id"],
        rule_name=row["rule_name"],
        lookup_id=row["lookup_id"],
        message_id=row["message_id"],
        at=rows.from_us(row["at"]),
        outcome=Outcome(row["outcome"]),
        duration_ms=row["duration_ms"],
        attempts=row["attempts"],
        error=row["error"],
    )
