"""The SOAP API with zeep as a real client, over real HTTP to the gateway under uvicorn.

Per store, one server on a loopback port for the module (in-process: a new process costs
seconds of start-up on a busy machine); zeep loads the WSDL from it (GET /soap?wsdl) and
calls every operation through the address the WSDL gives. Each test works in queues of its
own. Bad input (malformed XML, unknown operation, missing element, oversize body) goes out as
raw HTTP, since zeep only writes valid requests; the server must answer each with a Client
fault and keep serving.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import requests
import zeep
import zeep.exceptions
from lxml import etree

from app.settings import Settings
from soap.namespaces import SOAP_ENV
from soap.service import TARGET_NAMESPACE
from tests.conftest import STORES
from tests.databases import PostgresDatabases, SqliteDatabases
from tests.inprocess_gateway import InProcessGateway
from tests.integration.test_errors import store_outage

pytestmark = pytest.mark.slow
MAX_BODY_BYTES = 4096
"""The server's body cap: small, so an oversize request is cheap to send."""
TIMEOUT_S = 10.0
INFINITE = 0xFFFFFFFF
NS = {"gw": TARGET_NAMESPACE, "s": SOAP_ENV}


@dataclass
class Gateway:
    base_url: str
    database_url: str
    client: zeep.Client
    http: httpx.Client

    @property
    def service(self) -> Any:
        return self.client.service


@pytest.fixture(scope="module", params=STORES)
def gateway(request: pytest.FixtureRequest, sqlite_databases: SqliteDatabases) -> Iterator[Gateway]:
    databases: SqliteDatabases | PostgresDatabases = (
        sqlite_databases if request.param == "sqlite" else request.getfixturevalue("postgres_databases")
    )
    with databases.dedicated_database() as database_url:
        server = InProcessGateway(
            Settings(
                database_url=database_url,
                max_body_bytes=MAX_BODY_BYTES,
                allowed_hosts="127.0.0.1,gw01.example.net",
            )
        )
        session = requests.Session()
        try:
            server.start()
            transport = zeep.Transport(  # type: ignore[no-untyped-call]  # zeep has no annotations
                session=session, timeout=TIMEOUT_S, operation_timeout=TIMEOUT_S
            )
            client = zeep.Client(f"{server.base_url}/soap?wsdl", transport=transport)  # type: ignore[no-untyped-call]
            with httpx.Client(base_url=server.base_url, timeout=TIMEOUT_S) as http:
                yield Gateway(server.base_url, database_url, client, http)
        finally:
            session.close()
            server.stop()


def new_queue(gateway: Gateway, **settings: Any) -> str:
    path = f"private$/soap-{uuid.uuid4().hex[:10]}"
    created = gateway.service.CreateQueue(path=path, **settings)
    assert created.path == path
    return path


def fault_of(call: Any, *args: Any, **kwargs: Any) -> tuple[str, str, str]:
    """(faultcode, MQ_ERROR name, hex code) of a call that must fail."""
    with pytest.raises(zeep.exceptions.Fault) as raised:
        call(*args, **kwargs)
    fault = raised.value
    [error] = fault.detail
    name, code = error.findtext("gw:name", namespaces=NS), error.findtext("gw:code", namespaces=NS)
    assert fault.message == f"{name} ({code}): {error.findtext('gw:description', namespaces=NS)}"
    return fault.code, name, code


def test_the_wsdl_points_at_the_host_the_client_used(gateway: Gateway) -> None:
    assert gateway.client.service._binding_options["address"] == f"{gateway.base_url}/soap"
    wsdl = gateway.http.get("/soap?wsdl", headers={"Host": "gw01.example.net:8080"})
    assert wsdl.status_code == 200 and wsdl.headers["content-type"] == "text/xml; charset=utf-8"
    address = etree.fromstring(wsdl.content).find(".//{http://schemas.xmlsoap.org/wsdl/soap/}address")
    assert address.get("location") == "http://gw01.example.net:8080/soap"


