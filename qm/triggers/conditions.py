"""Conditions (reference §9.2) as pure functions: validation when a rule is stored, and
evaluation against a message. All conditions of a rule must hold; none: always fires."""

from __future__ import annotations

import operator
import uuid
from collections.abc import Callable, Iterable
from typing import Any

from qm.errors import MqError, MqErrorCode
from qm.model import Message
from qm.triggers.model import Condition, Operator, Property

TEXT_OPERATORS = frozenset({Operator.CONTAINS, Operator.DOES_NOT_CONTAIN})
EQUALITY_OPERATORS = frozenset({Operator.EQUALS, Operator.NOT_EQUAL})
NUMBER_OPERATORS = EQUALITY_OPERATORS | {Operator.GREATER_THAN, Operator.LESS_THAN}

OPERATORS: dict[Property, frozenset[Operator]] = {
    Property.LABEL: TEXT_OPERATORS,
    Property.BODY: TEXT_OPERATORS,
    Property.PRIORITY: NUMBER_OPERATORS,
    Property.APP_SPECIFIC: NUMBER_OPERATORS,
    Property.MESSAGE_CLASS: NUMBER_OPERATORS,
    Property.SOURCE_MACHINE: EQUALITY_OPERATORS,
}

VT_EMPTY = 0
VT_BSTR = 8
VT_LPWSTR = 31
WIDE_STRING_BODIES = frozenset({VT_BSTR, VT_LPWSTR})
"""String bodies in MSMQ's sense: UTF-16LE text. Body type 0 (what REST senders get by
default) is read as UTF-8 text, a gateway extension; any other body type is not text."""

# trigadm's tokens (reference §9.2); both spellings of "not equal" are accepted.
_TOKEN_PROPERTIES = {
    "LABEL": Property.LABEL,
    "BODY": Property.BODY,
    "PRIORITY": Property.PRIORITY,
    "APPSPECIFIC": Property.APP_SPECIFIC,
    "SRCMACHINEID": Property.SOURCE_MACHINE,
    "CLASS": Property.MESSAGE_CLASS,
}
_TOKEN_OPERATORS = {
    "CONTAINS": Operator.CONTAINS,
    "DOES_NOT_CONTAIN": Operator.DOES_NOT_CONTAIN,
    "EQUALS": Operator.EQUALS,
    "NOT_EQUAL": Operator.NOT_EQUAL,
    "DOES_NOT_EQUAL": Operator.NOT_EQUAL,
    "GREATER_THAN": Operator.GREATER_THAN,
    "LESS_THAN": Operator.LESS_THAN,
}


def invalid(detail: str) -> MqError:
    return MqError(MqErrorCode.MQ_ERROR_INVALID_PARAMETER, detail)


def make_condition(property_name: str, operator_name: str, value: str) -> Condition:
    """A checked condition; a clear MQ_ERROR_INVALID_PARAMETER for anything it cannot test."""
    try:
        prop = Property(property_name)
    except ValueError:
        known = ", ".join(item.value for item in Property)
        raise invalid(f"unknown message property {property_name!r}; known: {known}") from None
    try:
        op = Operator(operator_name)
    except ValueError:
        known = ", ".join(item.value for item in Operator)
        raise invalid(f"unknown operator {operator_name!r}; known: {known}") from None
    if op not in OPERATORS[prop]:
        allowed = ", ".join(sorted(item.value for item in OPERATORS[prop]))
        raise invalid(f"{prop.value} cannot be tested with {op.value}; use one of {allowed}")
    condition = Condition(prop, op, value)
    _operand(condition)  # the value must parse for the property
    return condition


def parse_token(token: str) -> Condition:
    """`$MSG_LABEL_CONTAINS=marketing` and the other trigadm condition tokens."""
    name, sep, value = token.partition("=")
    if not sep or not name.startswith("$MSG_"):
        raise invalid(f"{token!r} is not a condition token such as $MSG_LABEL_CONTAINS=text")
    rest = name.removeprefix("$MSG_")
    for prefix, prop in _TOKEN_PROPERTIES.items():
        suffix = rest.removeprefix(prefix + "_")
        if suffix != rest and suffix in _TOKEN_OPERATORS:
            return make_condition(prop.value, _TOKEN_OPERATORS[suffix].value, value)
    raise invalid(f"unknown condition token {name!r}")


def holds_all(conditions: Iterable[Condition], message: Message) -> bool:
    return all(holds(condition, message) for condition in conditions)


def holds(condition: Condition, message: Message) -> bool:
    if condition.property in (Property.LABEL, Property.BODY):
        text = _text_of(condition.property, message)
        if text is None:
            return False  # §9.2: a body that is not a string fails both body conditions
        found = str(condition.value) in text
        return found if condition.operator is Operator.CONTAINS else not found
    compare = _COMPARISONS[condition.operator]
    return compare(_actual(condition.property, message), _operand(condition))


_COMPARISONS: dict[Operator, Callable[[Any, Any], bool]] = {
    Operator.EQUALS: operator.eq,
    Operator.NOT_EQUAL: operator.ne,
    Operator.GREATER_THAN: operator.gt,
    Operator.LESS_THAN: operator.lt,
}


def body_text(message: Message) -> str | None:
    """The body as text when its type says it is text (see WIDE_STRING_BODIES)."""
    properties = message.properties
    if properties.body_type in WIDE_STRING_BODIES:
        return properties.body.decode("utf-16-le", errors="replace").rstrip("\x00")
    if properties.body_type == VT_EMPTY:
        return properties.body.decode("utf-8", errors="replace")
    return None


def _text_of(prop: Property, message: Message) -> str | None:
    return message.properties.label if prop is Property.LABEL else body_text(message)


def _actual(prop: Property, message: Message) -> object:
    properties = message.properties
    if prop is Property.PRIORITY:
        return properties.priority
    if prop is Property.APP_SPECIFIC:
        return properties.app_specific
    if prop is Property.MESSAGE_CLASS:
        return properties.message_class
    return message.source_machine


def _operand(condition: Condition) -> object:
    """The condition's value as the property's type; raises for a value that cannot be one."""
    prop, value = condition.property, condition.value.strip()
    if prop in (Property.LABEL, Property.BODY):
        return condition.value
    if prop is Property.SOURCE_MACHINE:
        try:
            return uuid.UUID(value)
        except ValueError:
            raise invalid(f"source_machine compares with a GUID, not {condition.value!r}") from None
    try:
        return int(value, 0)  # decimal, or 0x... for message classes
    except ValueError:
        raise invalid(f"{prop.value} compares with a number, not {condition.value!r}") from None
