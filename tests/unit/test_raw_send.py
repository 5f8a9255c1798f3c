"""A raw send: the body as it came, properties from X-Msmq-* headers (app/http.py)."""

from __future__ import annotations

import base64
import dataclasses

import pytest
from starlette.requests import Request
from starlette.types import Message

from app.http import message_from_request
from app.message_schemas import MessageIn
from qm.errors import MqError
from qm.model import MessageProperties

BODY = bytes(range(256)) * 3


def request(*headers: tuple[str, str], body: bytes = BODY) -> Request:
    async def receive() -> Message:
        return {"type": "http.request", "body": body, "more_body": False}

    raw = [(name.lower().encode(), value.encode("latin-1")) for name, value in headers]
    return Request({"type": "http", "headers": raw}, receive)


async def sent(*headers: tuple[str, str]) -> MessageProperties:
    return await message_from_request(request(*headers), 4096)


@pytest.mark.anyio
async def test_the_properties_are_those_of_the_json_message_with_the_body_in_base64() -> None:
    properties = await sent(
        ("Content-Type", "application/octet-stream"),
        ("X-Msmq-Label", "caf%C3%A9"),
        ("X-Msmq-Priority", "6"),
        ("X-Msmq-Correlation-Id", base64.b64encode(bytes(20)).decode()),
        ("X-Msmq-Delivery", "Express"),
        ("X-Msmq-Time-To-Reach-Queue", " 60 "),
    )
    assert (
        properties
        == MessageIn(
            body_base64=base64.b64encode(BODY).decode(),
            label="café",
            priority=6,
            correlation_id=base64.b64encode(bytes(20)).decode(),
            delivery="express",
            time_to_reach_queue=60,
        ).properties()
    )


@pytest.mark.anyio
async def test_a_repeated_header_counts_once_its_first_value() -> None:
    properties = await sent(("X-Msmq-Priority", "2"), ("X-Msmq-Priority", "7"), ("x-msmq-label", "a"))
    assert (properties.priority, properties.label, properties.body) == (2, "a", BODY)


@pytest.mark.anyio
async def test_of_two_unreadable_headers_the_first_property_is_named() -> None:
    """In the order of the properties (label, priority, ...), not of the headers."""
    with pytest.raises(MqError, match="X-Msmq-Priority"):
        await sent(("X-Msmq-Acknowledge", "many"), ("X-Msmq-Priority", "high"))


@pytest.mark.anyio
async def test_repeated_headers_give_the_same_properties_with_each_message_its_own_body() -> None:
    """The properties of a set of header texts are remembered (app.http._header_properties)."""
    headers = (("X-Msmq-Label", "same"), ("X-Msmq-Priority", "4"))
    first = await message_from_request(request(*headers, body=b"first"), 4096)
    second = await message_from_request(request(*reversed(headers), body=b"second"), 4096)
    assert (first.body, second.body) == (b"first", b"second")
    assert dataclasses.replace(first, body=b"") == dataclasses.replace(second, body=b"")
    assert (second.label, second.priority) == ("same", 4)


@pytest.mark.anyio
async def test_a_refused_header_is_refused_every_time() -> None:
    for _ in range(2):
        with pytest.raises(MqError, match="X-Msmq-Priority"):
            await sent(("X-Msmq-Priority", "high"))
        with pytest.raises(MqError, match="delivery"):
            await sent(("X-Msmq-Delivery", "sometimes"))
