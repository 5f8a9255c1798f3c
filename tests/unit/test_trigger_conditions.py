"""Every condition and operator of reference §9.2, the trigadm tokens, action templates and
the allow-list, as pure functions."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from qm.errors import MqError, MqErrorCode
from qm.model import Message, MessageProperties
from qm.triggers.actions import AllowList, check_action, render, url_within
from qm.triggers.conditions import holds, make_condition, parse_token
from qm.triggers.model import Action, ActionKind, Condition, Operator, Property

SOURCE = uuid.UUID("5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93")
OTHER = "00000000-0000-0000-0000-000000000001"


def message(
    label: str = "marketing news",
    body: bytes = b"order 7",
    body_type: int = 0,
    priority: int = 5,
    app_specific: int = 7,
    message_class: int = 0,
) -> Message:
    moment = datetime(2026, 11, 23, tzinfo=UTC)
    properties = MessageProperties(
        body=body,
        label=label,
        body_type=body_type,
        priority=priority,
        app_specific=app_specific,
        message_class=message_class,
    )
    return Message(1, 1, "{x}\\1", properties, moment, moment, SOURCE, None, None, False, False, 0)


@pytest.mark.parametrize(
    ("prop", "op", "value", "expected"),
    [
        ("label", "contains", "marketing", True),
        ("label", "contains", "Marketing", False),  # case-sensitive
        ("label", "does_not_contain", "marketing", False),
        ("label", "does_not_contain", "sales", True),
        ("body", "contains", "order", True),
        ("body", "contains", "invoice", False),
        ("body", "does_not_contain", "invoice", True),
        ("body", "does_not_contain", "order", False),
        ("priority", "equals", "5", True),
        ("priority", "equals", "4", False),
        ("priority", "not_equal", "4", True),
        ("priority", "not_equal", "5", False),
        ("priority", "greater_than", "4", True),
        ("priority", "greater_than", "5", False),
        ("priority", "less_than", "6", True),
        ("priority", "less_than", "5", False),
        ("app_specific", "equals", "7", True),
        ("app_specific", "equals", "8", False),
        ("app_specific", "not_equal", "8", True),
        ("app_specific", "not_equal", "7", False),
        ("app_specific", "greater_than", "6", True),
        ("app_specific", "greater_than", "7", False),
        ("app_specific", "less_than", "8", True),
        ("app_specific", "less_than", "7", False),
        ("source_machine", "equals", str(SOURCE), True),
        ("source_machine", "equals", OTHER, False),
        ("source_machine", "not_equal", OTHER, True),
        ("source_machine", "not_equal", str(SOURCE).upper(), False),
        ("message_class", "equals", "0", True),
        ("message_class", "not_equal", "0", False),
        ("message_class", "greater_than", "0x0", False),
        ("message_class", "less_than", "0xC004", True),
    ],
)
def test_every_condition_and_operator(prop: str, op: str, value: str, expected: bool) -> None:
    assert holds(make_condition(prop, op, value), message()) is expected


@pytest.mark.parametrize(
    ("body_type", "body"), [(8, "order 7\x00".encode("utf-16-le")), (31, "order 7".encode("utf-16-le"))]
)
def test_wide_string_bodies_are_text(body_type: int, body: bytes) -> None:
    assert holds(make_condition("body", "contains", "order"), message(body=body, body_type=body_type))


@pytest.mark.parametrize("op", ["contains", "does_not_contain"])
def test_a_body_that_is_not_a_string_fails_both_body_conditions(op: str) -> None:
    binary = message(body=b"\x00\x01order", body_type=0x11)  # VT_UI1 | array: bytes
    assert holds(make_condition("body", op, "order"), binary) is False


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        ("$MSG_LABEL_CONTAINS=marketing", Condition(Property.LABEL, Operator.CONTAINS, "marketing")),
        ("$MSG_BODY_DOES_NOT_CONTAIN=x", Condition(Property.BODY, Operator.DOES_NOT_CONTAIN, "x")),
        ("$MSG_PRIORITY_GREATER_THAN=5", Condition(Property.PRIORITY, Operator.GREATER_THAN, "5")),
        ("$MSG_PRIORITY_DOES_NOT_EQUAL=5", Condition(Property.PRIORITY, Operator.NOT_EQUAL, "5")),
        ("$MSG_APPSPECIFIC_NOT_EQUAL=7", Condition(Property.APP_SPECIFIC, Operator.NOT_EQUAL, "7")),
        ("$MSG_SRCMACHINEID_EQUALS=" + OTHER, Condition(Property.SOURCE_MACHINE, Operator.EQUALS, OTHER)),
    ],
)
def test_trigadm_tokens(token: str, expected: Condition) -> None:
    assert parse_token(token) == expected


@pytest.mark.parametrize(
    ("prop", "op", "value", "complaint"),
    [
        ("colour", "equals", "1", "unknown message property 'colour'"),
        ("label", "matches", "x", "unknown operator 'matches'"),
        ("label", "greater_than", "x", "label cannot be tested with greater_than"),
        ("source_machine", "less_than", OTHER, "source_machine cannot be tested with less_than"),
        ("priority", "equals", "high", "priority compares with a number"),
        ("source_machine", "equals", "gw01", "source_machine compares with a GUID"),
    ],
)
def test_bad_conditions_are_refused_clearly(prop: str, op: str, value: str, complaint: str) -> None:
    with pytest.raises(MqError) as caught:
        make_condition(prop, op, value)
    assert caught.value.code is MqErrorCode.MQ_ERROR_INVALID_PARAMETER
    assert complaint in caught.value.detail


def test_templates_use_the_longest_parameter_name() -> None:
    values = {"$MSG_BODY": "Ym9keQ==", "$MSG_BODY_AS_STRING": "body", "$MSG_LABEL": "x"}
    assert render("$MSG_BODY_AS_STRING/$MSG_BODY/$MSG_LABEL", values) == "body/Ym9keQ==/x"


def test_unknown_template_parameter_is_refused() -> None:
    with pytest.raises(MqError, match=r"unknown parameter \$MSG_COLOUR"):
        check_action(Action(ActionKind.WEBHOOK, url="http://127.0.0.1/x", body_template="$MSG_COLOUR"))


@pytest.mark.parametrize(
    ("url", "allowed"),
    [
        ("http://127.0.0.1:9000/hook", True),
        ("http://127.0.0.1:9000/hooks/a", True),
        ("http://127.0.0.1:90001/hook", False),
        ("http://127.0.0.1:9000@evil.example/hook", False),
        ("https://127.0.0.1:9000/hook", False),
        ("http://127.0.0.1:9000/other", False),
    ],
)
def test_allow_list_compares_origin_and_path(url: str, allowed: bool) -> None:
    assert url_within(url, "http://127.0.0.1:9000/hook") is allowed


def test_commands_are_off_unless_enabled_and_listed() -> None:
    action = Action(ActionKind.COMMAND, command=("/bin/true",))
    with pytest.raises(MqError, match="command actions are disabled"):
        AllowList().check(action)
    with pytest.raises(MqError, match="not an allowed command"):
        AllowList(commands=("/bin/echo",), commands_enabled=True).check(action)
    AllowList(commands=("/bin/true",), commands_enabled=True).check(action)
