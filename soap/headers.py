"""Reading the SOAP header blocks into the typed envelope (reference §1.4, §1.5, §1.7 steps 5-6).

Elements are matched on (namespace URI, local name), local names case-insensitively (`Stream`
and `stream`); a known block or child occurring twice, an unknown block marked mustUnderstand,
a missing mandatory element and any value out of range are refused with 400.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import NamedTuple, TypeVar

from qm.model import MAX_LABEL_LENGTH
from soap import namespaces as ns
from soap.envelope import (
    CommitmentReceipt,
    DeliveryReceipt,
    Msmq,
    Path,
    Properties,
    Services,
    Stream,
    StreamReceipt,
    has_msmq_prefix,
)
from soap.errors import SrmpError, bad_request
from soap.ids import UINT32_MAX, MessageId, StreamId, parse_decimal
from soap.msmq_block import read_msmq
from soap.times import SrmpTime, parse_duration
from soap.urls import check_http_url
from soap.xml import Children, Element, matching_name, split_tag

_T = TypeVar("_T")
_BLOCKS = frozenset(
    {
        (ns.WSRP, "path"),
        (ns.SRMP, "properties"),
        (ns.SRMP, "services"),
        (ns.SRMP, "stream"),
        (ns.SRMP, "streamreceipt"),
        (ns.SRMP, "deliveryreceipt"),
        (ns.SRMP, "commitmentreceipt"),
        (ns.MSMQ, "msmq"),
        (ns.XMLDSIG, "signature"),
    }
)
# The children each block knows, by lower-case local name.
_PATH = frozenset({"action", "to", "id", "rev"})
_REV = frozenset({"via"})
_PROPERTIES = frozenset({"expiresat", "sentat", "duration"})
_SERVICES = frozenset({"durable", "deliveryreceiptrequest", "commitmentreceiptrequest"})
_RECEIPT_REQUEST = frozenset({"sendto", "positiveonly", "negativeonly"})
_STREAM = frozenset({"streamid", "current", "previous", "start", "streamreceiptrequest", "end"})
_STREAM_START = frozenset({"sendreceiptsto", "expiresat"})
_STREAM_RECEIPT = frozenset({"streamid", "lastordinal"})
_DELIVERY_RECEIPT = frozenset({"receivedat", "id"})
_COMMITMENT_RECEIPT = frozenset({"decidedat", "decision", "id", "commitmentcode", "xcommitmentdetail"})
_ENVELOPE = ns.qname(ns.SOAP_ENV, "Envelope")
_HEADER = ns.qname(ns.SOAP_ENV, "Header")
_REFERENCE = ns.qname(ns.XMLDSIG, "Reference")


class HeaderBlocks(NamedTuple):
    """What the SOAP header says; `parse` adds the MIME parts to make the `SrmpEnvelope`."""

    path: Path
    properties: Properties
    services: Services | None
    stream: Stream | None
    stream_receipt: StreamReceipt | None
    delivery_receipt: DeliveryReceipt | None
    commitment_receipt: CommitmentReceipt | None
    msmq: Msmq | None
    signature_present: bool
    ignored_headers: tuple[str, ...]
    references: tuple[str, ...]
    """The `cid:` URIs the signature refers to."""


def read_header_blocks(root: Element) -> HeaderBlocks:
    """The envelope's header blocks, and the `cid:` URIs its signature refers to."""
    blocks, ignored = _header_blocks(_header(root))
    msmq = _optional(blocks, ns.MSMQ, "msmq", read_msmq)
    signature = blocks.get((ns.XMLDSIG, "signature"))
    return HeaderBlocks(
        path=_read_path(_required(blocks, ns.WSRP, "path"), trust_id=msmq is not None),
        properties=_read_properties(_required(blocks, ns.SRMP, "properties")),
        services=_optional(blocks, ns.SRMP, "services", _read_services),
        stream=_optional(blocks, ns.SRMP, "stream", _read_stream),
        stream_receipt=_optional(blocks, ns.SRMP, "streamreceipt", _read_stream_receipt),
        delivery_receipt=_optional(blocks, ns.SRMP, "deliveryreceipt", _read_delivery_receipt),
        commitment_receipt=_optional(blocks, ns.SRMP, "commitmentreceipt", _read_commitment_receipt),
        msmq=msmq,
        signature_present=signature is not None,
        ignored_headers=tuple(ignored),
        references=_signature_references(signature),
    )


