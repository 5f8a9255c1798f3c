"""SOAP API requests: bytes in, typed calls out, or a fault saying who is to blame and why."""

from __future__ import annotations

import pytest

from qm.errors import MqErrorCode
from qm.model import INFINITE, Delivery, MessageProperties, QueueSettings
from soap.limits import DEFAULT_LIMITS, Limits
from soap.service import FaultCode, LookupAction, ServiceFault, calls, parse_call, request_limits
from tests.unit.soap.service_samples import envelope, operation

SOAP_12 = "http://www.w3.org/2003/05/soap-envelope"


def call_of(data: bytes, content_type: str | None = "text/xml; charset=utf-8") -> calls.Call:
    return parse_call(data, content_type, DEFAULT_LIMITS)


def fault_of(data: bytes, limits: Limits = DEFAULT_LIMITS, content_type: str | None = None) -> ServiceFault:
    with pytest.raises(ServiceFault) as raised:
        parse_call(data, content_type, limits)
    return raised.value


def client_fault(data: bytes, code: MqErrorCode) -> str:
    fault = fault_of(data)
    assert fault.fault_code is FaultCode.CLIENT
    assert fault.error.code is code, fault.error
    return fault.error.detail


def test_send_with_every_property() -> None:
    message = (
        "<gw:message><gw:body>aGVsbG8=</gw:body><gw:label>new order</gw:label><gw:bodyType>8</gw:bodyType>"
        "<gw:priority>6</gw:priority><gw:class>0</gw:class>"
        "<gw:correlationId>AAAAAAAAAAAAAAAAAAAAAAEAAAA=</gw:correlationId><gw:appSpecific>42</gw:appSpecific>"
        "<gw:extension>AQI=</gw:extension><gw:responseQueue>DIRECT=OS:.\\private$\\replies</gw:responseQueue>"
        "<gw:adminQueue>.\\private$\\admin</gw:adminQueue><gw:acknowledge>14</gw:acknowledge>"
        "<gw:journal>3</gw:journal><gw:delivery>express</gw:delivery>"
        "<gw:timeToBeReceived>60</gw:timeToBeReceived><gw:timeToReachQueue>30</gw:timeToReachQueue>"
        "</gw:message>"
    )
    call = call_of(operation("Send", "queue=private$/orders", message, "transaction=single"))
    assert call == calls.Send(
        "private$/orders",
        MessageProperties(
            body=b"hello",
            label="new order",
            body_type=8,
            priority=6,
            message_class=0,
            correlation_id=bytes(16) + b"\x01\x00\x00\x00",
            app_specific=42,
            extension=b"\x01\x02",
            response_queue="DIRECT=OS:.\\private$\\replies",
            admin_queue=".\\private$\\admin",
            acknowledge=14,
            journal=3,
            delivery=Delivery.EXPRESS,
            time_to_be_received=60,
            time_to_reach_queue=30,
        ),
        "single",
    )


def test_send_with_no_property_sends_msmq_defaults() -> None:
    call = call_of(operation("Send", "queue=orders", "<gw:message/>"))
    assert call == calls.Send("orders", MessageProperties())


def test_base64_may_be_wrapped_and_integers_spaced_as_xsd_allows() -> None:
    message = "<gw:message><gw:body>\n aGVs\r\n bG8=\n</gw:body><gw:priority> +4 </gw:priority></gw:message>"
    call = call_of(operation("Send", "queue=q", message))
    assert isinstance(call, calls.Send)
    assert (call.properties.body, call.properties.priority) == (b"hello", 4)


def test_receive_and_peek() -> None:
    assert call_of(operation("Receive", "queue=q")) == calls.Receive("q", 0, None)
    assert call_of(operation("Receive", "queue=q", "timeout=2500", "transaction=t1")) == calls.Receive(
        "q", 2500, "t1"
    )
    assert call_of(operation("Peek", "queue=q", "timeout=10")) == calls.Peek("q", 10)


@pytest.mark.parametrize("action", list(LookupAction))
def test_lookup_id_actions(action: LookupAction) -> None:
    lookup = "lookupId=0" if action in (LookupAction.FIRST, LookupAction.LAST) else f"lookupId={1 << 63}"
    call = call_of(
        operation("ReceiveByLookupId", "queue=q", lookup, f"action={action.value}", "transaction=t")
    )
    assert call == calls.ByLookupId("q", action, int(lookup.split("=")[1]), True, "t")
    assert call.operation == "ReceiveByLookupId"
    peek = call_of(operation("PeekByLookupId", "queue=q", lookup, f"action={action.value}"))
    assert peek == calls.ByLookupId("q", action, int(lookup.split("=")[1]), False)
    assert peek.operation == "PeekByLookupId"


