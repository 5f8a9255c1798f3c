"""What an adversarial review of the security work (issue 18) found, as a hostile network
client: each test failed before its fix, on SQLite and on PostgreSQL."""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app.main import create_app
from app.settings import Settings
from qm.clock import SettableClock
from soap.namespaces import SOAP_ENV
from soap.service import TARGET_NAMESPACE
from tests.cli_in_process import run_cli
from tests.gateway_process import free_port
from tests.integration.support import key_with_grants as _key
from tests.srmp_messages import receipted_request

pytestmark = pytest.mark.anyio


def _client(app: FastAPI, headers: dict[str, str] | None = None) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=("10.1.2.3", 50000))
    return httpx.AsyncClient(transport=transport, base_url="http://localhost", headers=headers)


def _local(app: FastAPI) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 50000))
    return httpx.AsyncClient(transport=transport, base_url="http://localhost")


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def _new_queue(client: httpx.AsyncClient, path: str) -> None:
    response = await client.post("/api/queues", json={"path": path})
    assert response.status_code == 201, response.text


@pytest.mark.parametrize("name", ["private$/s*", "*", "private$/*", "a*b"])
async def test_a_queue_name_with_a_star_is_refused_so_its_owner_grant_is_no_pattern(
    app: FastAPI, name: str
) -> None:
    """A creator owns its queue by a grant on the queue's path, and `*` in a grant's path
    stands for any characters: creating `private$/s*` gave GENERIC_ALL on every private queue
    starting with `s` (a principal with only CREATE_QUEUE received `private$/secret`)."""
    async with _local(app) as admin:
        await _new_queue(admin, "private$/secret")
        sent = await admin.post("/api/queues/private$/secret/messages", json={"body": "top secret"})
        assert sent.status_code == 201
        key = await _key(admin, "creator", (None, ["CREATE_QUEUE"]))
    async with _client(app, _bearer(key)) as creator:
        created = await creator.post("/api/queues", json={"path": name})
        assert created.status_code == 400, created.text
        assert created.json()["mq_error"] == "MQ_ERROR_ILLEGAL_QUEUE_PATHNAME"
        taken = await creator.post("/api/queues/private$/secret/receive")
        assert taken.status_code == 403
    async with _local(app) as admin:
        grants = (await admin.get("/api/grants", params={"principal": "creator"})).json()
        assert [grant["queue"] for grant in grants] == [None]
        assert (await admin.get("/api/queues/private$/secret")).json()["message_count"] == 1


ADMIN_QUEUED = {
    "body": "INJECTED",
    "label": "order 42",
    "admin_queue": "DIRECT=OS:.\\private$\\victim",
    "acknowledge": 12,  # MQMSG_ACKNOWLEDGMENT_NEG_RECEIVE (with NACK_REACH_QUEUE): the body comes along
    "time_to_be_received": 1,
}


async def _mine_and_victim(app: FastAPI) -> str:
    async with _local(app) as admin:
        await _new_queue(admin, "private$/mine")
        await _new_queue(admin, "private$/victim")
        return await _key(admin, "mallory", ("private$/mine", ["WRITE_MESSAGE", "RECEIVE_MESSAGE"]))


async def _victim_count(app: FastAPI) -> int:
    async with _local(app) as admin:
        count: int = (await admin.get("/api/queues/private$/victim")).json()["message_count"]
        return count


async def test_naming_an_admin_queue_needs_write_there_over_rest(app: FastAPI, clock: SettableClock) -> None:
    """A negative acknowledgment carries the original body: sent to `mine` with `victim` as
    admin queue and a one-second TTBR, the body landed in `victim` a second later."""
    key = await _mine_and_victim(app)
    async with _client(app, _bearer(key)) as mallory:
        direct = await mallory.post("/api/queues/private$/victim/messages", json={"body": "x"})
        assert direct.status_code == 403
        sent = await mallory.post("/api/queues/private$/mine/messages", json=ADMIN_QUEUED)
        assert sent.status_code == 403, sent.text
        assert sent.json()["detail"] == "'mallory' lacks WRITE_MESSAGE on 'private$/victim'"
        clock.advance(5)
        assert (await mallory.post("/api/queues/private$/mine/receive")).status_code == 204
    async with _local(app) as admin:
        assert (await admin.get("/api/queues/private$/mine")).json()["message_count"] == 0
    assert await _victim_count(app) == 0
    # Without acknowledgments asked for, the admin queue is only a property: no right needed.
    async with _client(app, _bearer(key)) as mallory:
        quiet = await mallory.post(
            "/api/queues/private$/mine/messages", json=ADMIN_QUEUED | {"acknowledge": 0}
        )
        assert quiet.status_code == 201, quiet.text


