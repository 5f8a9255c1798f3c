"""No web page can drive the gateway: foreign Host names, cross-site requests and body types
the endpoint does not read are refused before anything changes (app/edge.py)."""

from __future__ import annotations

import httpx
import pytest
from fastapi import FastAPI

from app.main import create_app
from app.settings import Settings
from tests.integration.support import assert_problem, create_queue, message_count, send

pytestmark = pytest.mark.anyio

QUEUE = "private$/orders"
PURGE = f"/api/queues/{QUEUE}/purge"
SOAP_DELETE = (
    b'<?xml version="1.0"?><soap:Envelope xmlns:soap="http://schemas.xmlsoap.org/soap/envelope/">'
    b'<soap:Body><DeleteQueue xmlns="urn:msmq-gateway:soap:v1"><path>private$/orders</path>'
    b"</DeleteQueue></soap:Body></soap:Envelope>"
)


async def two_messages(client: httpx.AsyncClient) -> None:
    await create_queue(client, QUEUE)
    await send(client, QUEUE, "one")
    await send(client, QUEUE, "two")


@pytest.mark.parametrize(
    "headers",
    [
        # What a browser sends for a form-like fetch() from a page on attacker.example.
        {"Origin": "http://attacker.example", "Sec-Fetch-Site": "cross-site"},
        # A browser without Fetch Metadata still names the page's origin.
        {"Origin": "http://attacker.example"},
        # Another port of localhost is the same site, not the same origin.
        {"Origin": "http://localhost:3000", "Sec-Fetch-Site": "same-site"},
        {"Origin": "null"},
    ],
)
async def test_a_cross_site_text_plain_post_purges_nothing(
    client: httpx.AsyncClient, headers: dict[str, str]
) -> None:
    await two_messages(client)
    response = await client.post(PURGE, content=b"x", headers={"Content-Type": "text/plain", **headers})
    assert_problem(response, 403, "MQ_ERROR_ACCESS_DENIED")
    assert await message_count(client, QUEUE) == 2


async def test_a_cross_site_soap_call_deletes_no_queue(client: httpx.AsyncClient) -> None:
    await two_messages(client)
    headers = {"Content-Type": "text/plain", "Origin": "http://attacker.example", "SOAPAction": '""'}
    assert_problem(
        await client.post("/soap", content=SOAP_DELETE, headers=headers), 403, "MQ_ERROR_ACCESS_DENIED"
    )
    assert await message_count(client, QUEUE) == 2


async def test_a_cross_site_raw_send_stores_nothing(client: httpx.AsyncClient) -> None:
    await create_queue(client, QUEUE)
    headers = {"Content-Type": "text/plain", "Sec-Fetch-Site": "cross-site"}
    response = await client.post(f"/api/queues/{QUEUE}/messages", content=b"forged", headers=headers)
    assert_problem(response, 403, "MQ_ERROR_ACCESS_DENIED")
    assert await message_count(client, QUEUE) == 0


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "http://localhost", "Sec-Fetch-Site": "same-origin"},
        {"Origin": "http://LOCALHOST:80"},
        {"Sec-Fetch-Site": "none"},
    ],
)
async def test_the_gateway_s_own_pages_may_post(client: httpx.AsyncClient, headers: dict[str, str]) -> None:
    await two_messages(client)
    response = await client.post(PURGE, headers=headers)
    assert response.status_code == 200, response.text
    assert response.json() == {"purged": 2}


@pytest.mark.parametrize("host", ["attacker.example", "localhost.attacker.example", "127.0.0.2", ""])
async def test_a_foreign_host_is_misdirected_and_purges_nothing(client: httpx.AsyncClient, host: str) -> None:
    await two_messages(client)
    assert_problem(await client.post(PURGE, headers={"Host": host}), 421, "MQ_ERROR_ACCESS_DENIED")
    # Reading is refused too: a rebound DNS name must not read answers.
    assert_problem(
        await client.get(f"/api/queues/{QUEUE}", headers={"Host": host}), 421, "MQ_ERROR_ACCESS_DENIED"
    )
    assert await message_count(client, QUEUE) == 2


