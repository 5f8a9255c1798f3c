"""Writing a typed envelope as Windows writes it: compact UTF-8 XML (reference §1.4, §1.5).

No XML declaration, no whitespace between elements, `se:` for SOAP, default namespaces for
the blocks, children in the order senders emit them.
"""

from __future__ import annotations

import re

from soap import namespaces as ns
from soap.envelope import (
    CommitmentReceipt,
    DeliveryReceipt,
    Eod,
    Msmq,
    Path,
    Properties,
    Provider,
    Services,
    SrmpEnvelope,
    Stream,
    StreamReceipt,
)
from soap.ids import format_correlation
from soap.times import SrmpTime

_MUST = ' se:mustUnderstand="1"'
_NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\r": "&#13;"})


def envelope_xml(envelope: SrmpEnvelope) -> bytes:
    blocks = [
        _path(envelope.path, rev_first=envelope.is_receipt),
        _properties(envelope.properties),
        _services(envelope.services) if envelope.services else "",
        _stream(envelope.stream) if envelope.stream else "",
        _stream_receipt(envelope.stream_receipt) if envelope.stream_receipt else "",
        _delivery_receipt(envelope.delivery_receipt) if envelope.delivery_receipt else "",
        _commitment_receipt(envelope.commitment_receipt) if envelope.commitment_receipt else "",
        _msmq(envelope.msmq) if envelope.msmq else "",
    ]
    return (
        f'<se:Envelope xmlns:se="{ns.SOAP_ENV}" xmlns="{ns.SRMP}"><se:Header>'
        + "".join(blocks)
        + "</se:Header><se:Body></se:Body></se:Envelope>"
    ).encode("utf-8")


def escape(text: str) -> str:
    """Character data; `\\r` as a reference so that it survives end-of-line normalisation."""
    bad = _NOT_XML.search(text)
    if bad is not None:
        raise ValueError(f"{bad.group()!r} cannot be written in XML 1.0")
    return text.translate(_ESCAPES)


def _element(name: str, text: str) -> str:
    return f"<{name}>{escape(text)}</{name}>"


def _optional(name: str, text: str | int | None) -> str:
    return "" if text is None else _element(name, str(text))


def _flag(name: str, present: bool) -> str:
    return f"<{name}/>" if present else ""


def _time(name: str, time: SrmpTime | None) -> str:
    return "" if time is None else _element(name, time.text)


def _path(path: Path, rev_first: bool) -> str:
    """User messages: action, to, id, rev; MSMQ-generated receipts put rev before id."""
    rev = "" if path.rev_via is None else f"<rev>{_element('via', path.rev_via)}</rev>"
    message_id = "" if path.id is None else _element("id", path.id.srmp)
    tail = rev + message_id if rev_first else message_id + rev
    head = _element("action", path.action) + _element("to", path.to)
    return f'<path xmlns="{ns.WSRP}"{_MUST}>{head}{tail}</path>'


def _properties(properties: Properties) -> str:
    inner = _time("expiresAt", properties.expires_at) + _time("sentAt", properties.sent_at)
    return f"<properties{_MUST}>{inner}</properties>"


def _services(services: Services) -> str:
    inner = _flag("durable", services.durable)
    if services.delivery_receipt_to is not None:
        send_to = _element("sendTo", services.delivery_receipt_to)
        inner += f"<deliveryReceiptRequest>{send_to}</deliveryReceiptRequest>"
    if services.commitment_receipt_to is not None:
        request = (
            _element("sendTo", services.commitment_receipt_to)
            + _flag("positiveOnly", services.commitment_positive)
            + _flag("negativeOnly", services.commitment_negative)
        )
        inner += f"<commitmentReceiptRequest>{request}</commitmentReceiptRequest>"
    return f"<services{_MUST}>{inner}</services>"


def _stream(stream: Stream) -> str:
    start = ""
    if stream.send_receipts_to is not None:
        send_to = _element("sendReceiptsTo", stream.send_receipts_to)
        start = f"<start>{send_to}{_time('expiresAt', stream.start_expires_at)}</start>"
    inner = (
        _element("streamId", stream.stream_id.text)
        + _element("current", str(stream.current))
        + _optional("previous", stream.previous)
        + start
        + _flag("streamReceiptRequest", stream.receipt_requested)
        + _flag("end", stream.end)
    )
    return f"<Stream{_MUST}>{inner}</Stream>"


def _stream_receipt(receipt: StreamReceipt) -> str:
    inner = _element("streamId", receipt.stream_id.text) + _element("lastOrdinal", str(receipt.last_ordinal))
    return f"<streamReceipt>{inner}</streamReceipt>"


def _delivery_receipt(receipt: DeliveryReceipt) -> str:
    inner = _time("receivedAt", receipt.received_at) + _element("id", receipt.id.srmp)
    return f"<deliveryReceipt>{inner}</deliveryReceipt>"


def _commitment_receipt(receipt: CommitmentReceipt) -> str:
    inner = (
        _time("decidedAt", receipt.decided_at)
        + _element("decision", "positive" if receipt.positive else "negative")
        + _element("id", receipt.id.srmp)
        + _optional("commitmentCode", receipt.commitment_code)
        + _optional("xCommitmentDetail", receipt.commitment_detail)
    )
    return f"<commitmentReceipt>{inner}</commitmentReceipt>"


def _msmq(msmq: Msmq) -> str:
    """Children in the senders' order (reference §1.5.8)."""
    correlation = None if msmq.correlation is None else format_correlation(msmq.correlation)
    inner = (
        _element("Class", str(msmq.message_class))
        + _element("Priority", str(msmq.priority))
        + _flag("Journal", msmq.journal)
        + _flag("DeadLetter", msmq.dead_letter)
        + _optional("Correlation", correlation)
        + _flag("Trace", msmq.trace)
        + _optional("ConnectorType", None if msmq.connector_type is None else str(msmq.connector_type))
        + _optional("App", msmq.app)
        + _element("BodyType", str(msmq.body_type))
        + _optional("HashAlgorithm", msmq.hash_algorithm)
        + (_eod(msmq.eod) if msmq.eod else "")
        + (_provider(msmq.provider) if msmq.provider else "")
        + _element("SourceQmGuid", str(msmq.source_qm_guid))
        + _mqf("DestinationMqf", msmq.destination_mqf)
        + _mqf("AdminMqf", msmq.admin_mqf)
        + _mqf("ResponseMqf", msmq.response_mqf)
        + _time("TTrq", msmq.ttrq)
    )
    return f'<Msmq xmlns="{ns.MSMQ}">{inner}</Msmq>'


def _provider(provider: Provider) -> str:
    return f"<Provider>{_element('Type', str(provider.type))}{_element('Name', provider.name)}</Provider>"


def _eod(eod: Eod) -> str:
    connector = "" if eod.connector_id is None else _element("ConnectorId", str(eod.connector_id))
    return f"<Eod>{_flag('First', eod.first)}{_flag('Last', eod.last)}{connector}</Eod>"


def _mqf(name: str, format_names: tuple[str, ...]) -> str:
    return _element(name, " ".join(format_names)) if format_names else ""