async def test_an_admin_queue_the_sender_may_write_is_taken(app: FastAPI) -> None:
    key = await _mine_and_victim(app)
    async with _local(app) as admin:
        await _key(admin, "mallory", ("private$/victim", ["WRITE_MESSAGE"]))
    async with _client(app, _bearer(key)) as mallory:
        sent = await mallory.post("/api/queues/private$/mine/messages", json=ADMIN_QUEUED)
        assert sent.status_code == 201, sent.text


async def test_naming_an_admin_queue_needs_write_there_over_soap(app: FastAPI) -> None:
    key = await _mine_and_victim(app)
    body = base64.b64encode(b"INJECTED").decode()
    envelope = (
        f'<s:Envelope xmlns:s="{SOAP_ENV}" xmlns:gw="{TARGET_NAMESPACE}"><s:Body><gw:Send>'
        f"<queue>private$/mine</queue><message><body>{body}</body>"
        "<adminQueue>private$/victim</adminQueue><acknowledge>12</acknowledge>"
        "<timeToBeReceived>1</timeToBeReceived></message></gw:Send></s:Body></s:Envelope>"
    )
    async with _client(app, _bearer(key) | {"Content-Type": "text/xml"}) as mallory:
        answer = await mallory.post("/soap", content=envelope)
    assert answer.status_code == 500
    assert b"MQ_ERROR_ACCESS_DENIED" in answer.content
    async with _local(app) as admin:
        assert (await admin.get("/api/queues/private$/mine")).json()["message_count"] == 0


async def test_naming_an_admin_queue_needs_write_there_in_an_import(app: FastAPI) -> None:
    key = await _mine_and_victim(app)
    line = {
        "body_base64": base64.b64encode(b"INJECTED").decode(),
        "admin_queue": "private$/victim",
        "acknowledge": 12,
        "time_to_be_received": 1,
    }
    headers = _bearer(key) | {"Content-Type": "application/x-ndjson"}
    async with _client(app, headers) as mallory:
        imported = await mallory.post("/api/queues/private$/mine/messages/import", content=json.dumps(line))
    assert imported.status_code == 403, imported.text
    async with _local(app) as admin:
        assert (await admin.get("/api/queues/private$/mine")).json()["message_count"] == 0


async def test_an_srmp_sender_names_only_admin_queues_it_may_write(
    settings: Settings, clock: SettableClock
) -> None:
    """MSMQGW_SRMP_ANONYMOUS_WRITE=granted with WRITE on `mine` only: a delivery receipt
    requested to `victim` put an acknowledgment (its label the sender's) there."""
    application = create_app(settings.model_copy(update={"srmp_anonymous_write": "granted"}), clock)
    async with application.router.lifespan_context(application):
        async with _local(application) as admin:
            await _new_queue(admin, "private$/mine")
            await _new_queue(admin, "private$/victim")
            grant = {"principal": "anonymous-srmp", "queue": "private$/mine", "rights": ["WRITE_MESSAGE"]}
            assert (await admin.post("/api/grants", json=grant)).status_code == 200
        async with _client(application) as sender:
            for sequence, receipts_to in ((1, "http://localhost/msmq/private$/victim"), (2, None)):
                content_type, body = receipted_request(
                    "http://localhost/msmq/private$/mine", sequence, receipts_to
                )
                answer = await sender.post(
                    "/msmq/private$/mine", content=body, headers={"Content-Type": content_type}
                )
                assert answer.status_code == (400 if receipts_to else 200)
        assert await _victim_count(application) == 0
        async with _local(application) as admin:
            assert (await admin.get("/api/queues/private$/mine")).json()["message_count"] == 1


async def test_a_deleted_principals_key_is_refused_at_once(app: FastAPI) -> None:
    """Deleting a principal deletes its keys, but this process went on taking a key it had
    verified (until MSMQGW_AUTH_CACHE_TTL_S), as it does for a revocation elsewhere; a key
    revoked here is refused at once, and so must be a key whose principal was deleted here."""
    async with _local(app) as admin:
        key = await _key(admin, "leaver", (None, ["GET_PROPERTIES"]))
        async with _client(app, _bearer(key)) as leaver:
            assert (await leaver.get("/api/queue-manager")).status_code == 200
            assert (await admin.delete("/api/principals/leaver")).status_code == 204
            refused = await leaver.get("/api/queue-manager")
    assert refused.status_code == 401, refused.text


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        # The edge checked the last Host and the application used the first: the WSDL's
        # soap:address named evil.example, and a purge went through.
        ([("Host", "evil.example"), ("Host", "localhost")], 400),
        ([("Origin", "http://evil.example"), ("Origin", "http://localhost")], 400),
        ([("Sec-Fetch-Site", "cross-site"), ("Sec-Fetch-Site", "same-origin")], 400),
        ([("Content-Type", "text/plain"), ("Content-Type", "application/json")], 400),
        # A bracketed IPv6 name with something after it is no name of the gateway.
        ([("Host", "[::1]evil.example")], 421),
    ],
)
async def test_repeated_or_malformed_edge_headers_are_refused(
    app: FastAPI, headers: list[tuple[str, str]], status: int
) -> None:
    async with _local(app) as admin:
        await _new_queue(admin, "private$/orders")
        assert (
            await admin.post("/api/queues/private$/orders/messages", json={"body": "x"})
        ).status_code == 201
        request = admin.build_request("POST", "/api/queues/private$/orders/purge")
        request.headers = httpx.Headers(
            [(name, value) for name, value in request.headers.multi_items() if name.lower() != "host"]
            + ([] if any(name == "Host" for name, _ in headers) else [("Host", "localhost")])
            + headers
        )
        answer = await admin.send(request)
        assert answer.status_code == status, answer.text
        assert (await admin.get("/api/queues/private$/orders")).json()["message_count"] == 1


