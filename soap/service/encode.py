"""SOAP API responses and faults: typed values in, envelope bytes out.

Fields are written in the schema's order, absent (None) optional ones left out. Text that
XML 1.0 cannot carry (control characters a sender put in a label) is written as U+FFFD:
a message already received must reach its reader, never fail in the writing.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from lxml import etree

from soap.namespaces import SOAP_ENV, qname
from soap.service.faults import ServiceFault
from soap.service.schema import MQ_ERROR, OPERATIONS_BY_NAME, TARGET_NAMESPACE, Complex, Field
from soap.xml import Element

SOAP_PREFIX = "soap"
SERVICE_PREFIX = "gw"
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


def response_envelope(operation: str, values: Mapping[str, Any]) -> bytes:
    """`<{operation}Response>` with the operation's output fields taken from `values`."""
    declared = OPERATIONS_BY_NAME[operation]
    body = _body()
    wrapper = etree.SubElement(body, qname(TARGET_NAMESPACE, declared.response_name))
    _write_fields(wrapper, declared.output, values)
    return _serialize(body)


def fault_envelope(fault: ServiceFault) -> bytes:
    """A SOAP 1.1 Fault whose detail is an MqError element: MSMQ's error name and code."""
    body = _body()
    element = etree.SubElement(body, qname(SOAP_ENV, "Fault"))
    etree.SubElement(element, "faultcode").text = f"{SOAP_PREFIX}:{fault.fault_code.value}"
    etree.SubElement(element, "faultstring").text = xml_text(str(fault.error))
    detail = etree.SubElement(element, "detail")
    error = fault.error
    values = {"name": error.code.name, "code": error.code.hex, "description": error.detail}
    _write_fields(detail, (Field(MQ_ERROR.name, MQ_ERROR, True),), {MQ_ERROR.name: values})
    return _serialize(body)


def xml_text(text: str) -> str:
    return _NOT_XML.sub("\ufffd", text)


def _body() -> Element:
    nsmap = {SOAP_PREFIX: SOAP_ENV, SERVICE_PREFIX: TARGET_NAMESPACE}
    envelope = etree.Element(qname(SOAP_ENV, "Envelope"), nsmap=nsmap)
    return etree.SubElement(envelope, qname(SOAP_ENV, "Body"))


def _serialize(body: Element) -> bytes:
    document: bytes = etree.tostring(body.getparent(), xml_declaration=True, encoding="utf-8")
    return document


def _write_fields(parent: Element, fields: Sequence[Field], values: Mapping[str, Any]) -> None:
    for field in fields:
        value = values.get(field.name)
        if value is None:
            if field.required:
                raise ValueError(f"{field.name} is required in <{parent.tag}>")
            continue
        for item in value if field.repeated else (value,):
            element = etree.SubElement(parent, qname(TARGET_NAMESPACE, field.name))
            if isinstance(field.type, Complex):
                _write_fields(element, field.type.fields, item)
            else:
                element.text = _lexical(item)


def _lexical(value: object) -> str:
    """The XSD lexical form of a simple value."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, datetime):
        return value.isoformat()
    return xml_text(str(value))
