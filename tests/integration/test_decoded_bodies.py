"""decode=true on every message answer, and sends in .NET's formats (docs/bodies.md)."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.support import assert_problem, create_queue, json_of

pytestmark = pytest.mark.anyio

QUEUE = "private$/bodies"
SAMPLES = Path(__file__).parents[1] / "bodies" / "samples"
NRBF_INT = (SAMPLES / "nrbf-int32.bin").read_bytes()
NSB_HEADERS = (SAMPLES / "json-nservicebus.ext").read_bytes()


async def send(client: httpx.AsyncClient, path: str, **message: Any) -> dict[str, Any]:
    sent: dict[str, Any] = json_of(await client.post(f"/api/queues/{path}/messages", json=message), 201)
    return sent


@pytest.fixture
async def queue(client: httpx.AsyncClient) -> str:
    await create_queue(client, QUEUE)
    await send(client, QUEUE, body_base64=base64.b64encode(NRBF_INT).decode(), body_type=768, label="nrbf")
    return QUEUE


def decoded_int(message: dict[str, Any]) -> None:
    assert message["decoded"]["format"] == "nrbf"
    assert message["decoded"]["value"]["value"] == 42
    assert message["body_base64"] == base64.b64encode(NRBF_INT).decode()  # the raw body as before


async def test_no_decoded_body_unless_asked(client: httpx.AsyncClient, queue: str) -> None:
    assert "decoded" not in json_of(await client.get(f"/api/queues/{queue}/peek"))
    assert "decoded" not in json_of(await client.get(f"/api/queues/{queue}/peek", params={"decode": "false"}))


async def test_every_message_answer_decodes_on_request(client: httpx.AsyncClient, queue: str) -> None:
    on = {"decode": "true"}
    decoded_int(json_of(await client.get(f"/api/queues/{queue}/peek", params=on)))
    [browsed] = json_of(await client.get(f"/api/queues/{queue}/messages", params=on))["messages"]
    decoded_int(browsed)
    decoded_int(json_of(await client.get(f"/api/queues/{queue}/messages/first", params=on)))
    decoded_int(json_of(await client.get(f"/api/queues/{queue}/messages/{browsed['lookup_id']}", params=on)))
    cursor = json_of(await client.post("/api/cursors", json={"queue": queue}), 201)["id"]
    decoded_int(json_of(await client.get(f"/api/cursors/{cursor}/current", params=on)))
    locked = json_of(await client.post(f"/api/queues/{queue}/receive", params={**on, "two_phase": "true"}))
    decoded_int(locked)
    await client.post(f"/api/locks/{locked['lock_tag']}/abort")
    [batch] = json_of(await client.post(f"/api/queues/{queue}/receive", params={**on, "max_messages": "5"}))[
        "messages"
    ]
    decoded_int(batch)


async def test_a_raw_answer_is_the_body_as_it_is(client: httpx.AsyncClient, queue: str) -> None:
    raw = await client.post(
        f"/api/queues/{queue}/receive",
        params={"decode": "true"},
        headers={"Accept": "application/octet-stream"},
    )
    assert raw.status_code == 200 and raw.content == NRBF_INT


async def test_a_bad_decode_value_is_refused(client: httpx.AsyncClient, queue: str) -> None:
    assert_problem(
        await client.get(f"/api/queues/{queue}/peek", params={"decode": "maybe"}),
        400,
        "MQ_ERROR_INVALID_PARAMETER",
    )
    assert_problem(
        await client.get(f"/api/queues/{queue}/messages/first", params={"decode": "maybe"}),
        400,
        "MQ_ERROR_INVALID_PARAMETER",
    )


async def test_nservicebus_headers_and_a_malformed_header_document(client: httpx.AsyncClient) -> None:
    await create_queue(client, QUEUE)
    for extension in (NSB_HEADERS, NSB_HEADERS[:200]):
        await send(
            client, QUEUE, body='{"OrderId":"o-1"}', extension_base64=base64.b64encode(extension).decode()
        )
    good, bad = json_of(await client.get(f"/api/queues/{QUEUE}/messages", params={"decode": "true"}))[
        "messages"
    ]
    assert good["decoded"]["headers"]["NServiceBus.ContentType"] == "application/json"
    assert bad["decoded"]["value"] == {"OrderId": "o-1"} and bad["decoded"]["warnings"]
    assert bad["body"] == '{"OrderId":"o-1"}'


SENDS = [
    ({"format": "dotnet-xml-string", "body": "Hello <World> & \r\n"}, 0, {"string": "Hello <World> & \r\n"}),
    ({"format": "activex", "vt": "VT_BSTR", "body": "héllo"}, 8, "héllo"),
    ({"format": "activex", "vt": "VT_I4", "value": -42}, 3, -42),
    ({"format": "activex", "vt": 20, "value": "-9007199254740993"}, 20, "-9007199254740993"),
    ({"format": "activex", "vt": "VT_R8", "value": 2.5}, 5, 2.5),
    ({"format": "activex", "vt": "VT_BOOL", "value": True}, 11, True),
    ({"format": "activex", "vt": "VT_CY", "value": "12.34"}, 6, "12.34"),
    ({"format": "activex", "vt": "VT_DATE", "value": "2024-05-06T07:08:09"}, 7, "2024-05-06T07:08:09.000"),
    ({"format": "activex", "vt": "VT_UI1|VT_VECTOR", "value": "AAEC"}, 4113, "AAEC"),
    ({"format": "raw", "body_base64": base64.b64encode(NRBF_INT).decode(), "body_type": 768}, 768, None),
]


@pytest.mark.parametrize(("message", "body_type", "value"), SENDS)
async def test_sends_in_dotnet_formats_round_trip_through_the_decoder(
    client: httpx.AsyncClient, message: dict[str, Any], body_type: int, value: Any
) -> None:
    await create_queue(client, QUEUE)
    await send(client, QUEUE, **message)
    received = json_of(await client.post(f"/api/queues/{QUEUE}/receive", params={"decode": "true"}))
    assert received["body_type"] == body_type
    if value is not None:
        assert received["decoded"]["value"] == value
    if message["format"] == "dotnet-xml-string":
        assert received["body"].encode() == (
            b'<?xml version="1.0"?>\r\n<string>Hello &lt;World&gt; &amp; &#xD;\n</string>'
        )


@pytest.mark.parametrize(
    "message",
    [
        {"format": "activex", "vt": "VT_NOPE", "value": 1},
        {"format": "activex", "value": 1},
        {"format": "activex", "vt": "VT_I1", "value": 300},
        {"format": "activex", "vt": "VT_I4", "body_base64": "AAAA"},
        {"format": "dotnet-xml-string", "body": "x", "body_type": 8},
        {"format": "dotnet-xml-string", "body": "bell \x07"},
        {"format": "raw", "body": "x", "vt": "VT_I4"},
        {"format": "nope", "body": "x"},
    ],
)
async def test_a_send_its_format_cannot_carry_is_refused_and_stores_nothing(
    client: httpx.AsyncClient, message: dict[str, Any]
) -> None:
    await create_queue(client, QUEUE)
    response = await client.post(f"/api/queues/{QUEUE}/messages", json=message)
    assert_problem(response, 400, "MQ_ERROR_INVALID_PARAMETER")
    assert (await client.get(f"/api/queues/{QUEUE}/peek")).status_code == 204