def _cli(database_url: str, *arguments: str) -> Any:
    done = run_cli(database_url, *arguments)
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout)


async def test_queue_changes_through_the_cli_are_audited_and_a_deletion_takes_its_grants(
    app: FastAPI, database_url: str
) -> None:
    """`queue create`, `purge` and `delete` on the store left no audit entry (docs/security.md:
    "over REST, SOAP or the CLI"), and a deletion left the grants on the queue's path, so a
    queue created later under the same name was still its old owner's."""
    async with _local(app) as admin:
        key = await _key(admin, "alice", (None, ["CREATE_QUEUE"]))
    async with _client(app, _bearer(key)) as alice:
        await _new_queue(alice, "private$/payroll")
    await asyncio.to_thread(_cli, database_url, "queue", "purge", "private$/payroll")
    await asyncio.to_thread(_cli, database_url, "queue", "delete", "private$/payroll")
    await asyncio.to_thread(_cli, database_url, "queue", "create", "private$/payroll")
    async with _local(app) as admin:
        grants = (await admin.get("/api/grants", params={"principal": "alice"})).json()
        entries = (await admin.get("/api/audit")).json()["entries"]
    assert [grant["queue"] for grant in grants] == [None]
    cli_entries = [(entry["principal"], entry["action"], entry["target"]) for entry in entries[:3]]
    assert cli_entries == [
        ("cli", "cli queue create", "path=private$/payroll"),
        ("cli", "cli queue delete", "path=private$/payroll"),
        ("cli", "cli queue purge", "path=private$/payroll"),
    ]


async def test_audit_entries_name_what_a_body_named(app: FastAPI) -> None:
    """`POST /api/queues`, `/api/grants`, `/api/keys`, triggers, rules and moves name what they
    change in the body, and their audit entries had an empty target: which queue was created,
    who was given which rights, could not be told from the log."""
    async with _local(app) as admin:
        key = await _key(admin, "ops", (None, ["CREATE_QUEUE", "CHANGE_PERMISSIONS"]))
    async with _client(app, _bearer(key)) as ops:
        await _new_queue(ops, "private$/made")
        assert (await ops.post("/api/queues", json={"path": "private$/made"})).status_code == 409
        grant = {"principal": "reader", "queue": "private$/made", "rights": ["PEEK_MESSAGE"]}
        assert (await ops.post("/api/grants", json=grant)).status_code == 200
        made = await ops.post("/api/keys", json={"principal": "reader"})
        assert made.status_code == 201
    async with _local(app) as admin:
        entries = (await admin.get("/api/audit", params={"limit": 4})).json()["entries"]
    assert [(entry["action"], entry["target"], entry["outcome"]) for entry in entries] == [
        ("POST /api/keys", f"principal=reader key_id={made.json()['key_id']}", "allowed 201"),
        ("POST /api/grants", "principal=reader queue=private$/made rights=PEEK_MESSAGE", "allowed 200"),
        ("POST /api/queues", "path=private$/made", "failed 409"),
        ("POST /api/queues", "path=private$/made", "allowed 201"),
    ]


@pytest.mark.parametrize("principal", ["anonymous", "anonymous-srmp"])
async def test_no_key_proves_a_built_in_principal(app: FastAPI, principal: str) -> None:
    """A key for `anonymous` made every queue its holder created every keyless caller's (the
    owner grant went to `anonymous`), and one for `anonymous-srmp` let a REST client act with
    what is granted to Windows senders."""
    async with _local(app) as admin:
        made = await admin.post("/api/keys", json={"principal": principal})
        assert made.status_code == 400, made.text
        assert made.json()["mq_error"] == "MQ_ERROR_INVALID_PARAMETER"
        assert (await admin.get("/api/keys")).json() == []


