"""TLS client certificates as principals, through a real HTTPS gateway on each store: a verified
certificate mapped to a principal (subject and issuer) is that principal over the API and as an
SRMP sender; anything else is anonymous; nothing in a header names a certificate."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.client_certs import map_certificate
from app.keys import key_record
from qm.access import AccessControl
from qm.clock import SystemClock
from qm.rights import ADMINISTRATOR_GRANTS, Grant, QueueRight
from soap.namespaces import SOAP_ENV
from soap.service import TARGET_NAMESPACE
from storage.engine import make_engine
from storage.store import SqlStore
from tests.cli_in_process import run_cli
from tests.gateway_process import READY_INTERVAL_S
from tests.pki import SERVER_EXTENSIONS, Ca, rfc2253_names
from tests.srmp_messages import plain_request
from tests.tls_gateway import TlsGateway

TTL_S = 1.0
"""MSMQGW_AUTH_CACHE_TTL_S of the gateway: how late another process's deletion may be seen."""
SEEN_WITHIN_S = 30.0
"""A bound for what must happen within the TTL; only reached when it fails."""
ORDERS, AUDIT = "private$/orders", "private$/audit"
WINBOX = "/O=Example, Inc./OU=Servers/CN=winbox.example.net"
Pair = tuple[Path, Path]


@dataclass(frozen=True)
class Pki:
    ca: Ca
    server: Pair
    winbox: Pair
    """Mapped to principal `winbox` in the tests that map it."""
    stranger: Pair
    """From the same CA, never mapped."""
    impostor: Pair
    """winbox's very subject, signed by another CA."""


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    directory = tmp_path_factory.mktemp("pki")
    ca = Ca.make(directory, "ca", "/DC=net/DC=example/CN=msmq-gateway test CA")
    other = Ca.make(tmp_path_factory.mktemp("other-pki"), "ca", "/CN=another CA")
    return Pki(
        ca,
        ca.issue("server", "/CN=localhost", SERVER_EXTENSIONS),
        ca.issue("winbox", WINBOX),
        ca.issue("stranger", "/CN=stranger.example.net"),
        other.issue("impostor", WINBOX),
    )


def cli(database_url: str, *arguments: str) -> Any:
    """`msmq-gateway ARGUMENTS` on the store, from this process: another process than the gateway's."""
    done = run_cli(database_url, *arguments)
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout)


def seed(database_url: str, winbox: Path) -> str:
    """On the store before the gateway starts: an administrator's key (returned), and `winbox`
    mapped with WRITE_MESSAGE and PEEK_MESSAGE on ORDERS only."""
    subject, issuer = rfc2253_names(winbox)

    async def make() -> str:
        store = SqlStore(make_engine(database_url))
        try:
            access = AccessControl(store.access, SystemClock(), TTL_S)
            now = access.clock.now()
            text, record = key_record("ops", "", now)
            await store.access.ensure_principal("ops", "", now)
            await store.access.add_key(record)
            await access.give([Grant("ops", scope, rights) for scope, rights in ADMINISTRATOR_GRANTS])
            await map_certificate(store.access, subject, issuer, "winbox", "", now)
            rights = QueueRight.WRITE_MESSAGE | QueueRight.PEEK_MESSAGE
            await access.change_grant("winbox", ORDERS, rights, 0)
            return text
        finally:
            await store.close()

    return asyncio.run(make())


class Gateway:
    def __init__(self, process: TlsGateway, key: str, pki: Pki) -> None:
        self.process = process
        self.key = key
        self.pki = pki

    def admin(self) -> httpx.Client:
        return self.process.client(headers={"Authorization": f"Bearer {self.key}"})

    def client(self, cert: Pair | None = None, headers: dict[str, str] | None = None) -> httpx.Client:
        return self.process.client(cert, headers)

    def statistics(self) -> dict[str, int]:
        with self.admin() as admin:
            found: dict[str, int] = admin.get("/api/srmp/statistics").json()
            return found

    def send_srmp(self, client: httpx.Client, queue: str, sequence: int) -> int:
        to = f"https://localhost:{self.process.port}/msmq/{queue}"
        content_type, body = plain_request(to, sequence, f"message {sequence}".encode())
        return client.post(f"/msmq/{queue}", content=body, headers={"Content-Type": content_type}).status_code


