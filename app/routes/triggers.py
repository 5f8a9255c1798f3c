"""/api/rules and /api/triggers: Message Queuing Triggers (reference §9)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Request, status

from app import answers as a
from app.auth import authorize, note_for_audit
from app.parameters import InvocationAfter, RulePosition
from app.trigger_schemas import (
    InvocationOut,
    InvocationPage,
    RuleIn,
    RuleOut,
    RulesIn,
    TriggerIn,
    TriggerOut,
)
from qm.errors import MqErrorCode
from qm.rights import QueueRight
from qm.triggers.admin import TriggerAdmin, TriggerSpec

rules_router = APIRouter(prefix="/api/rules", tags=["triggers"])
router = APIRouter(prefix="/api/triggers", tags=["triggers"])


async def _admin(request: Request) -> TriggerAdmin:
    admin: TriggerAdmin = request.app.state.trigger_admin
    return admin


AdminDep = Annotated[TriggerAdmin, Depends(_admin)]

RULE_EXAMPLE: dict[str, Any] = {
    "id": "0b6f2c1e-8d3a-4e5f-9a7b-1c2d3e4f5a6b",
    "name": "MyRule1",
    "description": "marketing messages to the CRM",
    "conditions": [{"property": "label", "operator": "contains", "value": "marketing"}],
    "action": {
        "kind": "webhook",
        "url": "http://127.0.0.1:9000/hook",
        "method": "POST",
        "headers": {},
        "body_template": None,
        "command": [],
        "substitute_arguments": [],
    },
}
TRIGGER_EXAMPLE: dict[str, Any] = {
    "id": "5d1c9e2a-7b3f-4a6e-8c0d-2e4f6a8b0c1d",
    "name": "PrivateTrigger",
    "queue": "private$/MyQueue",
    "enabled": True,
    "serialized": False,
    "processing": "peek",
    "rules": [{"id": RULE_EXAMPLE["id"], "name": "MyRule1"}],
}
INVOCATIONS_EXAMPLE: dict[str, Any] = {
    "invocations": [
        {
            "id": 1,
            "at": "2026-11-23T10:00:00Z",
            "rule_id": RULE_EXAMPLE["id"],
            "rule_name": "MyRule1",
            "lookup_id": "504403158265495553",
            "message_id": "{5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93}\\1",
            "outcome": "success",
            "duration_ms": 2.5,
            "attempts": 1,
            "error": None,
        }
    ],
    "next_after": 1,
}
BAD_DEFINITION = a.Problem(
    MqErrorCode.MQ_ERROR_INVALID_PARAMETER,
    "'http://10.0.0.1/x' is outside the allow-list (MSMQGW_TRIGGER_ALLOWED_URLS: http://127.0.0.1:9000/)",
)
UNKNOWN_RULE = a.Problem(MqErrorCode.MQ_ERROR_INVALID_HANDLE, "no rule 'MyRule1'")
UNKNOWN = a.Problem(MqErrorCode.MQ_ERROR_INVALID_HANDLE, "no trigger 'PrivateTrigger'")
CONFLICT = a.Problem(
    MqErrorCode.MQ_ERROR_ILLEGAL_OPERATION,
    "private$/MyQueue already has trigger 'T1'; a retrieving trigger must be the only trigger on its queue",
)
NEEDS_TRANSACTIONAL = a.Problem(
    MqErrorCode.MQ_ERROR_TRANSACTION_USAGE,
    "transactional retrieval needs a transactional queue; private$/MyQueue is not",
)
TRIGGER_DEFINITION = (BAD_DEFINITION, a.QUEUE_PATH, CONFLICT, NEEDS_TRANSACTIONAL)
"""What a trigger's definition can fail with (its queue included)."""


# -- rules ----------------------------------------------------------------------------


@rules_router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    summary="Create a rule: conditions and one action",
    responses=a.answers(a.ok(RULE_EXAMPLE, "Created", 201), BAD_DEFINITION, CONFLICT),
)
async def create_rule(body: RuleIn, admin: AdminDep, request: Request) -> RuleOut:
    note_for_audit(request, name=body.name)
    conditions = body.parsed_conditions()
    created = await admin.create_rule(body.name, body.description, conditions, body.action.action())
    note_for_audit(request, name=body.name, id=created.id)
    return RuleOut.of(created)


@rules_router.get("", summary="List rules", responses=a.answers(a.ok([RULE_EXAMPLE])))
async def list_rules(admin: AdminDep) -> list[RuleOut]:
    return [RuleOut.of(rule) for rule in await admin.rules()]


@rules_router.get(
    "/{rule}", summary="Show a rule (by ID or name)", responses=a.answers(a.ok(RULE_EXAMPLE), UNKNOWN_RULE)
)
async def show_rule(rule: str, admin: AdminDep) -> RuleOut:
    return RuleOut.of(await admin.rule(rule))


@rules_router.put(
    "/{rule}",
    summary="Replace a rule; triggers it is attached to pick up the change",
    responses=a.answers(a.ok(RULE_EXAMPLE), BAD_DEFINITION, UNKNOWN_RULE, CONFLICT),
)
async def replace_rule(rule: str, body: RuleIn, admin: AdminDep) -> RuleOut:
    conditions = body.parsed_conditions()
    replaced = await admin.replace_rule(rule, body.name, body.description, conditions, body.action.action())
    return RuleOut.of(replaced)


