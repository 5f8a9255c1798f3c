"""POST /api/queues/{path}/messages: JSON and raw sends, and every refusal storing nothing."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator

import httpx
import pytest

from tests.integration.support import (
    MAX_BODY_BYTES,
    assert_problem,
    create_queue,
    json_of,
    message_count,
    receive,
    send,
)

pytestmark = pytest.mark.anyio

QUEUE = "private$/orders"
MESSAGES = f"/api/queues/{QUEUE}/messages"
CORRELATION = bytes(range(20))


@pytest.fixture
async def queue(client: httpx.AsyncClient) -> str:
    await create_queue(client, QUEUE)
    return QUEUE


async def test_a_json_text_body_round_trips_with_its_properties(
    client: httpx.AsyncClient, queue: str
) -> None:
    sent = await send(
        client,
        queue,
        "order 1 — ünïcode",
        label="new order",
        priority=5,
        app_specific=42,
        body_type=8,
        correlation_id=base64.b64encode(CORRELATION).decode(),
        response_queue="DIRECT=OS:.\\private$\\replies",
        delivery="express",
    )
    assert sent["queue"] == queue and sent["priority"] == 5 and sent["transaction"] is None
    assert sent["lookup_id"].isdigit()
    assert sent["message_id"].startswith("{") and "}\\" in sent["message_id"]
    message = await receive(client, queue)
    assert message is not None
    assert message["lookup_id"] == sent["lookup_id"] and message["message_id"] == sent["message_id"]
    assert message["body"] == "order 1 — ünïcode"
    assert message["body_base64"] is None  # the body is in the answer once, as text
    assert message["body_size"] == len("order 1 — ünïcode".encode())
    assert (message["label"], message["priority"], message["app_specific"], message["body_type"]) == (
        "new order",
        5,
        42,
        8,
    )
    assert base64.b64decode(message["correlation_id"]) == CORRELATION
    assert message["response_queue"] == "DIRECT=OS:.\\private$\\replies"
    assert message["delivery"] == "express"
    assert message["message_class_name"] == "MQMSG_CLASS_NORMAL"


async def test_defaults_of_a_json_send(client: httpx.AsyncClient, queue: str) -> None:
    await send(client, queue, "plain")
    message = await receive(client, queue)
    assert message is not None
    assert (message["priority"], message["label"], message["delivery"]) == (3, "", "recoverable")
    assert (message["time_to_be_received"], message["time_to_reach_queue"]) == (4294967295, 4294967295)
    assert message["correlation_id"] is None and message["abort_count"] == 0


async def test_a_json_base64_body_keeps_binary_bytes(client: httpx.AsyncClient, queue: str) -> None:
    payload = b"\x00\xff\xfe binary \x80"
    response = await client.post(MESSAGES, json={"body_base64": base64.b64encode(payload).decode()})
    json_of(response, 201)
    message = await receive(client, queue)
    assert message is not None
    assert message["body"] is None  # not UTF-8
    assert base64.b64decode(message["body_base64"]) == payload
    assert message["body_size"] == len(payload)


async def test_an_empty_json_message_has_an_empty_body(client: httpx.AsyncClient, queue: str) -> None:
    json_of(await client.post(MESSAGES, json={}), 201)
    message = await receive(client, queue)
    assert message is not None and message["body"] == "" and message["body_size"] == 0


async def test_a_raw_send_takes_properties_from_x_msmq_headers(client: httpx.AsyncClient, queue: str) -> None:
    payload = b"\x01\x02 raw bytes \xff"
    headers = {
        "content-type": "application/octet-stream",
        "X-Msmq-Label": "caf%C3%A9 order",
        "X-Msmq-Priority": "6",
        "X-Msmq-App-Specific": "7",
        "X-Msmq-Body-Type": "17",
        "X-Msmq-Correlation-Id": base64.b64encode(CORRELATION).decode(),
        "X-Msmq-Response-Queue": "DIRECT=OS:.%5Cprivate$%5Creplies",
        "X-Msmq-Delivery": "Express",
        "X-Msmq-Time-To-Be-Received": "3600",
        "X-Msmq-Extension": base64.b64encode(b"ext").decode(),
    }
    sent = json_of(await client.post(MESSAGES, content=payload, headers=headers), 201)
    assert sent["priority"] == 6
    message = await receive(client, queue)
    assert message is not None
    assert base64.b64decode(message["body_base64"]) == payload
    assert (message["label"], message["priority"], message["app_specific"]) == ("café order", 6, 7)
    assert message["body_type"] == 17
    assert base64.b64decode(message["correlation_id"]) == CORRELATION
    assert message["response_queue"] == "DIRECT=OS:.\\private$\\replies"
    assert message["delivery"] == "express"
    assert message["time_to_be_received"] == 3600
    assert base64.b64decode(message["extension_base64"]) == b"ext"


async def test_any_non_json_content_type_is_a_raw_body(client: httpx.AsyncClient, queue: str) -> None:
    response = await client.post(
        MESSAGES, content=b'{"body": "not parsed"}', headers={"content-type": "text/plain"}
    )
    json_of(response, 201)
    message = await receive(client, queue)
    assert message is not None and message["body"] == '{"body": "not parsed"}'


async def refused(client: httpx.AsyncClient, response: httpx.Response, status: int, mq_error: str) -> None:
    """The send was refused with this problem, and nothing was stored."""
    assert_problem(response, status, mq_error)
    assert await message_count(client, QUEUE) == 0
    assert await receive(client, QUEUE) is None


async def test_malformed_json_is_400(client: httpx.AsyncClient, queue: str) -> None:
    for text in (b"{bad", b"", b"[1, 2]", b'"a string"', b"\xff\xfe"):
        response = await client.post(MESSAGES, content=text, headers={"content-type": "application/json"})
        await refused(client, response, 400, "MQ_ERROR_INVALID_PARAMETER")


async def test_bad_base64_is_400(client: httpx.AsyncClient, queue: str) -> None:
    for fields in ({"body_base64": "not base64!"}, {"body_base64": "YQ"}, {"correlation_id": "%%%"}):
        await refused(client, await client.post(MESSAGES, json=fields), 400, "MQ_ERROR_INVALID_PARAMETER")


async def test_both_body_and_body_base64_is_400(client: httpx.AsyncClient, queue: str) -> None:
    response = await client.post(MESSAGES, json={"body": "a", "body_base64": "YQ=="})
    await refused(client, response, 400, "MQ_ERROR_INVALID_PARAMETER")


async def test_an_unknown_field_is_400(client: httpx.AsyncClient, queue: str) -> None:
    response = await client.post(MESSAGES, json={"body": "a", "colour": "blue"})
    await refused(client, response, 400, "MQ_ERROR_INVALID_PARAMETER")


async def test_out_of_range_properties_are_400(client: httpx.AsyncClient, queue: str) -> None:
    for fields in (
        {"priority": 9},
        {"priority": -1},
        {"app_specific": 1 << 32},
        {"acknowledge": 16},
        {"journal": 4},
        {"body_type": 70000},
        {"time_to_be_received": -1},
    ):
        response = await client.post(MESSAGES, json={"body": "x", **fields})
        await refused(client, response, 400, "MQ_ERROR_ILLEGAL_PROPERTY_VALUE")


async def test_a_label_of_250_characters_is_400_and_249_is_accepted(
    client: httpx.AsyncClient, queue: str
) -> None:
    response = await client.post(MESSAGES, json={"body": "x", "label": "l" * 250})
    await refused(client, response, 400, "MQ_ERROR_LABEL_TOO_LONG")
    await send(client, queue, "x", label="l" * 249)
    message = await receive(client, queue)
    assert message is not None and message["label"] == "l" * 249


async def test_a_correlation_id_must_have_20_bytes(client: httpx.AsyncClient, queue: str) -> None:
    response = await client.post(MESSAGES, json={"correlation_id": base64.b64encode(b"short").decode()})
    await refused(client, response, 400, "MQ_ERROR_ILLEGAL_PROPERTY_SIZE")


async def test_an_unreadable_header_is_400(client: httpx.AsyncClient, queue: str) -> None:
    for name, value in (
        ("X-Msmq-Priority", "high"),
        ("X-Msmq-App-Specific", "1.5"),
        ("X-Msmq-Delivery", "fast"),
    ):
        response = await client.post(MESSAGES, content=b"raw", headers={name: value})
        await refused(client, response, 400, "MQ_ERROR_INVALID_PARAMETER")
    response = await client.post(MESSAGES, content=b"raw", headers={"X-Msmq-Priority": "8"})
    await refused(client, response, 400, "MQ_ERROR_ILLEGAL_PROPERTY_VALUE")


async def test_an_oversize_raw_body_is_refused_from_content_length_with_413(
    client: httpx.AsyncClient, queue: str
) -> None:
    # The declared length alone decides: the few bytes actually sent are never read.
    declared = {"content-length": str(MAX_BODY_BYTES + 1), "content-type": "application/octet-stream"}
    response = await client.post(MESSAGES, content=b"tiny", headers=declared)
    problem = assert_problem(response, 413, "MQ_ERROR_INSUFFICIENT_RESOURCES")
    assert str(MAX_BODY_BYTES + 1) in problem["detail"]
    await refused(
        client,
        await client.post(MESSAGES, content=b"x" * (MAX_BODY_BYTES + 1)),
        413,
        "MQ_ERROR_INSUFFICIENT_RESOURCES",
    )


async def test_an_oversize_streamed_body_without_content_length_is_413(
    client: httpx.AsyncClient, queue: str
) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(4):
            yield b"y" * (MAX_BODY_BYTES // 2)

    response = await client.post(MESSAGES, content=chunks())
    assert "content-length" not in response.request.headers
    await refused(client, response, 413, "MQ_ERROR_INSUFFICIENT_RESOURCES")


async def test_an_oversize_json_body_is_413_like_a_raw_one(client: httpx.AsyncClient, queue: str) -> None:
    too_big = b"z" * (MAX_BODY_BYTES + 1)
    response = await client.post(MESSAGES, json={"body_base64": base64.b64encode(too_big).decode()})
    await refused(client, response, 413, "MQ_ERROR_INSUFFICIENT_RESOURCES")
    await refused(
        client,
        await client.post(MESSAGES, json={"body": "z" * (MAX_BODY_BYTES + 1)}),
        413,
        "MQ_ERROR_INSUFFICIENT_RESOURCES",
    )


async def test_a_body_of_exactly_the_limit_is_accepted(client: httpx.AsyncClient, queue: str) -> None:
    json_of(await client.post(MESSAGES, content=b"k" * MAX_BODY_BYTES), 201)
    json_of(await client.post(MESSAGES, json={"body": "j" * MAX_BODY_BYTES}), 201)
    assert await message_count(client, queue) == 2


async def test_sending_to_an_unknown_queue_is_404(client: httpx.AsyncClient) -> None:
    response = await client.post("/api/queues/private$/missing/messages", json={"body": "x"})
    assert_problem(response, 404, "MQ_ERROR_QUEUE_NOT_FOUND")


async def test_journal_and_system_queues_refuse_sends(client: httpx.AsyncClient, queue: str) -> None:
    for path in ("private$/orders;journal", "system$;deadletter", "system$;journal"):
        response = await client.post(f"/api/queues/{path}/messages", json={"body": "x"})
        assert_problem(response, 403, "MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION")
        assert await message_count(client, path) == 0