def test_lookup_defaults_current_and_first_needs_no_lookup_id() -> None:
    assert call_of(operation("PeekByLookupId", "queue=q", "lookupId=7")) == calls.ByLookupId(
        "q", LookupAction.CURRENT, 7, False
    )
    assert call_of(operation("PeekByLookupId", "queue=q", "action=first")) == calls.ByLookupId(
        "q", LookupAction.FIRST, 0, False
    )


@pytest.mark.parametrize("action", ["current", "next", "previous"])
def test_relative_lookups_need_a_lookup_id(action: str) -> None:
    detail = client_fault(
        operation("PeekByLookupId", "queue=q", f"action={action}"),
        MqErrorCode.MQ_ERROR_INSUFFICIENT_PROPERTIES,
    )
    assert "lookupId" in detail


def test_queue_administration() -> None:
    create = operation(
        "CreateQueue",
        "path=private$/orders",
        "label=Orders",
        "transactional=true",
        "quota=100",
        "journal=1",
        "journalQuota=50",
        "basePriority=-3",
    )
    assert call_of(create) == calls.CreateQueue(
        "private$/orders", QueueSettings("Orders", True, 100, True, 50, -3)
    )
    assert call_of(operation("CreateQueue", "path=q")) == calls.CreateQueue("q", QueueSettings())
    assert call_of(operation("GetQueue", "path=q")) == calls.GetQueue("q")
    assert call_of(operation("DeleteQueue", "path=q")) == calls.DeleteQueue("q")
    assert call_of(operation("PurgeQueue", "path=q")) == calls.PurgeQueue("q")
    assert call_of(operation("ListQueues")) == calls.ListQueues()


def test_transactions() -> None:
    assert call_of(operation("BeginTransaction")) == calls.BeginTransaction()
    assert call_of(operation("CommitTransaction", "transaction=t")) == calls.EndTransaction("t", commit=True)
    assert call_of(operation("AbortTransaction", "transaction=t")) == calls.EndTransaction("t", commit=False)


def test_unqualified_children_a_header_without_must_understand_and_no_content_type() -> None:
    data = envelope(
        "<gw:GetQueue><path>q</path></gw:GetQueue>", header='<x:Trace xmlns:x="urn:other">1</x:Trace>'
    )
    assert call_of(data, content_type=None) == calls.GetQueue("q")


def test_utf16_as_the_content_type_says() -> None:
    text = operation("GetQueue", "path=private$/café").decode()
    assert call_of(text.encode("utf-16-le"), "text/xml; charset=utf-16le") == calls.GetQueue("private$/café")


# -- faults -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"not xml",
        b"<s:Envelope xmlns:s='http://schemas.xmlsoap.org/soap/envelope/'><s:Body>",
        operation("GetQueue", "path=q")[:-5],
        b'<?xml version="1.0"?><!DOCTYPE e [<!ENTITY x "boom">]><e>&x;</e>',
        b"\xff\xfe\x00garbage",
    ],
    ids=["empty", "text", "unclosed", "truncated", "dtd", "bad-encoding"],
)
def test_not_well_formed_xml_is_a_client_fault(data: bytes) -> None:
    client_fault(data, MqErrorCode.MQ_ERROR_BAD_XML_FORMAT)


def test_an_entity_is_never_expanded() -> None:
    data = operation("GetQueue", "path=&lt;q&gt;")
    assert call_of(data) == calls.GetQueue("<q>")
    external = b'<!DOCTYPE e SYSTEM "file:///etc/passwd">' + operation("GetQueue", "path=q")
    client_fault(external, MqErrorCode.MQ_ERROR_BAD_XML_FORMAT)


def test_deep_nesting_and_size_are_bounded() -> None:
    deep = "<gw:x>" * 100 + "</gw:x>" * 100
    detail = client_fault(operation("GetQueue", deep), MqErrorCode.MQ_ERROR_BAD_XML_FORMAT)
    assert "deeper" in detail
    small = request_limits(max_body_bytes=10)
    big = operation("Send", "queue=q", f"<gw:message><gw:body>{'A' * 70_000}</gw:body></gw:message>")
    fault = fault_of(big, small)
    assert fault.error.code is MqErrorCode.MQ_ERROR_BAD_XML_FORMAT and "larger" in fault.error.detail


