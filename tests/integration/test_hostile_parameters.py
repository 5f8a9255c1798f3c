"""Numbers out of their column's range and text no store can hold, in every place a request
carries them (issue 17 item 2): a 400 problem (or the 404 / empty answer a well-formed but
absent lookup ID gets), never a 500, on both stores, and nothing changes. The rules are in
app/parameters.py."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from app.errors import PROBLEM_JSON
from soap.namespaces import SOAP_ENV
from soap.service import TARGET_NAMESPACE

pytestmark = pytest.mark.anyio

ABOVE_SIGNED = str(2**63)
UINT64_MAX = str(2**64 - 1)
ABOVE_UINT64 = str(2**64)
ABOVE_INT32 = str(2**31)
QUEUE = "/api/queues/private$/orders"
JSON = {"content-type": "application/json"}


def _json(text: str) -> dict[str, Any]:
    return {"content": text.encode(), "headers": JSON}


def _lines(text: str) -> dict[str, Any]:
    return {"content": text.encode() + b"\n", "headers": {"content-type": "application/x-ndjson"}}


DEEP = "[" * 5000 + "]" * 5000
LONG_INTEGER = "9" * 4301  # over Python's 4,300-digit limit for int(text)

REFUSED: list[tuple[str, str, dict[str, Any]]] = [
    # lookup IDs that are not 1 to 20 ASCII digits, or above 2^64-1
    ("GET", f"{QUEUE}/messages/{ABOVE_UINT64}", {}),
    ("GET", f"{QUEUE}/messages/²", {}),
    ("GET", f"{QUEUE}/messages/١٢", {}),
    ("GET", f"{QUEUE}/messages/%00", {}),
    ("GET", f"{QUEUE}/messages/{LONG_INTEGER}/next", {}),
    ("GET", f"{QUEUE}/messages?after={ABOVE_UINT64}", {}),
    ("GET", f"{QUEUE}/messages?after=²", {}),
    ("GET", f"{QUEUE}/messages?after=١٢", {}),
    # 32-bit columns
    ("GET", f"/api/outgoing-queues/{ABOVE_INT32}", {}),
    ("POST", f"/api/outgoing-queues/{ABOVE_INT32}/pause", {}),
    ("POST", f"/api/outgoing-queues/{ABOVE_INT32}/resume", {}),
    ("POST", f"/api/outgoing-queues/{ABOVE_INT32}/purge", {}),
    ("GET", f"/api/outgoing-queues/{LONG_INTEGER}", {}),
    ("GET", f"/api/outgoing-queues?after={ABOVE_INT32}", {}),
    ("DELETE", f"/api/outgoing-queues/{ABOVE_INT32}", {}),
    ("DELETE", f"/api/client-certificates/{ABOVE_INT32}", {}),
    ("DELETE", f"/api/client-certificates/{LONG_INTEGER}", {}),
    ("GET", f"/api/triggers/t/invocations?after={ABOVE_INT32}", {}),
    ("POST", f"/api/triggers/t/rules/r?position={ABOVE_INT32}", {}),
    # NUL as (or in) an ID or a queue path
    ("GET", "/api/outgoing-queues/%00", {}),
    ("GET", "/api/transactions/%00", {}),
    ("POST", "/api/transactions/%00/commit", {}),
    ("GET", "/api/cursors/%00", {}),
    ("GET", "/api/triggers/%00", {}),
    ("GET", "/api/rules/%00", {}),
    ("GET", "/api/queues/private$/ord%00ers", {}),
    ("POST", f"{QUEUE}/messages?transaction=%00", {"content": b"raw"}),
    ("POST", f"{QUEUE}/receive?transaction=%00", {}),
    # NUL and lone surrogates in JSON text, deep nesting, overlong integers
    ("POST", "/api/queues", _json('{"path": "private$/a", "label": "a\\u0000b"}')),
    ("POST", "/api/queues", _json('{"path": "private$/a", "label": "\\ud800"}')),
    ("POST", "/api/queues", _json('{"path": "private$/a\\u0000b"}')),
    ("POST", "/api/queues", _json('{"path": "private$/a\\udc00"}')),
    ("PATCH", QUEUE, _json('{"label": "a\\u0000b"}')),
    ("POST", "/api/queues", _json(DEEP)),
    ("POST", "/api/queues", _json(f'{{"path": "private$/a", "quota_kb": {LONG_INTEGER}}}')),
    ("POST", f"{QUEUE}/messages", _json('{"body": "x", "label": "a\\u0000b"}')),
    ("POST", f"{QUEUE}/messages", _json('{"body": "x", "label": "\\ud800"}')),
    ("POST", f"{QUEUE}/messages", _json('{"body": "\\ud800"}')),
    ("POST", f"{QUEUE}/messages", _json('{"body": "x", "response_queue": "DIRECT=OS:.\\\\a\\u0000"}')),
    ("POST", f"{QUEUE}/messages", _json('{"body": "x", "correlation_id": "\\u0000"}')),
    ("POST", f"{QUEUE}/messages", _json(DEEP)),
    ("POST", f"{QUEUE}/messages", _json(f'{{"body": "x", "priority": {LONG_INTEGER}}}')),
    ("POST", f"{QUEUE}/messages", {"content": b"raw", "headers": {"x-msmq-label": "a%00b"}}),
    # an import's lines
    ("POST", f"{QUEUE}/messages/import", _lines('{"body_base64": "", "label": "a\\u0000b"}')),
    ("POST", f"{QUEUE}/messages/import", _lines('{"body_base64": "", "label": "\\ud800"}')),
    ("POST", f"{QUEUE}/messages/import", _lines(DEEP)),
    ("POST", f"{QUEUE}/messages/import", _lines(f'{{"body_base64": "", "priority": {LONG_INTEGER}}}')),
    ("DELETE", f"{QUEUE}/messages/{ABOVE_UINT64}", {}),
    ("GET", f"{QUEUE}/messages/export?lookup_id=²", {}),
    # a JSON value of another type is not converted (schemathesis: `false` became a 0 KB quota)
    ("PATCH", "/api/queue-manager", _json('{"quota_kb": false}')),
    ("PATCH", "/api/queue-manager", _json('{"throttled": 0.0}')),
    ("POST", "/api/queues", _json('{"path": "private$/a", "transactional": 1}')),
    ("POST", f"{QUEUE}/messages", _json('{"body": "x", "priority": 3.0}')),
    ("POST", "/api/cursors", _json('{"queue": "private$/orders\\u0000"}')),
    ("POST", "/api/triggers", _json('{"name": "t\\u0000", "queue": "private$/orders"}')),
    ("POST", "/api/triggers", _json('{"name": "\\ud800", "queue": "private$/orders"}')),
    ("POST", "/api/triggers", _json(DEEP)),
    (
        "POST",
        "/api/rules",
        _json(
            '{"name": "r", "conditions": [{"property": "label", "operator": "contains", "value": "\\u0000"}]}'
        ),
    ),
]


async def _state(client: httpx.AsyncClient) -> list[Any]:
    """What a refused request must leave as it was."""
    answers = [
        await client.get("/api/queues"),
        await client.get(f"{QUEUE}/messages"),
        await client.get("/api/triggers"),
        await client.get("/api/rules"),
        await client.get("/api/queue-manager"),
    ]
    return [answer.json() for answer in answers]


@pytest.fixture
async def orders(client: httpx.AsyncClient) -> str:
    assert (await client.post("/api/queues", json={"path": "private$/orders"})).status_code == 201
    sent = await client.post(f"{QUEUE}/messages", json={"body": "the only message"})
    assert sent.status_code == 201
    return str(sent.json()["lookup_id"])


@pytest.mark.parametrize(
    ("method", "url", "request_arguments"), REFUSED, ids=[f"{m} {u[:70]}" for m, u, _ in REFUSED]
)
async def test_input_no_column_can_hold_is_a_400_problem_and_changes_nothing(
    client: httpx.AsyncClient, orders: str, method: str, url: str, request_arguments: dict[str, Any]
) -> None:
    before = await _state(client)
    response = await client.request(method, url, **request_arguments)
    assert response.status_code == 400, response.text
    assert response.headers["content-type"] == PROBLEM_JSON
    assert response.json()["mq_error"] in ("MQ_ERROR_INVALID_PARAMETER", "MQ_ERROR_ILLEGAL_QUEUE_PATHNAME")
    assert await _state(client) == before


ABSENT = [
    ("GET", f"{QUEUE}/messages/{ABOVE_SIGNED}"),
    ("GET", f"{QUEUE}/messages/{UINT64_MAX}"),
    ("GET", f"{QUEUE}/messages/{ABOVE_SIGNED}/next"),
    ("GET", f"{QUEUE}/messages/{UINT64_MAX}/next"),
    ("POST", f"{QUEUE}/messages/{UINT64_MAX}/receive"),
    ("POST", f"{QUEUE}/messages/{UINT64_MAX}/next/receive"),
]


@pytest.mark.parametrize(("method", "url"), ABSENT)
async def test_a_lookup_id_above_the_stores_range_is_a_valid_id_of_no_message(
    client: httpx.AsyncClient, orders: str, method: str, url: str
) -> None:
    before = await _state(client)
    response = await client.request(method, url)
    assert response.status_code == 404, response.text
    assert response.json()["mq_error"] == "MQ_ERROR_MESSAGE_NOT_FOUND"
    assert await _state(client) == before


@pytest.mark.parametrize("after", [ABOVE_SIGNED, UINT64_MAX])
async def test_browsing_after_a_lookup_id_above_the_stores_range_finds_nothing(
    client: httpx.AsyncClient, orders: str, after: str
) -> None:
    response = await client.get(f"{QUEUE}/messages", params={"after": after})
    assert response.status_code == 200, response.text
    assert response.json() == {"messages": [], "next_after": None}


async def test_a_nul_in_a_message_body_is_kept_it_is_bytes(client: httpx.AsyncClient, orders: str) -> None:
    body = "a\u0000" + "b" * 20  # text: JSON writes the NUL in six bytes, still shorter than base64
    sent = await client.post(f"{QUEUE}/messages", json={"body": body})
    assert sent.status_code == 201, sent.text
    peeked = await client.get(f"{QUEUE}/messages/{sent.json()['lookup_id']}")
    assert peeked.json()["body"] == body


def _soap(operation: str, lookup_id: str) -> bytes:
    return (
        f'<s:Envelope xmlns:s="{SOAP_ENV}" xmlns:gw="{TARGET_NAMESPACE}"><s:Body><gw:{operation}>'
        f"<gw:queue>private$/orders</gw:queue><gw:lookupId>{lookup_id}</gw:lookupId>"
        f"</gw:{operation}></s:Body></s:Envelope>"
    ).encode()


@pytest.mark.parametrize("operation", ["PeekByLookupId", "ReceiveByLookupId"])
@pytest.mark.parametrize(
    ("lookup_id", "expected"),
    [
        (UINT64_MAX, "MQ_ERROR_MESSAGE_NOT_FOUND"),
        (ABOVE_SIGNED, "MQ_ERROR_MESSAGE_NOT_FOUND"),
        (ABOVE_UINT64, "MQ_ERROR_INVALID_PARAMETER"),
    ],
)
async def test_soap_lookups_above_the_stores_range_are_faults_of_the_soap_api(
    client: httpx.AsyncClient, orders: str, operation: str, lookup_id: str, expected: str
) -> None:
    before = await _state(client)
    response = await client.post(
        "/soap", content=_soap(operation, lookup_id), headers={"content-type": "text/xml; charset=utf-8"}
    )
    assert response.status_code == 500, response.text  # a SOAP 1.1 fault
    assert response.headers["content-type"] == "text/xml; charset=utf-8"
    assert f"<gw:name>{expected}</gw:name>" in response.text or f">{expected}<" in response.text
    assert await _state(client) == before