@pytest.mark.parametrize(
    "host", ["localhost:8080", "LOCALHOST", "localhost.", "127.0.0.1:1", "[::1]:8080", "[::1]"]
)
async def test_the_gateway_s_own_names_are_served(client: httpx.AsyncClient, host: str) -> None:
    assert (await client.get("/api/queues", headers={"Host": host})).status_code == 200


async def test_listed_names_and_the_local_host_names_are_served(database_url: str) -> None:
    settings = Settings(
        database_url=database_url,
        allowed_hosts="gw.example.net",
        local_host_names="gw01,10.0.0.5",
        host="192.0.2.7",
        allow_unauthenticated_network=True,  # the bind address only names the gateway here
    )
    async with served(settings) as client:
        for host in ("gw.example.net:8080", "gw01", "10.0.0.5", "192.0.2.7"):
            assert (await client.get("/api/queues", headers={"Host": host})).status_code == 200, host
        for host in ("localhost", "gw02"):  # the list replaces the defaults
            assert (await client.get("/api/queues", headers={"Host": host})).status_code == 421, host


async def test_a_star_serves_any_host(database_url: str) -> None:
    async with served(Settings(database_url=database_url, allowed_hosts="*")) as client:
        assert (await client.get("/api/queues", headers={"Host": "attacker.example"})).status_code == 200


@pytest.mark.parametrize(
    "content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x"]
)
async def test_a_json_endpoint_refuses_other_body_types(client: httpx.AsyncClient, content_type: str) -> None:
    await two_messages(client)
    response = await client.post(PURGE, content=b"{}", headers={"Content-Type": content_type})
    assert_problem(response, 415, "MQ_ERROR_INVALID_PARAMETER")
    created = await client.post(
        "/api/queues", content=b'{"path": "q2"}', headers={"Content-Type": content_type}
    )
    assert_problem(created, 415, "MQ_ERROR_INVALID_PARAMETER")
    assert_problem(
        await client.post("/api/queues", content=b'{"path": "q2"}'), 415, "MQ_ERROR_INVALID_PARAMETER"
    )
    assert await message_count(client, QUEUE) == 2
    assert (await client.get("/api/queues/q2")).status_code == 404


async def test_soap_requires_text_xml(client: httpx.AsyncClient) -> None:
    await two_messages(client)
    response = await client.post("/soap", content=SOAP_DELETE, headers={"Content-Type": "application/json"})
    assert_problem(response, 415, "MQ_ERROR_INVALID_PARAMETER")
    assert await message_count(client, QUEUE) == 2


@pytest.mark.parametrize("target", ["/msmq/private$/orders", "/MSMQ\\private$\\orders"])
async def test_srmp_answers_another_body_type_as_its_senders_expect(
    client: httpx.AsyncClient, target: str
) -> None:
    """400 with no body (reference §1.7, vector m05): a sender does not retry it."""
    await create_queue(client, QUEUE)
    response = await client.post(target, content=b"hello", headers={"Content-Type": "text/plain"})
    assert (response.status_code, response.content) == (400, b"")


class served:
    """The app of these settings, its lifespan running, behind an httpx client."""

    def __init__(self, settings: Settings) -> None:
        self._app: FastAPI = create_app(settings)

    async def __aenter__(self) -> httpx.AsyncClient:
        self._lifespan = self._app.router.lifespan_context(self._app)
        await self._lifespan.__aenter__()
        self._client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=self._app), base_url="http://localhost"
        )
        return self._client

    async def __aexit__(self, *exc: object) -> None:
        await self._client.aclose()
        await self._lifespan.__aexit__(None, None, None)


async def test_a_send_to_an_http_format_name_is_not_taken_for_srmp(client: httpx.AsyncClient) -> None:
    """`/api/queues/DIRECT=HTTP://host/msmq/q/messages` holds `/msmq/` after a `://`."""
    target = "/api/queues/DIRECT%3DHTTP%3A%2F%2Fremote.example%2Fmsmq%2Fprivate%24%2Fq/messages"
    response = await client.post(target, json={"body": "x"})
    assert response.status_code != 415, response.text
