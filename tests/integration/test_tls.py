"""`serve` terminates TLS itself: HTTPS for the API and for SRMP senders (`DIRECT=HTTPS://`),
optional client certificates, and outbound HTTPS checked against a CA bundle, never bypassed.
A throwaway CA is made in each test with the `openssl` command."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from app.outbound.client import SrmpClient, outbound_verification
from qm.outbound import Verdict
from soap.build import build_request
from soap.envelope import Msmq, Properties, SrmpEnvelope
from soap.envelope import Path as SrmpPath
from soap.ids import MessageId
from soap.times import SrmpTime
from tests.gateway_process import READY_INTERVAL_S, READY_WITHIN_S
from tests.pki import SERVER_EXTENSIONS, Ca
from tests.srmp_messages import SENDER_QM
from tests.tls_gateway import TIMEOUT_S, TlsGateway

QUEUE = "private$/secure"


@dataclass(frozen=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    ca = Ca.make(tmp_path_factory.mktemp("pki"), "ca", "/CN=msmq-gateway test CA")
    server_cert, server_key = ca.issue("server", "/CN=localhost", SERVER_EXTENSIONS)
    client_cert, client_key = ca.issue("client", "/CN=winbox.example.net")
    return Pki(ca.cert, server_cert, server_key, client_cert, client_key)


def tls_settings(pki: Pki, **more: str) -> dict[str, str]:
    return {
        "MSMQGW_TRIGGERS_ENABLED": "false",
        "MSMQGW_TLS_CERT_FILE": str(pki.server_cert),
        "MSMQGW_TLS_KEY_FILE": str(pki.server_key),
        **more,
    }


@pytest.fixture
def gateway(database_url: str, tmp_path: Path, pki: Pki) -> Iterator[TlsGateway]:
    process = TlsGateway(database_url, tls_settings(pki), tmp_path / "gateway.log", pki.ca)
    try:
        process.wait_ready()
        yield process
    finally:
        process.stop()


def srmp_envelope(to: str, body: bytes) -> SrmpEnvelope:
    now = int(time.time())
    return SrmpEnvelope(
        path=SrmpPath(action="MSMQ:tls", to=to, id=MessageId(SENDER_QM, 7)),
        properties=Properties(SrmpTime.from_epoch(now + 3600), SrmpTime.from_epoch(now)),
        msmq=Msmq(
            message_class=0,
            priority=3,
            body_type=0,
            source_qm_guid=SENDER_QM,
            ttrq=SrmpTime.from_epoch(now + 3600),
        ),
        body=body,
    )


def test_the_api_is_served_over_https_and_only_to_clients_trusting_the_ca(gateway: TlsGateway) -> None:
    with gateway.client() as client:
        assert client.get("/healthz").status_code == 200
        assert client.post("/api/queues", json={"path": QUEUE}).status_code == 201
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(f"{gateway.base_url}/healthz", trust_env=False)  # the default trust store
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://127.0.0.1:{gateway.port}/healthz", trust_env=False)  # no plain HTTP


def test_an_srmp_sender_delivers_over_https(gateway: TlsGateway) -> None:
    with gateway.client() as client:
        assert client.post("/api/queues", json={"path": QUEUE}).status_code == 201
        to = f"https://localhost:{gateway.port}/msmq/{QUEUE}"
        content_type, body = build_request(srmp_envelope(to, b"over TLS"))
        posted = client.post(f"/msmq/{QUEUE}", content=body, headers={"Content-Type": content_type})
        assert posted.status_code == 200, posted.text
        received = client.post(f"/api/queues/{QUEUE}/receive")
        assert received.status_code == 200 and received.json()["body"] == "over TLS"


def test_a_required_client_certificate_is_checked(database_url: str, tmp_path: Path, pki: Pki) -> None:
    settings = tls_settings(pki, MSMQGW_TLS_CLIENT_CA_FILE=str(pki.ca), MSMQGW_TLS_CLIENT_CERT="required")
    process = TlsGateway(database_url, settings, tmp_path / "gateway.log", pki.ca)
    certificate = (str(pki.client_cert), str(pki.client_key))
    try:
        with process.client(certificate) as probe:  # readiness with the certificate
            deadline = time.monotonic() + READY_WITHIN_S
            while time.monotonic() < deadline and process.process.poll() is None:
                try:
                    if probe.get("/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    time.sleep(READY_INTERVAL_S)
            assert probe.get("/healthz").status_code == 200
        with process.client() as anonymous, pytest.raises(httpx.TransportError):
            anonymous.get("/healthz")
    finally:
        process.stop()


def test_outbound_https_is_verified_against_the_ca_bundle_and_never_bypassed(
    gateway: TlsGateway, pki: Pki
) -> None:
    with gateway.client() as client:
        assert client.post("/api/queues", json={"path": QUEUE}).status_code == 201
    url = f"https://localhost:{gateway.port}/msmq/{QUEUE}"

    async def post(ca_file: str) -> tuple[Verdict, str]:
        client = SrmpClient(TIMEOUT_S, outbound_verification(ca_file))
        try:
            result = await client.post(url, srmp_envelope(url, b"outbound"))
            return result.verdict, result.describe()
        finally:
            await client.close()

    verdict, described = asyncio.run(post(""))  # the system's trust store: our CA is not in it
    assert verdict is Verdict.RETRY and "CERTIFICATE_VERIFY_FAILED" in described, described
    verdict, described = asyncio.run(post(str(pki.ca)))
    assert verdict is Verdict.DELIVERED, described
