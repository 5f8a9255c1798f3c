"""Reading the `<Msmq>` header block (namespace `msmq.namespace.xml`, reference §1.5.8)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from qm.model import MAX_PRIORITY, MessageClass
from soap import namespaces as ns
from soap.envelope import Eod, Msmq, Provider
from soap.errors import bad_request
from soap.ids import UINT32_MAX, parse_correlation, parse_decimal, parse_guid
from soap.times import SrmpTime
from soap.xml import Children, Element

_T = TypeVar("_T")
UINT16_MAX = 0xFFFF
_DEFINED_CLASSES = frozenset(int(message_class) for message_class in MessageClass)
_NAMES = frozenset(
    {
        "class",
        "priority",
        "journal",
        "deadletter",
        "correlation",
        "trace",
        "connectortype",
        "app",
        "bodytype",
        "hashalgorithm",
        "eod",
        "provider",
        "sourceqmguid",
        "destinationmqf",
        "adminmqf",
        "responsemqf",
        "ttrq",
    }
)

_EOD = frozenset({"first", "last", "connectorid", "xconnectorid"})
_PROVIDER = frozenset({"type", "name"})


def read_msmq(element: Element) -> Msmq:
    """Class, Priority, BodyType, SourceQmGuid and TTrq are mandatory when `<Msmq>` is present."""
    children = Children(element, ns.MSMQ, _NAMES)
    message_class = parse_decimal(children.required_text("class"), "<Class>", UINT16_MAX)
    if not is_defined_class(message_class):
        raise bad_request(f"<Class> {message_class:#06x} is not a defined message class")
    return Msmq(
        message_class=message_class,
        priority=parse_decimal(children.required_text("priority"), "<Priority>", MAX_PRIORITY),
        body_type=parse_decimal(children.required_text("bodytype"), "<BodyType>", UINT16_MAX),
        source_qm_guid=parse_guid(children.required_text("sourceqmguid")),
        ttrq=SrmpTime.parse(children.required_text("ttrq")),
        journal=children.flag("journal"),
        dead_letter=children.flag("deadletter"),
        correlation=_optional(children, "correlation", parse_correlation),
        trace=children.flag("trace"),
        connector_type=_optional(children, "connectortype", parse_guid),
        app=_optional(children, "app", lambda text: parse_decimal(text, "<App>", UINT32_MAX)),
        hash_algorithm=_optional(
            children, "hashalgorithm", lambda text: parse_decimal(text, "<HashAlgorithm>", UINT32_MAX)
        ),
        eod=_read_eod(children.get("eod")),
        provider=_read_provider(children.get("provider")),
        destination_mqf=tuple((children.text("destinationmqf") or "").split()),
        admin_mqf=tuple((children.text("adminmqf") or "").split()),
        response_mqf=tuple((children.text("responsemqf") or "").split()),
    )


def is_defined_class(value: int) -> bool:
    """A class of reference §5.1, or an HTTP-failure NACK 0xA000 | status ([Unverified] mask 0xE1FF)."""
    return value in _DEFINED_CLASSES or (value & ~0x01FF) == 0xA000


def _optional(children: Children, name: str, parse: Callable[[str], _T]) -> _T | None:
    text = children.text(name)
    return None if text is None else parse(text)


def _read_eod(element: Element | None) -> Eod | None:
    if element is None:
        return None
    children = Children(element, ns.MSMQ, _EOD)
    connector = children.text("connectorid")
    if connector is None:
        connector = children.text("xconnectorid")
    return Eod(
        first=children.flag("first"),
        last=children.flag("last"),
        connector_id=None if connector is None else parse_guid(connector),
    )


def _read_provider(element: Element | None) -> Provider | None:
    if element is None:
        return None
    children = Children(element, ns.MSMQ, _PROVIDER)
    return Provider(
        type=parse_decimal(children.required_text("type"), "<Provider><Type>", UINT32_MAX),
        name=children.text("name", strip=False) or "",
    )
