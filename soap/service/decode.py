"""A SOAP API request: bytes and content type in, a typed call out, or a ServiceFault.

The envelope goes through the gateway's one hardened XML parser (soap.xml: no DTD, no
entities, no network, bounded size and depth). The operation is the Body's one child element;
its children are read by the schema's field table: each at most once, in any order, in the
service namespace (or unqualified, for hand-written requests), unknown ones refused.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Mapping
from typing import Any

from qm.errors import MqError, MqErrorCode
from qm.model import Delivery, MessageProperties, QueueSettings
from soap.errors import SrmpError
from soap.limits import Limits
from soap.mime import parse_content_type
from soap.namespaces import MUST_UNDERSTAND, SOAP_ENV, WHITESPACE
from soap.service import calls
from soap.service.faults import FaultCode, ServiceFault, client_fault
from soap.service.schema import (
    BASE64,
    BOOLEAN,
    OPERATIONS_BY_NAME,
    OUTGOING_MESSAGE,
    QUEUE_SETTINGS,
    TARGET_NAMESPACE,
    Complex,
    Enumeration,
    Field,
    Operation,
    Simple,
)
from soap.xml import Element, leaf_text, parse_xml, split_tag

SOAP_12_ENV = "http://www.w3.org/2003/05/soap-envelope"
_INTEGER = re.compile(r"[+-]?[0-9]{1,20}")
_BOOLEANS = {"true": True, "1": True, "false": False, "0": False}
Values = Mapping[str, Any]


def parse_call(data: bytes, content_type: str | None, limits: Limits) -> calls.Call:
    """The call a request envelope makes; ServiceFault (Client, VersionMismatch,
    MustUnderstand) when the request is not one this service can carry out."""
    try:
        charset = None if not content_type else parse_content_type(content_type).charset
        root = parse_xml(data, charset, limits, kind="SOAP API requests")
    except SrmpError as error:
        raise client_fault(MqErrorCode.MQ_ERROR_BAD_XML_FORMAT, error.reason) from None
    try:
        wrapper = _operation_element(root)
        operation = _operation(wrapper)
        values = read_fields(wrapper, operation.input)
    except SrmpError as error:  # leaf_text: an element holding elements where text belongs
        raise client_fault(MqErrorCode.MQ_ERROR_INVALID_PARAMETER, error.reason) from None
    return _BUILDERS[operation.name](values)


def _operation_element(root: Element) -> Element:
    namespace, local = split_tag(root)
    if local != "Envelope" or namespace != SOAP_ENV:
        if local == "Envelope" and namespace == SOAP_12_ENV:
            raise ServiceFault(
                FaultCode.VERSION_MISMATCH,
                MqError(MqErrorCode.MQ_ERROR_INVALID_PARAMETER, "this service speaks SOAP 1.1, not 1.2"),
            )
        raise client_fault(
            MqErrorCode.MQ_ERROR_INVALID_PARAMETER, f"the root element is <{local}>, not a SOAP 1.1 Envelope"
        )
    header, body = _header_and_body(root)
    if header is not None:
        _refuse_must_understand(header)
    wrappers = _elements(body)
    if len(wrappers) != 1:
        raise client_fault(
            MqErrorCode.MQ_ERROR_INVALID_PARAMETER,
            f"the SOAP Body holds {len(wrappers)} elements; it must hold one operation",
        )
    return wrappers[0]


def _header_and_body(root: Element) -> tuple[Element | None, Element]:
    children = _elements(root)
    names = [split_tag(child) for child in children]
    if names and names[0] == (SOAP_ENV, "Header"):
        header, rest = children[0], children[1:]
    else:
        header, rest = None, children
    if len(rest) != 1 or split_tag(rest[0]) != (SOAP_ENV, "Body"):
        raise client_fault(
            MqErrorCode.MQ_ERROR_INVALID_PARAMETER, "the Envelope must hold an optional Header, then a Body"
        )
    return header, rest[0]


def _refuse_must_understand(header: Element) -> None:
    """This service understands no header block: one that must be understood is a fault."""
    for block in _elements(header):
        if block.get(MUST_UNDERSTAND, "0").strip(WHITESPACE) in ("1", "true"):
            raise ServiceFault(
                FaultCode.MUST_UNDERSTAND,
                MqError(
                    MqErrorCode.MQ_ERROR_INVALID_PARAMETER,
                    f"header block <{split_tag(block)[1]}> is not understood by this service",
                ),
            )


def _operation(wrapper: Element) -> Operation:
    namespace, local = split_tag(wrapper)
    operation = OPERATIONS_BY_NAME.get(local) if namespace == TARGET_NAMESPACE else None
    if operation is None:
        raise client_fault(
            MqErrorCode.MQ_ERROR_UNSUPPORTED_OPERATION,
            f"{{{namespace}}}{local} is not an operation of this service "
            f"(operations are in namespace {TARGET_NAMESPACE}: {', '.join(OPERATIONS_BY_NAME)})",
        )
    return operation


def _elements(parent: Element) -> list[Element]:
    """Child elements; comments and processing instructions are not elements."""
    return [child for child in parent if isinstance(child.tag, str)]


def read_fields(parent: Element, fields: tuple[Field, ...]) -> dict[str, Any]:
    """The values of `fields` among the children of `parent`, by field name; absent ones are
    missing from the result (a required one is a fault)."""
    by_name = {field.name: field for field in fields}
    found: dict[str, list[Element]] = {}
    for child in _elements(parent):
        namespace, local = split_tag(child)
        field = by_name.get(local) if namespace in (TARGET_NAMESPACE, "") else None
        if field is None:
            raise client_fault(
                MqErrorCode.MQ_ERROR_INVALID_PARAMETER,
                f"<{local}> is not expected in <{split_tag(parent)[1]}>",
            )
        if found.setdefault(local, []) and not field.repeated:
            raise client_fault(MqErrorCode.MQ_ERROR_INVALID_PARAMETER, f"<{local}> occurs twice")
        found[local].append(child)
    values: dict[str, Any] = {}
    for field in fields:
        elements = found.get(field.name)
        if not elements:
            if field.required:
                raise client_fault(
                    MqErrorCode.MQ_ERROR_INSUFFICIENT_PROPERTIES,
                    f"<{split_tag(parent)[1]}> lacks the required <{field.name}>",
                )
            continue
        read = [_value(element, field) for element in elements]
        values[field.name] = read if field.repeated else read[0]
    return values


def _value(element: Element, field: Field) -> Any:
    if isinstance(field.type, Complex):
        return read_fields(element, field.type.fields)
    text = leaf_text(element)
    if isinstance(field.type, Enumeration):
        value = text.strip(WHITESPACE)
        if value not in field.type.values:
            raise _invalid(field, text, f"one of {', '.join(field.type.values)}")
        return value
    return _simple(text, field, field.type)


def _simple(text: str, field: Field, kind: Simple) -> Any:
    if kind.is_integer:
        return _integer(text, field, kind)
    if kind is BOOLEAN:
        value = _BOOLEANS.get(text.strip(WHITESPACE))
        if value is None:
            raise _invalid(field, text, "true or false")
        return value
    if kind is BASE64:
        try:
            return base64.b64decode("".join(text.split()), validate=True)
        except (binascii.Error, ValueError):
            raise _invalid(field, text, "base64") from None
    return text


def _integer(text: str, field: Field, kind: Simple) -> int:
    stripped = text.strip(WHITESPACE)
    if _INTEGER.fullmatch(stripped) is None:
        raise _invalid(field, text, f"an integer ({kind.xsd})")
    value = int(stripped)
    assert kind.minimum is not None and kind.maximum is not None
    if not kind.minimum <= value <= kind.maximum:
        raise _invalid(field, text, f"between {kind.minimum} and {kind.maximum} ({kind.xsd})")
    return value


def _invalid(field: Field, text: str, expected: str) -> ServiceFault:
    return client_fault(
        MqErrorCode.MQ_ERROR_INVALID_PARAMETER, f"<{field.name}> is {text[:60]!r}; expected {expected}"
    )


# -- typed calls from field values ------------------------------------------------------


def _properties(values: Values) -> MessageProperties:
    arguments = {
        field.python_name: values[field.name] for field in OUTGOING_MESSAGE.fields if field.name in values
    }
    if "delivery" in arguments:
        arguments["delivery"] = Delivery[arguments["delivery"].upper()]
    return MessageProperties(**arguments)


def _settings(values: Values) -> QueueSettings:
    return QueueSettings(
        **{field.python_name: values[field.name] for field in QUEUE_SETTINGS if field.name in values}
    )


def _by_lookup_id(receive: bool) -> Callable[[Values], calls.Call]:
    def build(values: Values) -> calls.Call:
        action = calls.LookupAction(values.get("action", "current"))
        positioned = action in (calls.LookupAction.FIRST, calls.LookupAction.LAST)
        if not positioned and "lookupId" not in values:
            raise client_fault(
                MqErrorCode.MQ_ERROR_INSUFFICIENT_PROPERTIES, f"action {action.value} needs a <lookupId>"
            )
        return calls.ByLookupId(
            values["queue"],
            action,
            values.get("lookupId", 0),
            receive,
            values.get("transaction"),
            values.get("decode", False),
        )

    return build


_BUILDERS: dict[str, Callable[[Values], calls.Call]] = {
    "Send": lambda v: calls.Send(v["queue"], _properties(v["message"]), v.get("transaction")),
    "Receive": lambda v: calls.Receive(
        v["queue"], v.get("timeout", 0), v.get("transaction"), v.get("decode", False)
    ),
    "Peek": lambda v: calls.Peek(v["queue"], v.get("timeout", 0), v.get("decode", False)),
    "ReceiveByLookupId": _by_lookup_id(receive=True),
    "PeekByLookupId": _by_lookup_id(receive=False),
    "CreateQueue": lambda v: calls.CreateQueue(v["path"], _settings(v)),
    "GetQueue": lambda v: calls.GetQueue(v["path"]),
    "DeleteQueue": lambda v: calls.DeleteQueue(v["path"]),
    "PurgeQueue": lambda v: calls.PurgeQueue(v["path"]),
    "ListQueues": lambda v: calls.ListQueues(),
    "BeginTransaction": lambda v: calls.BeginTransaction(),
    "CommitTransaction": lambda v: calls.EndTransaction(v["transaction"], commit=True),
    "AbortTransaction": lambda v: calls.EndTransaction(v["transaction"], commit=False),
}