@pytest.fixture
def start(database_url: str, tmp_path: Path, pki: Pki) -> Iterator[Any]:
    """Start the gateway (with more settings): client certificates optional, no anonymous
    administrator, the store seeded, the queues made."""
    key = seed(database_url, pki.winbox[0])
    processes: list[TlsGateway] = []

    def started(**more: str) -> Gateway:
        settings = {
            "MSMQGW_TRIGGERS_ENABLED": "false",
            "MSMQGW_TLS_CERT_FILE": str(pki.server[0]),
            "MSMQGW_TLS_KEY_FILE": str(pki.server[1]),
            "MSMQGW_TLS_CLIENT_CA_FILE": str(pki.ca.cert),
            "MSMQGW_ANONYMOUS_ADMIN": "false",
            "MSMQGW_AUTH_CACHE_TTL_S": str(TTL_S),
            **more,
        }
        process = TlsGateway(database_url, settings, tmp_path / "gateway.log", pki.ca.cert)
        processes.append(process)
        process.wait_ready()
        gateway = Gateway(process, key, pki)
        with gateway.admin() as admin:
            for queue in (ORDERS, AUDIT):
                assert admin.post("/api/queues", json={"path": queue}).status_code == 201
        return gateway

    try:
        yield started
    finally:
        for process in processes:
            process.stop()


SOAP_XML = {"Content-Type": "text/xml; charset=utf-8"}


def soap(operation: str, queue: str) -> bytes:
    message = "<message><body>aGk=</body></message>" if operation == "Send" else ""
    return (
        f'<s:Envelope xmlns:s="{SOAP_ENV}" xmlns:gw="{TARGET_NAMESPACE}"><s:Body>'
        f"<gw:{operation}><queue>{queue}</queue>{message}</gw:{operation}></s:Body></s:Envelope>"
    ).encode()


def test_a_mapped_certificate_is_its_principal_with_exactly_its_grants(start: Any, pki: Pki) -> None:
    gateway: Gateway = start()
    subject, issuer = rfc2253_names(pki.winbox[0])
    with gateway.client(pki.winbox) as winbox:
        me = winbox.get("/api/me").json()
        assert me == {
            "principal": "winbox",
            "authenticated": True,
            "administrator": False,
            "client_certificate": {"subject": subject, "issuer": issuer},
        }
        assert subject == "CN=winbox.example.net,OU=Servers,O=Example\\, Inc."
        assert issuer == "CN=msmq-gateway test CA,DC=example,DC=net"
        assert winbox.post(f"/api/queues/{ORDERS}/messages", json={"body": "hi"}).status_code == 201
        assert winbox.get(f"/api/queues/{ORDERS}/messages").status_code == 200
        denied = winbox.post(f"/api/queues/{ORDERS}/receive")
        assert denied.status_code == 403, denied.text
        assert denied.json()["detail"] == f"'winbox' lacks RECEIVE_MESSAGE on '{ORDERS}'"
        assert winbox.post(f"/api/queues/{AUDIT}/messages", json={"body": "x"}).status_code == 403
        assert winbox.get("/api/keys").status_code == 403
        sent = winbox.post("/soap", content=soap("Send", ORDERS), headers=SOAP_XML)
        assert sent.status_code == 200, sent.text  # SOAP: the same principal, the same grants
        received = winbox.post("/soap", content=soap("Receive", ORDERS), headers=SOAP_XML)
        assert received.status_code == 500 and "MQ_ERROR_ACCESS_DENIED" in received.text
    with gateway.admin() as admin:
        assert admin.get(f"/api/queues/{ORDERS}").json()["message_count"] == 2
        assert admin.get(f"/api/queues/{AUDIT}").json()["message_count"] == 0


def test_other_certificates_are_anonymous_or_refused_by_the_handshake(start: Any, pki: Pki) -> None:
    gateway: Gateway = start()
    with gateway.client(pki.stranger) as stranger:  # verified, not mapped: anonymous
        me = stranger.get("/api/me").json()
        assert (me["principal"], me["authenticated"]) == ("anonymous", False)
        assert me["client_certificate"]["subject"] == "CN=stranger.example.net"
        assert stranger.post(f"/api/queues/{ORDERS}/messages", json={"body": "x"}).status_code == 403
    with gateway.client(pki.impostor) as impostor, pytest.raises(httpx.TransportError):
        impostor.get("/api/me")  # winbox's subject from a CA the gateway does not trust
    with gateway.admin() as admin:
        assert admin.get(f"/api/queues/{ORDERS}").json()["message_count"] == 0