def test_queue_administration(gateway: Gateway) -> None:
    service = gateway.service
    path = new_queue(gateway, label="Orders", journal=True, quota=100, basePriority=-2)
    queue = service.GetQueue(path=path)
    assert (queue.pathname, queue.kind, queue.label, queue.journal) == (
        path.replace("/", "\\"),
        "private",
        "Orders",
        True,
    )
    assert (queue.quota, queue.journalQuota, queue.basePriority, queue.transactional) == (
        100,
        INFINITE,
        -2,
        False,
    )
    assert queue.createTime.tzinfo is not None and queue.isJournal is False
    for body in (b"one", b"two"):
        service.Send(queue=path, message={"body": body})
    assert (service.GetQueue(path=path).messageCount, service.GetQueue(path=path).byteCount) == (2, 6)
    listed = {queue.path: queue for queue in service.ListQueues()}
    assert listed[path].messageCount == 2 and f"{path};journal" in listed
    assert service.PurgeQueue(path=path) == 2
    service.Send(queue=path, message={"body": b"three"})
    assert service.DeleteQueue(path=path) == 1
    assert fault_of(service.GetQueue, path=path) == ("soap:Client", "MQ_ERROR_QUEUE_NOT_FOUND", "0xC00E0003")
    assert fault_of(service.CreateQueue, path="private$/a,b")[1] == "MQ_ERROR_ILLEGAL_QUEUE_PATHNAME"
    existing = new_queue(gateway)
    assert fault_of(service.CreateQueue, path=existing)[1:] == ("MQ_ERROR_QUEUE_EXISTS", "0xC00E0005")


def test_send_peek_and_receive_carry_every_property(gateway: Gateway) -> None:
    service = gateway.service
    path = new_queue(gateway)
    properties = {
        "body": bytes(range(256)),
        "label": "new order",
        "bodyType": 4113,
        "priority": 6,
        "class": 0,
        "correlationId": b"c" * 20,
        "appSpecific": 0xFFFFFFFF,
        "extension": b"\x01\x02",
        "responseQueue": "DIRECT=OS:.\\private$\\replies",
        "adminQueue": "DIRECT=OS:.\\private$\\admin",
        "acknowledge": 0,
        "journal": 0,
        "delivery": "express",
        "timeToBeReceived": 3600,
        "timeToReachQueue": 600,
    }
    sent = service.Send(queue=path, message=properties)
    assert (sent.queue, sent.priority) == (path, 6)
    peeked = service.Peek(queue=path)
    assert peeked is not None and (peeked.lookupId, peeked.messageId) == (sent.lookupId, sent.messageId)
    received = service.Receive(queue=path, timeout=1000)
    for message in (peeked, received):
        assert {name: message[name] for name in properties if name != "timeToBeReceived"} == {
            name: value for name, value in properties.items() if name != "timeToBeReceived"
        }
        assert 0 < message.timeToBeReceived <= 3600
        assert (message.queue, message.bodySize, message.abortCount) == (path, 256, 0)
        assert message.sentTime.tzinfo is not None and message.arrivedTime >= message.sentTime
    assert service.Receive(queue=path) is None
    assert service.Peek(queue=path, timeout=50) is None


def test_receive_takes_messages_in_priority_order(gateway: Gateway) -> None:
    service = gateway.service
    path = new_queue(gateway)
    for priority in (1, 6, 3):
        service.Send(queue=path, message={"body": str(priority).encode(), "priority": priority})
    assert [service.Receive(queue=path).body for _ in range(3)] == [b"6", b"3", b"1"]


def test_lookup_id_navigation(gateway: Gateway) -> None:
    service = gateway.service
    path = new_queue(gateway)
    ids = [service.Send(queue=path, message={"body": str(n).encode()}).lookupId for n in range(3)]

    def peek(action: str, lookup_id: int | None = None) -> bytes:
        message = service.PeekByLookupId(queue=path, lookupId=lookup_id, action=action)
        return bytes(message.body)

    assert [peek("first"), peek("last"), peek("current", ids[1])] == [b"0", b"2", b"1"]
    assert [peek("next", ids[0]), peek("previous", ids[2])] == [b"1", b"1"]
    assert service.PeekByLookupId(queue=path, lookupId=ids[1]).lookupId == ids[1]  # current by default
    assert service.ReceiveByLookupId(queue=path, lookupId=ids[1]).body == b"1"
    assert fault_of(service.PeekByLookupId, queue=path, lookupId=ids[1]) == (
        "soap:Client",
        "MQ_ERROR_MESSAGE_NOT_FOUND",
        "0xC00E0088",
    )
    assert service.ReceiveByLookupId(queue=path, action="last").body == b"2"
    assert service.ReceiveByLookupId(queue=path, lookupId=0, action="first").body == b"0"
    assert fault_of(service.ReceiveByLookupId, queue=path, action="first")[1] == "MQ_ERROR_MESSAGE_NOT_FOUND"
    assert (
        fault_of(service.PeekByLookupId, queue=path, action="next")[1] == "MQ_ERROR_INSUFFICIENT_PROPERTIES"
    )