@rules_router.delete(
    "/{rule}",
    status_code=204,
    summary="Delete a rule and detach it from every trigger",
    responses=a.answers(a.done("Deleted"), UNKNOWN_RULE),
)
async def delete_rule(rule: str, admin: AdminDep) -> None:
    await admin.delete_rule(rule)


# -- triggers -------------------------------------------------------------------------


async def _out(admin: TriggerAdmin, trigger: Any) -> TriggerOut:
    names = {rule.id: rule.name for rule in await admin.rules()}
    return TriggerOut.of(trigger, names)


def _spec(body: TriggerIn) -> TriggerSpec:
    return TriggerSpec(
        body.name, body.queue, body.enabled, body.serialized, body.processing_type(), tuple(body.rules)
    )


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    summary="Create a trigger on a queue",
    responses=a.answers(a.ok(TRIGGER_EXAMPLE, "Created", 201), TRIGGER_DEFINITION),
)
async def create_trigger(body: TriggerIn, admin: AdminDep, request: Request) -> TriggerOut:
    note_for_audit(request, name=body.name, queue=body.queue)
    await _may_read(request, body)
    created = await admin.create_trigger(_spec(body))
    note_for_audit(request, name=body.name, queue=body.queue, id=created.id)
    return await _out(admin, created)


@router.get("", summary="List triggers", responses=a.answers(a.ok([TRIGGER_EXAMPLE])))
async def list_triggers(admin: AdminDep) -> list[TriggerOut]:
    names = {rule.id: rule.name for rule in await admin.rules()}
    return [TriggerOut.of(trigger, names) for trigger in await admin.triggers()]


@router.get(
    "/{trigger}",
    summary="Show a trigger (by ID or name)",
    responses=a.answers(a.ok(TRIGGER_EXAMPLE), UNKNOWN),
)
async def show_trigger(trigger: str, admin: AdminDep) -> TriggerOut:
    return await _out(admin, await admin.trigger(trigger))


@router.put(
    "/{trigger}",
    summary="Replace a trigger (enable, disable, change processing or rules)",
    responses=a.answers(a.ok(TRIGGER_EXAMPLE), TRIGGER_DEFINITION, UNKNOWN),
)
async def replace_trigger(trigger: str, body: TriggerIn, admin: AdminDep, request: Request) -> TriggerOut:
    await _may_read(request, body)
    return await _out(admin, await admin.replace_trigger(trigger, _spec(body)))


async def _may_read(request: Request, body: TriggerIn) -> None:
    """A trigger reads its queue on its creator's behalf (a retrieving one receives from it),
    and its rules' actions carry the messages on: MANAGE_TRIGGERS alone must not reach a
    queue's messages. Checked before anything changes, as a move checks its target."""
    right = QueueRight.PEEK_MESSAGE if body.processing == "peek" else QueueRight.RECEIVE_MESSAGE
    await authorize(request, right, body.queue)


@router.delete(
    "/{trigger}", status_code=204, summary="Delete a trigger", responses=a.answers(a.done("Deleted"), UNKNOWN)
)
async def delete_trigger(trigger: str, admin: AdminDep) -> None:
    await admin.delete_trigger(trigger)


@router.put(
    "/{trigger}/rules",
    summary="Set the attached rules, in evaluation order",
    responses=a.answers(a.ok(TRIGGER_EXAMPLE), TRIGGER_DEFINITION, UNKNOWN),
)
async def set_rules(trigger: str, body: RulesIn, admin: AdminDep) -> TriggerOut:
    current = await admin.trigger(trigger)
    spec = TriggerSpec(
        current.name,
        current.queue,
        current.enabled,
        current.serialized,
        current.processing,
        tuple(body.rules),
    )
    return await _out(admin, await admin.replace_trigger(current.id, spec))


@router.post(
    "/{trigger}/rules/{rule}",
    summary="Attach a rule (at the end, or at `position`)",
    responses=a.answers(a.ok(TRIGGER_EXAMPLE), a.INVALID_PARAMETER, UNKNOWN, UNKNOWN_RULE),
)
async def attach_rule(
    trigger: str,
    rule: str,
    admin: AdminDep,
    position: RulePosition = None,
) -> TriggerOut:
    return await _out(admin, await admin.attach(trigger, rule, position))


@router.delete(
    "/{trigger}/rules/{rule}",
    summary="Detach a rule",
    responses=a.answers(a.ok(TRIGGER_EXAMPLE), UNKNOWN, UNKNOWN_RULE),
)
async def detach_rule(trigger: str, rule: str, admin: AdminDep) -> TriggerOut:
    return await _out(admin, await admin.detach(trigger, rule))


@router.get(
    "/{trigger}/invocations",
    summary="The trigger's invocation log: time, rule, outcome, duration, error",
    responses=a.answers(a.ok(INVOCATIONS_EXAMPLE), a.INVALID_PARAMETER, UNKNOWN),
)
async def invocations(
    trigger: str,
    admin: AdminDep,
    after: InvocationAfter = 0,
    limit: Annotated[int, Query(ge=1, le=1000, description="At most this many entries")] = 100,
) -> InvocationPage:
    entries = await admin.invocations(trigger, after, limit)
    return InvocationPage(
        invocations=[InvocationOut.of(entry) for entry in entries],
        next_after=entries[-1].id if entries else after,
    )
