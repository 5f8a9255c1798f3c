"""SOAP API responses, faults and the WSDL: every response the encoder writes is valid by the
schema the WSDL publishes, so a client generated from the WSDL can read it."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from lxml import etree

from qm.errors import MqError, MqErrorCode
from qm.model import Message, MessageProperties, Queue, QueueSettings
from qm.paths import parse_queue_path
from soap.namespaces import SOAP_ENV
from soap.service import (
    TARGET_NAMESPACE,
    FaultCode,
    ServiceFault,
    fault_envelope,
    message_values,
    queue_values,
    response_envelope,
    sent_values,
    transaction_values,
    wsdl_document,
)
from soap.service.decode import read_fields
from soap.service.schema import MESSAGE, OPERATIONS
from soap.service.wsdl import WSDL, WSDL_SOAP, XSD

NOW = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
NS = {"s": SOAP_ENV, "gw": TARGET_NAMESPACE, "wsdl": WSDL, "soap": WSDL_SOAP, "xsd": XSD}


def sample_message(**properties: Any) -> Message:
    return Message(
        lookup_id=(7 << 56) | 5,
        queue_id=1,
        message_id="{5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93}\\5",
        properties=MessageProperties(body=b"\x00\xffbody", label="order", **properties),
        sent_time=NOW,
        arrived_time=NOW,
        source_machine=uuid.UUID(int=1),
        ttbr_deadline=None,
        ttrq_deadline=None,
        first_in_transaction=True,
        last_in_transaction=False,
        abort_count=2,
    )


SAMPLE_QUEUE = Queue(1, parse_queue_path("private$/orders"), QueueSettings("Orders"), NOW, NOW, 3, 21)
TRANSACTION = transaction_values("3f2b", NOW, NOW)
RESPONSES: dict[str, dict[str, Any]] = {
    "Send": sent_values(sample_message(), "private$/orders"),
    "Receive": {"message": message_values(sample_message(correlation_id=bytes(20)), "private$/orders")},
    "Peek": {"message": None},
    "ReceiveByLookupId": {"message": message_values(sample_message(), "q")},
    "PeekByLookupId": {"message": message_values(sample_message(response_queue="DIRECT=OS:.\\q"), "q")},
    "CreateQueue": {"queue": queue_values(SAMPLE_QUEUE)},
    "GetQueue": {"queue": queue_values(SAMPLE_QUEUE)},
    "ListQueues": {"queue": [queue_values(SAMPLE_QUEUE), queue_values(SAMPLE_QUEUE)]},
    "DeleteQueue": {"messagesDropped": 3},
    "PurgeQueue": {"purged": 0},
    "BeginTransaction": {"transaction": TRANSACTION},
    "CommitTransaction": {},
    "AbortTransaction": {},
}


@pytest.fixture(scope="module")
def schema() -> etree.XMLSchema:
    """The XML Schema inside the WSDL's types, with the SOAP envelope's elements left lax."""
    wsdl = etree.fromstring(wsdl_document("http://gw01/soap"))
    [xsd] = wsdl.findall("wsdl:types/xsd:schema", NS)
    return etree.XMLSchema(xsd)


def body_child(document: bytes) -> Any:
    root = etree.fromstring(document)
    assert root.tag == f"{{{SOAP_ENV}}}Envelope"
    [child] = root.find("s:Body", NS)
    return child


def test_every_operation_has_a_sample_response() -> None:
    assert sorted(RESPONSES) == sorted(operation.name for operation in OPERATIONS)


@pytest.mark.parametrize("operation", sorted(RESPONSES))
def test_responses_are_valid_by_the_published_schema(operation: str, schema: etree.XMLSchema) -> None:
    response = body_child(response_envelope(operation, RESPONSES[operation]))
    assert response.tag == f"{{{TARGET_NAMESPACE}}}{operation}Response"
    schema.assertValid(etree.ElementTree(response))


def test_the_schema_check_can_fail(schema: etree.XMLSchema) -> None:
    response = body_child(response_envelope("PurgeQueue", {"purged": 1}))
    response[0].text = "-1"
    assert not schema.validate(etree.ElementTree(response))


def test_a_message_reads_back_as_written() -> None:
    message = sample_message(correlation_id=bytes(range(20)), admin_queue=".\\private$\\admin")
    written = body_child(response_envelope("Receive", {"message": message_values(message, "q")}))
    read = read_fields(written[0], MESSAGE.fields)
    expected = message_values(message, "q")
    assert read.pop("sentTime") == read.pop("arrivedTime") == NOW.isoformat()
    for name in ("sentTime", "arrivedTime", "responseQueue", "destinationQueue"):
        expected.pop(name)
    assert read == expected


def test_text_xml_cannot_carry_becomes_a_replacement_character() -> None:
    """A label with a control character (REST accepts it) must not make a received message
    unreadable: it is written with U+FFFD in its place."""
    message = sample_message(response_queue="bad\x01queue")
    written = body_child(response_envelope("Peek", {"message": message_values(message, "q\x00")}))
    assert written.find("gw:message/gw:responseQueue", NS).text == "bad\ufffdqueue"
    assert written.find("gw:message/gw:queue", NS).text == "q\ufffd"


def test_a_required_value_missing_from_a_response_is_a_bug() -> None:
    with pytest.raises(ValueError, match="purged"):
        response_envelope("PurgeQueue", {})


@pytest.mark.parametrize("fault_code", list(FaultCode))
def test_faults_carry_the_mq_error_name_and_code(fault_code: FaultCode, schema: etree.XMLSchema) -> None:
    error = MqError(MqErrorCode.MQ_ERROR_QUEUE_NOT_FOUND, "no queue private$/orders")
    fault = body_child(fault_envelope(ServiceFault(fault_code, error)))
    assert fault.tag == f"{{{SOAP_ENV}}}Fault"
    assert [child.tag for child in fault] == ["faultcode", "faultstring", "detail"]
    prefix, _, local = fault.findtext("faultcode").partition(":")
    assert fault.nsmap[prefix] == SOAP_ENV and local == fault_code.value
    assert fault.findtext("faultstring") == "MQ_ERROR_QUEUE_NOT_FOUND (0xC00E0003): no queue private$/orders"
    [detail] = fault.find("detail")
    schema.assertValid(etree.ElementTree(detail))
    assert detail.findtext("gw:name", namespaces=NS) == "MQ_ERROR_QUEUE_NOT_FOUND"
    assert detail.findtext("gw:code", namespaces=NS) == "0xC00E0003"
    assert detail.findtext("gw:description", namespaces=NS) == "no queue private$/orders"


def test_the_wsdl_names_every_operation_and_the_address_it_was_given() -> None:
    wsdl = etree.fromstring(wsdl_document('http://gw01:8080/soap?a="b"&c'))
    port_type = wsdl.find("wsdl:portType", NS)
    assert [operation.get("name") for operation in port_type] == [operation.name for operation in OPERATIONS]
    assert (
        wsdl.find("wsdl:service/wsdl:port/soap:address", NS).get("location")
        == 'http://gw01:8080/soap?a="b"&c'
    )
    actions = [element.get("soapAction") for element in wsdl.iterfind("wsdl:binding//soap:operation", NS)]
    assert actions == [f"{TARGET_NAMESPACE}#{operation.name}" for operation in OPERATIONS]