async def test_the_metrics_port_answers_only_its_own_host_names(settings: Settings) -> None:
    """MSMQGW_METRICS_PORT's server took any Host: a page at attacker.example rebinding its name
    to 127.0.0.1 read every queue's name and counts, as the API's edge refuses it to (421)."""
    port = free_port()
    application = create_app(settings.model_copy(update={"metrics_port": port}))
    async with application.router.lifespan_context(application):
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as scraper:
            assert (await scraper.get("/metrics")).status_code == 200
            assert (await scraper.get("/metrics", headers={"Host": f"localhost:{port}"})).status_code == 200
            rebound = await scraper.get("/metrics", headers={"Host": f"attacker.example:{port}"})
            assert rebound.status_code == 421
            assert b"msmqgw_" not in rebound.content


@pytest.mark.parametrize(
    ("processing", "right"), [("peek", "PEEK_MESSAGE"), ("retrieval", "RECEIVE_MESSAGE")]
)
async def test_a_trigger_on_a_queue_needs_the_right_to_read_it(
    app: FastAPI, processing: str, right: str
) -> None:
    """A trigger reads its queue (and a retrieving one receives from it) on its creator's
    behalf: MANAGE_TRIGGERS alone set one on `private$/secret`, whose rules' webhooks then
    carried its messages to any allowed URL, and took them out of the queue."""
    async with _local(app) as admin:
        await _new_queue(admin, "private$/secret")
        key = await _key(admin, "automation", (None, ["MANAGE_TRIGGERS"]))
    trigger = {"name": "t", "queue": "private$/secret", "processing": processing}
    async with _client(app, _bearer(key)) as automation:
        refused = await automation.post("/api/triggers", json=trigger)
        assert refused.status_code == 403, refused.text
        assert refused.json()["detail"] == f"'automation' lacks {right} on 'private$/secret'"
    async with _local(app) as admin:
        assert (await admin.get("/api/triggers")).json() == []
        await _key(admin, "automation", ("private$/secret", [right]))
    async with _client(app, _bearer(key)) as automation:
        assert (await automation.post("/api/triggers", json=trigger)).status_code == 201


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/api/grants", {"principal": "p", "queue": "x\u0000y", "rights": ["PEEK_MESSAGE"]}),
        ("/api/grants", {"principal": "p\u0000", "queue": None, "rights": ["GET_PROPERTIES"]}),
        ("/api/keys", {"principal": "p", "description": "a\u0000b"}),
        ("/api/keys", {"principal": "p" * 100_000}),
    ],
)
async def test_access_bodies_with_text_no_store_holds_are_400_and_audited(
    app: FastAPI, path: str, body: dict[str, Any]
) -> None:
    """A NUL in a grant's pattern or a key's description was a 500 on PostgreSQL ("the message
    store failed") and stored on SQLite; its audit entry, naming the body's text, then failed
    to be written."""
    async with _local(app) as admin:
        answer = await admin.post(path, json=body)
        assert answer.status_code == 400, answer.text
        assert (await admin.get("/api/grants")).json() == []
        assert (await admin.get("/api/keys")).json() == []
        entries = (await admin.get("/api/audit")).json()["entries"]
    assert [(entry["action"], entry["outcome"]) for entry in entries] == [(f"POST {path}", "failed 400")]
    assert len(entries[0]["target"]) <= 2000


async def test_a_flood_of_wrong_secrets_for_one_key_does_not_queue_other_keys_behind_it(
    app: FastAPI,
) -> None:
    """Key IDs are no secret (the Basic user name). Every wrong secret for a known key ID costs a
    scrypt, one at a time, first come first served: 100 of them made a valid key's first
    request wait 4.6 s behind them. Hashes take turns by key ID now, so the flood waits for
    itself and another key's first verification passes it."""
    async with _local(app) as admin:
        target = await _key(admin, "target", (None, ["GET_PROPERTIES"]))
        other = await _key(admin, "other", (None, ["GET_PROPERTIES"]))
    key_id = target.split("_")[1]
    finished: list[str] = []
    first_refused = asyncio.Event()

    async def ask(name: str, key: str) -> None:
        async with _client(app, _bearer(key)) as caller:
            answer = await caller.get("/api/queue-manager")
        assert answer.status_code == (200 if name == "other" else 401)
        finished.append(name)
        first_refused.set()

    flood = [asyncio.create_task(ask("wrong", f"mgw_{key_id}_wrong{n}")) for n in range(20)]
    await first_refused.wait()  # one scrypt done: the rest of the flood waits for its turn
    await asyncio.gather(ask("other", other), *flood)
    assert finished.index("other") < 5, finished