def test_a_certificate_named_in_a_header_changes_nothing(start: Any, pki: Pki) -> None:
    gateway: Gateway = start()
    subject, issuer = rfc2253_names(pki.winbox[0])
    forged = {
        "X-Client-Cert": pki.winbox[0].read_text().replace("\n", ""),
        "X-SSL-Client-S-DN": subject,
        "X-SSL-Client-I-DN": issuer,
        "X-SSL-Client-Verify": "SUCCESS",
        "SSL-Client-Cert": subject,
        "X-Forwarded-Client-Cert": f'Subject="{subject}"',
    }
    for cert in (None, pki.stranger):
        with gateway.client(cert, forged) as client:
            me = client.get("/api/me").json()
            assert (me["principal"], me["authenticated"]) == ("anonymous", False)
            assert client.post(f"/api/queues/{ORDERS}/messages", json={"body": "x"}).status_code == 403
            assert gateway.send_srmp(client, AUDIT, 1) == 200  # as anonymous-srmp (writes `all`)
    with gateway.admin() as admin:
        assert admin.get(f"/api/queues/{ORDERS}").json()["message_count"] == 0


def test_a_key_and_a_certificate_of_different_principals_are_refused(start: Any, pki: Pki) -> None:
    gateway: Gateway = start()
    with gateway.client(pki.winbox, {"Authorization": f"Bearer {gateway.key}"}) as both:
        refused = both.get("/api/keys")
        assert refused.status_code == 401, refused.text
        assert "'ops'" in refused.json()["detail"] and "'winbox'" in refused.json()["detail"]
    with gateway.client(pki.stranger, {"Authorization": f"Bearer {gateway.key}"}) as key_only:
        assert key_only.get("/api/keys").status_code == 200  # an unmapped certificate proves no one
    with gateway.admin() as admin:
        created = admin.post("/api/keys", json={"principal": "winbox"}).json()["key"]
    with gateway.client(pki.winbox, {"Authorization": f"Bearer {created}"}) as same:
        assert same.get("/api/me").json()["principal"] == "winbox"


def test_mappings_are_managed_over_the_api_and_audited(start: Any, pki: Pki) -> None:
    gateway: Gateway = start()
    subject, issuer = rfc2253_names(pki.stranger[0])
    with gateway.admin() as admin:
        mapping = {"subject": subject, "issuer": issuer, "principal": "auditor", "description": "audit"}
        created = admin.post("/api/client-certificates", json=mapping)
        assert created.status_code == 201, created.text
        assert admin.post("/api/client-certificates", json=mapping).status_code == 400  # once
        listed = admin.get("/api/client-certificates", params={"principal": "auditor"}).json()
        assert [(item["id"], item["subject"]) for item in listed] == [(created.json()["id"], subject)]
        grant = {"principal": "auditor", "queue": AUDIT, "rights": ["WRITE_MESSAGE"]}
        assert admin.post("/api/grants", json=grant).status_code == 200
    with gateway.client(pki.stranger) as auditor:  # this process: at once
        assert auditor.get("/api/me").json()["principal"] == "auditor"
        assert auditor.post(f"/api/queues/{AUDIT}/messages", json={"body": "x"}).status_code == 201
    with gateway.admin() as admin:
        deleted = admin.delete(f"/api/client-certificates/{created.json()['id']}")
        assert deleted.status_code == 204
        assert admin.delete(f"/api/client-certificates/{created.json()['id']}").status_code == 404
        expected = [
            ("ops", "POST /api/client-certificates", "allowed 201"),
            ("ops", "POST /api/client-certificates", "failed 400"),
            ("ops", "DELETE /api/client-certificates/{mapping_id}", "allowed 204"),
            ("ops", "DELETE /api/client-certificates/{mapping_id}", "failed 404"),
        ]
        # Each entry is written before its answer leaves, so in the order the changes were made.
        assert audited(admin, "/api/client-certificates") == expected
    with gateway.client(pki.stranger) as auditor:
        assert auditor.post(f"/api/queues/{AUDIT}/messages", json={"body": "x"}).status_code == 403