def test_transactions(gateway: Gateway) -> None:
    service = gateway.service
    path = new_queue(gateway, transactional=True)
    transaction = service.BeginTransaction()
    assert transaction.expiresAt > transaction.createdAt
    service.Send(queue=path, message={"body": b"paid", "priority": 5}, transaction=transaction.id)
    assert service.Peek(queue=path) is None  # not committed yet
    service.CommitTransaction(transaction=transaction.id)
    assert service.Peek(queue=path).priority == 0  # transactional messages have priority 0

    reading = service.BeginTransaction().id
    lookup_id = service.Receive(queue=path, transaction=reading).lookupId
    assert service.Peek(queue=path) is None  # locked by the transaction
    service.AbortTransaction(transaction=reading)
    back = service.PeekByLookupId(queue=path, lookupId=lookup_id)
    assert (back.body, back.abortCount) == (b"paid", 1)

    assert service.ReceiveByLookupId(queue=path, action="first", transaction="single").body == b"paid"
    service.Send(queue=path, message={"body": b"alone"}, transaction="single")
    assert fault_of(service.Send, queue=path, message={"body": b"x"})[1] == "MQ_ERROR_TRANSACTION_USAGE"
    assert fault_of(service.CommitTransaction, transaction=reading) == (
        "soap:Client",
        "MQ_ERROR_TRANSACTION_SEQUENCE",
        "0xC00E0051",
    )


def test_caller_errors_are_client_faults_with_the_mq_error(gateway: Gateway) -> None:
    service = gateway.service
    path = new_queue(gateway)
    cases: list[tuple[Any, dict[str, Any], str]] = [
        (service.Send, {"queue": path, "message": {"priority": 9}}, "MQ_ERROR_ILLEGAL_PROPERTY_VALUE"),
        (service.Send, {"queue": path, "message": {"label": "x" * 250}}, "MQ_ERROR_LABEL_TOO_LONG"),
        (
            service.Send,
            {"queue": path, "message": {"correlationId": b"short"}},
            "MQ_ERROR_ILLEGAL_PROPERTY_SIZE",
        ),
        (service.Send, {"queue": "private$/none", "message": {}}, "MQ_ERROR_QUEUE_NOT_FOUND"),
        (service.Receive, {"queue": path, "timeout": 10**9}, "MQ_ERROR_INVALID_PARAMETER"),
        (service.Receive, {"queue": path, "transaction": "nope"}, "MQ_ERROR_TRANSACTION_USAGE"),
        (service.DeleteQueue, {"path": "system$;deadletter"}, "MQ_ERROR_ACCESS_DENIED"),
    ]
    for call, arguments, name in cases:
        code, found, _ = fault_of(call, **arguments)
        assert (code, found) == ("soap:Client", name), arguments
    assert service.GetQueue(path=path).messageCount == 0  # nothing was stored


def test_a_body_over_the_cap_is_a_client_fault(gateway: Gateway) -> None:
    path = new_queue(gateway)
    code, name, _ = fault_of(gateway.service.Send, queue=path, message={"body": b"x" * (MAX_BODY_BYTES + 1)})
    assert (code, name) == ("soap:Client", "MQ_ERROR_INSUFFICIENT_RESOURCES")
    assert gateway.service.Send(queue=path, message={"body": b"x" * MAX_BODY_BYTES}).priority == 3


def test_a_full_queue_is_a_server_fault(gateway: Gateway) -> None:
    """The request was fine; the gateway cannot take it now (REST answers 507)."""
    path = new_queue(gateway, quota=1)
    gateway.service.Send(queue=path, message={"body": bytes(1000)})
    code, name, _ = fault_of(gateway.service.Send, queue=path, message={"body": bytes(1000)})
    assert (code, name) == ("soap:Server", "MQ_ERROR_INSUFFICIENT_RESOURCES")
    assert gateway.service.GetQueue(path=path).messageCount == 1


def test_a_store_failure_is_a_server_fault_and_the_gateway_serves_after_it(gateway: Gateway) -> None:
    path = new_queue(gateway)
    with store_outage(gateway.database_url):
        code, name, _ = fault_of(gateway.service.GetQueue, path=path)
        assert (code, name) == ("soap:Server", "MQ_ERROR_SERVICE_NOT_AVAILABLE")
    assert gateway.service.GetQueue(path=path).path == path


