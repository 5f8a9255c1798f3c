"""`serve` terminates TLS itself: HTTPS for the API and for SRMP senders (`DIRECT=HTTPS://`),
optional client certificates, and outbound HTTPS checked against a CA bundle, never bypassed.
A throwaway CA is made in each test with the `openssl` command."""

from __future__ import annotations

import asyncio
import ssl
import subprocess
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
from tests.gateway_process import READY_INTERVAL_S, READY_WITHIN_S, GatewayProcess
from tests.srmp_messages import SENDER_QM

QUEUE = "private$/secure"
TIMEOUT_S = 10.0


@dataclass(frozen=True)
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path


def openssl(*arguments: str | Path) -> None:
    subprocess.run(["openssl", *map(str, arguments)], check=True, capture_output=True)


def signed(
    directory: Path, name: str, subject: str, extensions: str, ca: Path, ca_key: Path
) -> tuple[Path, Path]:
    key, request, cert = directory / f"{name}.key", directory / f"{name}.csr", directory / f"{name}.pem"
    config = directory / f"{name}.ext"
    config.write_text(extensions)
    openssl("req", "-new", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", request, "-subj", subject)
    openssl(
        "x509",
        "-req",
        "-in",
        request,
        "-CA",
        ca,
        "-CAkey",
        ca_key,
        "-CAcreateserial",
        "-out",
        cert,
        "-days",
        "2",
        "-sha256",
        "-extfile",
        config,
    )
    return cert, key


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    directory = tmp_path_factory.mktemp("pki")
    ca, ca_key = directory / "ca.pem", directory / "ca.key"
    openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        ca_key,
        "-out",
        ca,
        "-days",
        "2",
        "-subj",
        "/CN=msmq-gateway test CA",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign,cRLSign",
    )
    server_cert, server_key = signed(
        directory,
        "server",
        "/CN=localhost",
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
        ca,
        ca_key,
    )
    client_cert, client_key = signed(
        directory, "client", "/CN=winbox.example.net", "extendedKeyUsage=clientAuth\n", ca, ca_key
    )
    return Pki(ca, server_cert, server_key, client_cert, client_key)


class TlsGateway(GatewayProcess):
    """A `serve` process speaking HTTPS only."""

    def __init__(self, database_url: str, settings: dict[str, str], log: Path, ca: Path) -> None:
        super().__init__(database_url, settings, log)
        self.base_url = f"https://localhost:{self.port}"
        self.ca = ca

    def client(self, cert: tuple[str, str] | None = None) -> httpx.Client:
        context = ssl.create_default_context(cafile=str(self.ca))
        if cert is not None:
            context.load_cert_chain(*cert)
        return httpx.Client(base_url=self.base_url, verify=context, timeout=TIMEOUT_S, trust_env=False)

    def wait_ready(self) -> None:
        with self.client() as probe:
            deadline = time.monotonic() + READY_WITHIN_S
            while time.monotonic() < deadline and self.process.poll() is None:
                try:
                    if probe.get("/healthz").status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                time.sleep(READY_INTERVAL_S)
        raise AssertionError(f"the server did not become ready:\n{self.log_text()}")


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