def _header(root: Element) -> Element:
    if root.tag != _ENVELOPE:
        raise bad_request(f"the root element is {root.tag!r}, not the SOAP 1.1 Envelope")
    headers = [child for child in root if child.tag == _HEADER]
    if len(headers) != 1:
        raise bad_request("the SOAP envelope must have exactly one Header")
    return headers[0]


def _header_blocks(header: Element) -> tuple[dict[tuple[str, str], Element], list[str]]:
    blocks: dict[tuple[str, str], Element] = {}
    ignored: list[str] = []
    for entry in header:
        tag = entry.tag
        if not isinstance(tag, str):
            continue
        key = matching_name(tag)
        if key not in _BLOCKS:
            _check_must_understand(entry)
            ignored.append(tag)
        elif key in blocks:
            raise bad_request(f"header entry <{split_tag(entry)[1]}> occurs twice")
        else:
            blocks[key] = entry
    return blocks, ignored


def _check_must_understand(entry: Element) -> None:
    """SOAP 1.1: an entry the receiver does not know, with mustUnderstand other than "0"."""
    value = entry.get(ns.MUST_UNDERSTAND)
    if value is not None and value.strip(ns.WHITESPACE) != "0":
        raise bad_request(f"header entry {entry.tag!r} is not understood but mustUnderstand is set")


def _required(blocks: dict[tuple[str, str], Element], namespace: str, name: str) -> Element:
    block = blocks.get((namespace, name))
    if block is None:
        raise bad_request(f"mandatory header entry <{name}> ({namespace}) is missing")
    return block


def _optional(
    blocks: dict[tuple[str, str], Element], namespace: str, name: str, read: Callable[[Element], _T]
) -> _T | None:
    block = blocks.get((namespace, name))
    return None if block is None else read(block)


def _read_path(element: Element, trust_id: bool) -> Path:
    children = Children(element, ns.WSRP, _PATH)
    path = Path(
        action=children.required_text("action", strip=False),
        to=check_http_url(children.required_text("to"), "<to>"),
        id=_read_id(children.text("id"), trust_id),
        rev_via=_read_rev(children.get("rev")),
    )
    if len(path.label.encode("utf-16-le")) // 2 > MAX_LABEL_LENGTH:
        raise bad_request(f"the label is longer than {MAX_LABEL_LENGTH} characters (UTF-16 units)")
    return path


def _read_id(text: str | None, trusted: bool) -> MessageId | None:
    """Without `<Msmq>` the id is ignored, so an unreadable one is no error (reference §1.5.1)."""
    if text is None:
        if trusted:
            raise bad_request("<id> is missing although <Msmq> is present")
        return None
    try:
        return MessageId.from_srmp(text)
    except SrmpError:
        if trusted:
            raise
        return None


def _read_rev(rev: Element | None) -> str | None:
    """`<rev>` holds exactly one `<via>`; an empty one means no response queue."""
    if rev is None:
        return None
    via = Children(rev, ns.WSRP, _REV).required_text("via")
    if not via:
        return None
    if has_msmq_prefix(via):
        if len(via) == len(ns.LABEL_PREFIX):
            raise bad_request("<via> holds an empty MSMQ: format name")
        return via
    return check_http_url(via, "<rev><via>")


