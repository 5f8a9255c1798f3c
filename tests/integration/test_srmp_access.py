"""The anonymous SRMP sender: WRITE_MESSAGE per queue (MSMQGW_SRMP_ANONYMOUS_WRITE=granted),
source networks, and what a refused message gets: 400, stored nowhere, counted."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Literal

import httpx
import pytest
from fastapi import FastAPI

from app.main import create_app
from app.settings import Settings
from qm.clock import SettableClock
from tests.integration.support import message_count
from tests.srmp_messages import plain_request

pytestmark = pytest.mark.anyio

TO = "http://localhost/msmq/private$/orders"


async def _app(settings: Settings, clock: SettableClock, **changes: object) -> AsyncIterator[FastAPI]:
    application = create_app(settings.model_copy(update=changes), clock)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def granted_app(settings: Settings, clock: SettableClock) -> AsyncIterator[FastAPI]:
    async for application in _app(settings, clock, srmp_anonymous_write="granted"):
        yield application


@pytest.fixture
async def networks_app(settings: Settings, clock: SettableClock) -> AsyncIterator[FastAPI]:
    async for application in _app(settings, clock, srmp_source_networks="10.9.0.0/16, 192.0.2.7"):
        yield application


def _client(app: FastAPI, host: str = "127.0.0.1") -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=(host, 40000))
    return httpx.AsyncClient(transport=transport, base_url="http://localhost")


async def _post(client: httpx.AsyncClient, sequence: int) -> httpx.Response:
    content_type, body = plain_request(TO, sequence)
    return await client.post("/msmq/private$/orders", content=body, headers={"Content-Type": content_type})


async def test_by_default_srmp_senders_write_every_queue(app: FastAPI) -> None:
    async with _client(app, "10.1.2.3") as sender, _client(app) as admin:
        await admin.post("/api/queues", json={"path": "private$/orders"})
        assert (await _post(sender, 1)).status_code == 200
        assert await message_count(admin, "private$/orders") == 1


async def test_only_granted_queues_take_srmp_messages(granted_app: FastAPI) -> None:
    async with _client(granted_app, "10.1.2.3") as sender, _client(granted_app) as admin:
        await admin.post("/api/queues", json={"path": "private$/orders"})
        refused = await _post(sender, 1)
        assert (refused.status_code, refused.content) == (400, b"")
        assert await message_count(admin, "private$/orders") == 0
        statistics = (await admin.get("/api/srmp/statistics")).json()
        assert (statistics["access_denied"], statistics["refused"], statistics["stored"]) == (1, 1, 0)
        grant = {"principal": "anonymous-srmp", "queue": "private$/orders", "rights": ["WRITE_MESSAGE"]}
        assert (await admin.post("/api/grants", json=grant)).status_code == 200
        assert (await _post(sender, 2)).status_code == 200
        assert await message_count(admin, "private$/orders") == 1
        # Another queue stays closed.
        await admin.post("/api/queues", json={"path": "private$/other"})
        content_type, body = plain_request("http://localhost/msmq/private$/other", 3)
        other = await sender.post(
            "/msmq/private$/other", content=body, headers={"Content-Type": content_type}
        )
        assert other.status_code == 400
        assert await message_count(admin, "private$/other") == 0


async def test_srmp_senders_outside_the_source_networks_are_refused(networks_app: FastAPI) -> None:
    async with _client(networks_app) as admin:
        await admin.post("/api/queues", json={"path": "private$/orders"})
    for host, status in (("10.9.200.1", 200), ("192.0.2.7", 200), ("10.8.0.1", 400), ("127.0.0.1", 400)):
        async with _client(networks_app, host) as sender:
            assert (await _post(sender, int(host.split(".")[-1]) + status)).status_code == status, host
    async with _client(networks_app) as admin:
        assert await message_count(admin, "private$/orders") == 2
        assert (await admin.get("/api/srmp/statistics")).json()["access_denied"] == 2


def test_a_source_network_that_does_not_parse_is_a_configuration_error() -> None:
    with pytest.raises(ValueError, match=r"10\.0\.0\.300"):
        Settings(srmp_source_networks="10.0.0.0/8,10.0.0.300")


@pytest.mark.parametrize("mode", ["required", "mapped"])
def test_requiring_srmp_client_certificates_needs_a_client_ca(mode: Literal["required", "mapped"]) -> None:
    """Without client CAs no certificate is ever verified: every SRMP message would be refused."""
    with pytest.raises(ValueError, match="srmp_client_cert needs tls_client_ca_file"):
        Settings(srmp_client_cert=mode)
    with_ca = Settings(
        srmp_client_cert=mode, tls_cert_file="gw.pem", tls_key_file="gw.key", tls_client_ca_file="ca.pem"
    )
    assert with_ca.srmp_client_cert == mode