@pytest.mark.parametrize(
    "body",
    [
        "<gw:Frobnicate/>",
        '<x:Send xmlns:x="urn:not-ours"><x:queue>q</x:queue></x:Send>',
        "<Send><queue>q</queue></Send>",
        "<gw:SendResponse/>",
    ],
)
def test_an_unknown_operation_is_a_client_fault(body: str) -> None:
    detail = client_fault(envelope(body), MqErrorCode.MQ_ERROR_UNSUPPORTED_OPERATION)
    assert "not an operation" in detail


@pytest.mark.parametrize(
    ("data", "missing"),
    [
        (operation("Send", "queue=q"), "message"),
        (operation("Send", "<gw:message/>"), "queue"),
        (operation("GetQueue"), "path"),
        (operation("CommitTransaction"), "transaction"),
    ],
)
def test_a_missing_required_element_is_a_client_fault(data: bytes, missing: str) -> None:
    assert missing in client_fault(data, MqErrorCode.MQ_ERROR_INSUFFICIENT_PROPERTIES)


@pytest.mark.parametrize(
    ("child", "expected"),
    [
        ("timeout=soon", "integer"),
        ("timeout=-1", "between 0 and 4294967295"),
        (f"timeout={1 << 32}", "between"),
        ("timeout=" + "9" * 30, "integer"),
        ("transaction=<gw:x/>", "must hold text"),
        ("queue=again", "occurs twice"),
        ("wait=1", "not expected"),
    ],
)
def test_invalid_values_are_client_faults(child: str, expected: str) -> None:
    data = operation("Receive", "queue=q", child)
    assert expected in client_fault(data, MqErrorCode.MQ_ERROR_INVALID_PARAMETER)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("<gw:body>not base64!</gw:body>", "base64"),
        ("<gw:delivery>fast</gw:delivery>", "express, recoverable"),
        ("<gw:priority>256</gw:priority>", "between 0 and 255"),
        ("<gw:label>a</gw:label><gw:label>b</gw:label>", "occurs twice"),
    ],
)
def test_invalid_message_properties_are_client_faults(message: str, expected: str) -> None:
    data = operation("Send", "queue=q", f"<gw:message>{message}</gw:message>")
    assert expected in client_fault(data, MqErrorCode.MQ_ERROR_INVALID_PARAMETER)


def test_create_queue_booleans_are_xsd_booleans() -> None:
    data = operation("CreateQueue", "path=q", "transactional=yes")
    assert "true or false" in client_fault(data, MqErrorCode.MQ_ERROR_INVALID_PARAMETER)


@pytest.mark.parametrize(
    "data",
    [
        b'<e:Envelope xmlns:e="urn:x"><e:Body/></e:Envelope>',
        envelope(""),
        envelope("<gw:ListQueues/><gw:ListQueues/>"),
        b'<s:Envelope xmlns:s="http://schemas.xmlsoap.org/soap/envelope/"><s:Header/></s:Envelope>',
    ],
    ids=["not-soap", "empty-body", "two-operations", "no-body"],
)
def test_an_envelope_of_the_wrong_shape_is_a_client_fault(data: bytes) -> None:
    client_fault(data, MqErrorCode.MQ_ERROR_INVALID_PARAMETER)


def test_soap_12_is_a_version_mismatch() -> None:
    fault = fault_of(envelope("<gw:ListQueues/>", namespace=SOAP_12))
    assert fault.fault_code is FaultCode.VERSION_MISMATCH


def test_a_header_that_must_be_understood_is_refused() -> None:
    header = '<x:Security xmlns:x="urn:sec" s:mustUnderstand="1"/>'
    fault = fault_of(envelope("<gw:ListQueues/>", header=header))
    assert fault.fault_code is FaultCode.MUST_UNDERSTAND
    assert "Security" in fault.error.detail


def test_an_unknown_charset_is_a_client_fault() -> None:
    fault = fault_of(operation("ListQueues"), content_type="text/xml; charset=ebcdic")
    assert fault.fault_code is FaultCode.CLIENT
    assert fault.error.code is MqErrorCode.MQ_ERROR_BAD_XML_FORMAT


def test_infinite_timers_are_the_unsigned_maximum() -> None:
    message = f"<gw:message><gw:timeToBeReceived>{INFINITE}</gw:timeToBeReceived></gw:message>"
    call = call_of(operation("Send", "queue=q", message))
    assert isinstance(call, calls.Send) and call.properties.time_to_be_received == INFINITE