def test_a_mapping_deleted_by_another_process_is_refused_within_the_ttl(
    start: Any, pki: Pki, database_url: str
) -> None:
    gateway: Gateway = start()
    subject, issuer = rfc2253_names(pki.winbox[0])
    with gateway.client(pki.winbox) as winbox:
        assert winbox.post(f"/api/queues/{ORDERS}/messages", json={"body": "1"}).status_code == 201
        (mapping,) = cli(database_url, "certs", "list", "--principal", "winbox")
        assert cli(database_url, "certs", "delete", str(mapping["id"])) == {"deleted": mapping["id"]}
        refused_after = poll_until(lambda: winbox.get("/api/me").json()["principal"] == "anonymous")
        assert refused_after < TTL_S + 5.0, refused_after  # the TTL, and a loaded machine's slack
        assert winbox.post(f"/api/queues/{ORDERS}/messages", json={"body": "2"}).status_code == 403
        added = cli(
            database_url, "certs", "add", "--principal", "winbox", "--subject", subject, "--issuer", issuer
        )
        assert (added["subject"], added["issuer"], added["principal"]) == (subject, issuer, "winbox")
        poll_until(lambda: winbox.get("/api/me").json()["principal"] == "winbox")
        assert winbox.post(f"/api/queues/{ORDERS}/messages", json={"body": "3"}).status_code == 201


def audited(admin: httpx.Client, prefix: str) -> list[tuple[str, str, str]]:
    """The audit entries of the actions on `prefix`, oldest first."""
    entries = admin.get("/api/audit").json()["entries"]
    found = [(e["principal"], e["action"], e["outcome"]) for e in entries if prefix in e["action"]]
    return found[::-1]


def poll_until(condition: Callable[[], bool]) -> float:
    """Seconds until `condition` held, asked every READY_INTERVAL_S (a probe, as for readiness)."""
    began = time.monotonic()
    while not condition():
        assert time.monotonic() - began < SEEN_WITHIN_S, "not seen in time"
        time.sleep(READY_INTERVAL_S)
    return time.monotonic() - began


def test_an_srmp_sender_with_a_mapped_certificate_writes_with_its_grants(start: Any, pki: Pki) -> None:
    gateway: Gateway = start()  # MSMQGW_SRMP_ANONYMOUS_WRITE=all: anonymous-srmp writes everywhere
    with gateway.client(pki.winbox) as winbox:
        assert gateway.send_srmp(winbox, ORDERS, 1) == 200
        assert gateway.send_srmp(winbox, AUDIT, 2) == 400  # winbox's own grants, not anonymous-srmp's
    with gateway.client(pki.stranger) as stranger:
        assert gateway.send_srmp(stranger, AUDIT, 3) == 200
    with gateway.admin() as admin:
        counts = [admin.get(f"/api/queues/{queue}").json()["message_count"] for queue in (ORDERS, AUDIT)]
    assert counts == [1, 1]
    assert gateway.statistics()["access_denied"] == 1


@pytest.mark.parametrize("mode", ["required", "mapped"])
def test_srmp_can_require_a_client_certificate(start: Any, pki: Pki, mode: str) -> None:
    gateway: Gateway = start(MSMQGW_SRMP_CLIENT_CERT=mode)
    with gateway.client() as anonymous:
        assert gateway.send_srmp(anonymous, ORDERS, 1) == 400
    with gateway.client(pki.stranger) as stranger:
        assert gateway.send_srmp(stranger, ORDERS, 2) == (200 if mode == "required" else 400)
    with gateway.client(pki.winbox) as winbox:
        assert gateway.send_srmp(winbox, ORDERS, 3) == 200
    with gateway.admin() as admin:
        stored = admin.get(f"/api/queues/{ORDERS}").json()["message_count"]
    statistics = gateway.statistics()
    denied = 1 if mode == "required" else 2
    assert (stored, statistics["stored"], statistics["access_denied"]) == (3 - denied, 3 - denied, denied)