# -- bad input as raw HTTP ----------------------------------------------------------------


def post(gateway: Gateway, body: bytes, **headers: str) -> httpx.Response:
    return gateway.http.post(
        "/soap", content=body, headers={"Content-Type": "text/xml; charset=utf-8", **headers}
    )


def raw_fault(response: httpx.Response) -> tuple[str, str]:
    """(faultcode, MQ_ERROR name) of a fault response, checked against SOAP 1.1's shape."""
    assert response.status_code == 500, response.text
    assert response.headers["content-type"] == "text/xml; charset=utf-8"
    fault = etree.fromstring(response.content).find("s:Body/s:Fault", NS)
    assert fault is not None, response.text
    return fault.findtext("faultcode"), fault.findtext("detail/gw:MqError/gw:name", namespaces=NS)


def soap(body: str) -> bytes:
    return (
        f'<s:Envelope xmlns:s="{SOAP_ENV}" xmlns:gw="{TARGET_NAMESPACE}"><s:Body>{body}</s:Body></s:Envelope>'
    ).encode()


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"<s:Envelope><unclosed>", ("soap:Client", "MQ_ERROR_BAD_XML_FORMAT")),
        (b'<!DOCTYPE x [<!ENTITY a "b">]><x>&a;</x>', ("soap:Client", "MQ_ERROR_BAD_XML_FORMAT")),
        (soap("<gw:Explode/>"), ("soap:Client", "MQ_ERROR_UNSUPPORTED_OPERATION")),
        (soap("<gw:GetQueue/>"), ("soap:Client", "MQ_ERROR_INSUFFICIENT_PROPERTIES")),
        (
            soap("<gw:Peek><gw:queue>q</gw:queue><gw:timeout>x</gw:timeout></gw:Peek>"),
            ("soap:Client", "MQ_ERROR_INVALID_PARAMETER"),
        ),
    ],
    ids=["malformed", "entity", "unknown-operation", "missing-element", "invalid-value"],
)
def test_bad_requests_are_client_faults(gateway: Gateway, body: bytes, expected: tuple[str, str]) -> None:
    assert raw_fault(post(gateway, body)) == expected
    assert gateway.http.get("/healthz").status_code == 200


def test_an_oversize_request_is_refused_from_its_content_length(gateway: Gateway) -> None:
    path = new_queue(gateway)
    body = f"<gw:message><gw:body>{base64.b64encode(bytes(200_000)).decode()}</gw:body></gw:message>"
    response = post(gateway, soap(f"<gw:Send><gw:queue>{path}</gw:queue>{body}</gw:Send>"))
    assert raw_fault(response) == ("soap:Client", "MQ_ERROR_INSUFFICIENT_RESOURCES")
    assert "at most" in response.text
    assert gateway.service.GetQueue(path=path).messageCount == 0


def test_a_hand_written_request_with_unqualified_children_works(gateway: Gateway) -> None:
    """What docs/soap-api.md shows with curl: the operation's children need no prefix."""
    path = new_queue(gateway)
    sent = post(
        gateway, soap(f"<gw:Send><queue>{path}</queue><message><body>aGk=</body></message></gw:Send>")
    )
    assert sent.status_code == 200, sent.text
    response = etree.fromstring(sent.content).find("s:Body/gw:SendResponse", NS)
    assert response.findtext("gw:queue", namespaces=NS) == path
    assert gateway.service.Receive(queue=path).body == b"hi"


def test_other_methods_are_not_soap_calls(gateway: Gateway) -> None:
    assert gateway.http.put("/soap", content=b"").status_code == 405
    assert gateway.http.get("/soap").headers["content-type"] == "text/xml; charset=utf-8"


def test_decode_is_asked_for_and_answered_with_the_decoded_body(gateway: Gateway) -> None:
    service = gateway.service
    path = new_queue(gateway)
    service.Send(queue=path, message={"body": "Grüße".encode("utf-16-le"), "bodyType": 8})
    assert service.Peek(queue=path).decoded is None
    decoded = service.Peek(queue=path, decode=True).decoded
    assert (decoded.format, decoded.type, decoded.value) == ("variant", "VT_BSTR", '"Grüße"')
    first = service.PeekByLookupId(queue=path, action="first", decode=True)
    assert first.decoded.text == "Grüße"
    assert service.Receive(queue=path, decode=True).decoded.encoding == "utf-16-le"