def _read_properties(element: Element) -> Properties:
    children = Children(element, ns.SRMP, _PROPERTIES)
    sent_text = children.text("sentat")
    sent_at = None if sent_text is None else SrmpTime.parse(sent_text)
    expires_text = children.text("expiresat")
    if expires_text is not None:
        return Properties(SrmpTime.parse(expires_text), sent_at)
    duration = children.text("duration")
    if duration is None:
        raise bad_request("mandatory <expiresAt> is missing from <properties>")
    if sent_at is None:
        raise bad_request("<duration> without <expiresAt> needs <sentAt> to start from")
    return Properties(SrmpTime.from_epoch(sent_at.epoch + parse_duration(duration)), sent_at)


def _read_services(element: Element) -> Services:
    children = Children(element, ns.SRMP, _SERVICES)
    delivery = children.get("deliveryreceiptrequest")
    commitment = children.get("commitmentreceiptrequest")
    commitment_children = None if commitment is None else _receipt_request(commitment)
    return Services(
        durable=children.flag("durable"),
        delivery_receipt_to=None if delivery is None else _send_to(_receipt_request(delivery)),
        commitment_receipt_to=None if commitment_children is None else _send_to(commitment_children),
        commitment_positive=commitment_children is not None and commitment_children.flag("positiveonly"),
        commitment_negative=commitment_children is not None and commitment_children.flag("negativeonly"),
    )


def _receipt_request(element: Element) -> Children:
    return Children(element, ns.SRMP, _RECEIPT_REQUEST)


def _send_to(children: Children) -> str:
    return check_http_url(children.required_text("sendto"), "<sendTo>")


def _read_stream(element: Element) -> Stream:
    children = Children(element, ns.SRMP, _STREAM)
    previous = children.text("previous")
    start = children.get("start")
    start_children = None if start is None else Children(start, ns.SRMP, _STREAM_START)
    start_expires = None if start_children is None else start_children.text("expiresat")
    return Stream(
        stream_id=StreamId.parse(children.required_text("streamid")),
        current=parse_decimal(children.required_text("current"), "<current>", UINT32_MAX, minimum=1),
        previous=None if previous is None else parse_decimal(previous, "<previous>", UINT32_MAX),
        send_receipts_to=None
        if start_children is None
        else check_http_url(start_children.required_text("sendreceiptsto"), "<sendReceiptsTo>"),
        start_expires_at=None if start_expires is None else SrmpTime.parse(start_expires),
        receipt_requested=children.flag("streamreceiptrequest"),
        end=children.flag("end"),
    )


def _read_stream_receipt(element: Element) -> StreamReceipt:
    children = Children(element, ns.SRMP, _STREAM_RECEIPT)
    return StreamReceipt(
        stream_id=StreamId.parse(children.required_text("streamid")),
        last_ordinal=parse_decimal(children.required_text("lastordinal"), "<lastOrdinal>", UINT32_MAX),
    )


def _read_delivery_receipt(element: Element) -> DeliveryReceipt:
    children = Children(element, ns.SRMP, _DELIVERY_RECEIPT)
    return DeliveryReceipt(
        received_at=SrmpTime.parse(children.required_text("receivedat")),
        id=MessageId.from_srmp(children.required_text("id")),
    )


def _read_commitment_receipt(element: Element) -> CommitmentReceipt:
    children = Children(element, ns.SRMP, _COMMITMENT_RECEIPT)
    decision = children.required_text("decision").lower()
    if decision not in ("positive", "negative"):
        raise bad_request(f"<decision> is {decision[:20]!r}, not positive or negative")
    return CommitmentReceipt(
        decided_at=SrmpTime.parse(children.required_text("decidedat")),
        positive=decision == "positive",
        id=MessageId.from_srmp(children.required_text("id")),
        commitment_code=children.text("commitmentcode", strip=False),
        commitment_detail=children.text("xcommitmentdetail", strip=False),
    )


def _signature_references(signature: Element | None) -> tuple[str, ...]:
    if signature is None:
        return ()
    uris: Iterable[str | None] = (reference.get("URI") for reference in signature.iter(_REFERENCE))
    return tuple(uri for uri in uris if uri is not None and uri[:4].lower() == "cid:")
