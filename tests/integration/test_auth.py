"""Credentials at the edge: API keys as Bearer or HTTP Basic, the anonymous administrator on
loopback only, queue ownership, the audit log, and the start-up refusal on a network address."""

from __future__ import annotations

import asyncio
import base64
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from app import auth, keys
from app.main import create_app
from app.settings import Settings
from qm.clock import SettableClock

pytestmark = pytest.mark.anyio


@pytest.fixture
def closed_settings(settings: Settings) -> Settings:
    """No anonymous administrator: every caller proves who it is."""
    return settings.model_copy(update={"anonymous_admin": False})


@pytest.fixture
async def closed_app(closed_settings: Settings, clock: SettableClock) -> AsyncIterator[FastAPI]:
    application = create_app(closed_settings, clock)
    async with application.router.lifespan_context(application):
        yield application


def _client(
    app: FastAPI, host: str = "127.0.0.1", headers: dict[str, str] | None = None
) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=(host, 50000))
    return httpx.AsyncClient(transport=transport, base_url="http://localhost", headers=headers)


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


async def _key(
    client: httpx.AsyncClient, principal: str, *grants: tuple[str | None, list[str]]
) -> dict[str, Any]:
    for queue, rights in grants:
        granted = await client.post(
            "/api/grants", json={"principal": principal, "queue": queue, "rights": rights}
        )
        assert granted.status_code == 200, granted.text
    created = await client.post("/api/keys", json={"principal": principal, "description": "test"})
    assert created.status_code == 201, created.text
    body: dict[str, Any] = created.json()
    return body


async def test_a_key_works_as_bearer_and_as_basic_with_principal_or_key_id(app: FastAPI) -> None:
    async with _client(app) as admin:
        assert (await admin.post("/api/queues", json={"path": "private$/orders"})).status_code == 201
        key = await _key(admin, "orders-app", ("private$/orders", ["WRITE_MESSAGE"]))
    assert key["key"].startswith("mgw_") and key["principal"] == "orders-app"
    for headers in (_bearer(key["key"]), _basic("orders-app", key["key"]), _basic(key["key_id"], key["key"])):
        async with _client(app, "10.1.2.3", headers) as remote:
            sent = await remote.post("/api/queues/private$/orders/messages", json={"body": "hi"})
            assert sent.status_code == 201, sent.text
            denied = await remote.post("/api/queues/private$/orders/receive")
            assert denied.status_code == 403
            assert denied.json()["detail"] == "'orders-app' lacks RECEIVE_MESSAGE on 'private$/orders'"
    async with _client(app) as admin:
        assert (await admin.get("/api/queues/private$/orders")).json()["message_count"] == 3
        listed = (await admin.get("/api/keys")).json()
    assert [(item["key_id"], item["principal"]) for item in listed] == [(key["key_id"], "orders-app")]
    assert "key" not in listed[0]  # shown once


@pytest.mark.parametrize(
    "headers",
    [
        _bearer("mgw_0000000000000000_nope"),
        _bearer("not-a-key"),
        _basic("someone-else", "mgw_0000000000000000_nope"),
        {"Authorization": "Basic !!!"},
        {"Authorization": "Digest abc"},
    ],
)
async def test_credentials_that_are_not_valid_are_401_even_on_loopback(
    app: FastAPI, headers: dict[str, str]
) -> None:
    async with _client(app, headers=headers) as client:
        response = await client.post("/api/queues", json={"path": "private$/x"})
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Basic")
    assert response.json()["mq_error"] == "MQ_ERROR_ACCESS_DENIED"
    async with _client(app) as admin:
        assert (await admin.get("/api/queues/private$/x")).status_code == 404  # nothing done


async def test_a_key_of_another_principal_is_refused_under_basic(app: FastAPI) -> None:
    async with _client(app) as admin:
        key = await _key(admin, "a", (None, ["GET_PROPERTIES"]))
    async with _client(app, headers=_basic("b", key["key"])) as client:
        assert (await client.get("/api/queue-manager")).status_code == 401
    async with _client(app, headers=_basic("a", key["key"])) as client:
        assert (await client.get("/api/queue-manager")).status_code == 200


async def test_a_revoked_key_is_refused_at_once(app: FastAPI) -> None:
    async with _client(app) as admin:
        key = await _key(admin, "ops", (None, ["GET_PROPERTIES"]))
        async with _client(app, headers=_bearer(key["key"])) as client:
            assert (await client.get("/api/queue-manager")).status_code == 200
            assert (await admin.delete(f"/api/keys/{key['key_id']}")).status_code == 204
            assert (await client.get("/api/queue-manager")).status_code == 401
        assert (await admin.delete(f"/api/keys/{key['key_id']}")).status_code == 404


def _count_hashes(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The salts of every key hash from now on (scrypt is what the caches must spare)."""
    hashed: list[bytes] = []
    original = keys.hash_secret

    def counting(secret: str, salt: bytes) -> bytes:
        hashed.append(salt)
        return original(secret, salt)

    monkeypatch.setattr(keys, "hash_secret", counting)
    return hashed


async def test_a_verified_key_is_not_hashed_again(app: FastAPI, monkeypatch: pytest.MonkeyPatch) -> None:
    async with _client(app) as admin:
        key = await _key(admin, "ops", (None, ["GET_PROPERTIES"]))
    hashed = _count_hashes(monkeypatch)
    async with _client(app, headers=_bearer(key["key"])) as client:
        for _ in range(5):
            assert (await client.get("/api/queue-manager")).status_code == 200
        wrong = key["key"][:-2] + ("AA" if not key["key"].endswith("AA") else "BB")
        assert (await client.get("/api/queue-manager", headers=_bearer(wrong))).status_code == 401
    assert len(hashed) == 1  # the first request only: a wrong secret differs from the one remembered


async def test_without_the_anonymous_administrator_anonymous_has_only_its_grants(closed_app: FastAPI) -> None:
    async with _client(closed_app) as anonymous:
        refused = await anonymous.post("/api/queues", json={"path": "private$/x"})
        assert refused.status_code == 403
        assert refused.json()["detail"] == "'anonymous' lacks CREATE_QUEUE on the queue manager"
        assert (await anonymous.post("/api/keys", json={"principal": "me"})).status_code == 403


async def test_the_anonymous_administrator_is_on_loopback_only(app: FastAPI) -> None:
    async with _client(app, "10.1.2.3") as remote:
        refused = await remote.post("/api/queues", json={"path": "private$/x"})
        assert refused.status_code == 403
        assert (await remote.get("/healthz")).status_code == 200  # public
    for loopback in ("127.0.0.1", "127.8.9.10", "::1"):
        async with _client(app, loopback) as local:
            assert (await local.get("/api/queues")).status_code == 200


async def test_the_creator_owns_its_queue_and_nobody_else_does(app: FastAPI) -> None:
    async with _client(app) as admin:
        creator = await _key(admin, "creator", (None, ["CREATE_QUEUE"]))
        other = await _key(admin, "other", (None, ["CREATE_QUEUE"]))
    async with _client(app, "10.1.2.3", _bearer(creator["key"])) as client:
        assert (await client.post("/api/queues", json={"path": "private$/Mine"})).status_code == 201
        assert (
            await client.post("/api/queues/private$/mine/messages", json={"body": "x"})
        ).status_code == 201
        assert (await client.post("/api/queues/PRIVATE$/MINE/receive")).status_code == 200
        assert (await client.patch("/api/queues/private$/mine", json={"label": "l"})).status_code == 200
    async with _client(app, "10.1.2.3", _bearer(other["key"])) as client:
        assert (await client.delete("/api/queues/private$/mine")).status_code == 403
        assert (
            await client.post("/api/queues/private$/mine/messages", json={"body": "x"})
        ).status_code == 403
    async with _client(app) as admin:
        grants = (await admin.get("/api/grants", params={"principal": "creator"})).json()
    assert {"queue": "private$/Mine", "mask": 0xF003F} in [
        {"queue": grant["queue"], "mask": grant["mask"]} for grant in grants
    ]
    async with _client(app, "10.1.2.3", _bearer(creator["key"])) as client:
        assert (await client.delete("/api/queues/private$/mine")).status_code == 200


async def test_a_caller_is_told_who_it_is_and_what_it_may_do(app: FastAPI) -> None:
    async with _client(app) as admin:
        assert (await admin.post("/api/queues", json={"path": "private$/orders"})).status_code == 201
        me = (await admin.get("/api/me")).json()
        assert me["administrator"] is True and me["authenticated"] is False
        everything = (await admin.get("/api/me/rights", params={"queue": "private$/orders"})).json()
        assert {"PEEK_MESSAGE", "DELETE", "WRITE_MESSAGE"} <= set(everything["rights"])
        key = await _key(admin, "reader", ("private$/orders", ["PEEK_MESSAGE"]), (None, ["GET_PROPERTIES"]))
    async with _client(app, "10.1.2.3", _bearer(key["key"])) as client:
        assert (await client.get("/api/me")).json() == {
            "principal": "reader",
            "authenticated": True,
            "administrator": False,
            "client_certificate": None,  # plain HTTP: no certificate
        }
        rights = await client.get("/api/me/rights", params={"queue": "PRIVATE$/Orders"})
        assert rights.json() == {"queue": "PRIVATE$/Orders", "rights": ["PEEK_MESSAGE"]}
        other = await client.get("/api/me/rights", params={"queue": "private$/other"})
        assert other.json()["rights"] == []
        assert (await client.get("/api/me/rights")).json()["rights"] == ["GET_PROPERTIES"]
        assert (await client.get("/api/me/rights", params={"queue": "private$/"})).status_code == 400


async def test_a_move_needs_write_on_the_queue_it_writes_to(app: FastAPI) -> None:
    async with _client(app) as admin:
        for queue in ("private$/source", "private$/target", "private$/other"):
            assert (await admin.post("/api/queues", json={"path": queue})).status_code == 201
        sent = await admin.post("/api/queues/private$/source/messages", json={"body": "x"})
        lookup_id = sent.json()["lookup_id"]
        mover = await _key(
            admin,
            "mover",
            ("private$/source", ["RECEIVE_MESSAGE"]),
            ("private$/target", ["WRITE_MESSAGE"]),
        )
    async with _client(app, "10.1.2.3", _bearer(mover["key"])) as client:
        move = "/api/queues/private$/source/messages/move"
        refused = await client.post(move, json={"lookup_ids": [lookup_id], "to": "private$/other"})
        assert refused.status_code == 403, refused.text
        async with _client(app) as admin:
            assert (await admin.get("/api/queues/private$/source")).json()["message_count"] == 1
        moved = await client.post(move, json={"lookup_ids": [lookup_id], "to": "private$/target"})
        assert moved.status_code == 200, moved.text


async def test_changes_are_audited_with_principal_client_and_outcome(app: FastAPI) -> None:
    async with _client(app) as admin:
        ops = await _key(admin, "ops", (None, ["CREATE_QUEUE", "READ_AUDIT"]))
    async with _client(app, "10.1.2.3", _bearer(ops["key"])) as client:
        assert (await client.post("/api/queues", json={"path": "private$/a"})).status_code == 201
        assert (await client.post("/api/queues", json={"path": "private$/a"})).status_code == 409
        assert (await client.patch("/api/queue-manager", json={"throttled": False})).status_code == 403
        assert (await client.post("/api/queues/private$/a/messages", json={"body": "x"})).status_code == 201
        page = (await client.get("/api/audit", params={"limit": 2})).json()
        rest = (await client.get("/api/audit", params={"before": page["next_before"]})).json()
    entries = page["entries"] + rest["entries"]
    seen = [(entry["principal"], entry["client"], entry["action"], entry["outcome"]) for entry in entries]
    assert seen[:3] == [
        ("ops", "10.1.2.3:50000", "PATCH /api/queue-manager", "denied"),
        ("ops", "10.1.2.3:50000", "POST /api/queues", "failed 409"),
        ("ops", "10.1.2.3:50000", "POST /api/queues", "allowed 201"),
    ]  # message traffic is not audited
    assert all(entry["action"] != "POST /api/queues/{path:path}/messages" for entry in entries)


async def test_anonymous_refusals_are_not_audited(app: FastAPI) -> None:
    async with _client(app, "10.1.2.3") as remote:
        for number in range(3):
            assert (await remote.post("/api/queues", json={"path": f"private$/{number}"})).status_code == 403
    async with _client(app) as admin:
        entries = (await admin.get("/api/audit")).json()["entries"]
    assert all(entry["outcome"] != "denied" for entry in entries)


def test_a_network_address_without_authentication_refuses_to_start(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    network = settings.model_copy(update={"host": "0.0.0.0"})
    with pytest.raises(RuntimeError, match=r"refusing to listen on 0\.0\.0\.0"):
        create_app(network)
    create_app(network.model_copy(update={"anonymous_admin": False}))  # keys only: starts
    create_app(settings.model_copy(update={"host": "localhost"}))
    with caplog.at_level(logging.WARNING, logger="app.auth"):
        create_app(network.model_copy(update={"allow_unauthenticated_network": True}))
    assert "WITHOUT CREDENTIALS" in caplog.text


async def test_the_unauthenticated_network_setting_makes_everyone_administrator(
    settings: Settings, clock: SettableClock
) -> None:
    opened = settings.model_copy(update={"allow_unauthenticated_network": True})
    application = create_app(opened, clock)
    async with application.router.lifespan_context(application), _client(application, "10.1.2.3") as remote:
        assert (await remote.post("/api/queues", json={"path": "private$/x"})).status_code == 201


@pytest.mark.parametrize(
    "name",
    [
        "DIRECT=OS:localhost\\private$\\orders",
        "direct=os:127.0.0.1\\PRIVATE$\\ORDERS",
        "DIRECT=HTTP://localhost/msmq/private$/orders",
    ],
)
async def test_a_format_name_needs_the_right_of_the_queue_it_designates(app: FastAPI, name: str) -> None:
    async with _client(app) as admin:
        assert (await admin.post("/api/queues", json={"path": "private$/orders"})).status_code == 201
        assert (
            await admin.post("/api/queues/private$/orders/messages", json={"body": "x"})
        ).status_code == 201
        reader = await _key(admin, "reader", ("private$/other", ["GENERIC_ALL"]))
    async with _client(app, "10.1.2.3", _bearer(reader["key"])) as client:
        for method, suffix in (("POST", "/receive"), ("GET", "/peek"), ("POST", "/messages"), ("DELETE", "")):
            response = await client.request(method, f"/api/queues/{name}{suffix}", json={"body": "y"})
            assert response.status_code == 403, (method, suffix, response.text)
    async with _client(app) as admin:
        assert (await admin.get("/api/queues/private$/orders")).json()["message_count"] == 1


async def test_a_send_to_a_remote_queue_needs_the_right_on_its_outgoing_queue(app: FastAPI) -> None:
    remote = "DIRECT=HTTP://remote.example/msmq/private$/orders"
    async with _client(app) as admin:
        writer = await _key(admin, "writer", ("private$/*", ["WRITE_MESSAGE"]))
        outgoing = await _key(admin, "outgoing", ("DIRECT=HTTP://remote.example/*", ["WRITE_MESSAGE"]))
    async with _client(app, "10.1.2.3", _bearer(writer["key"])) as client:
        refused = await client.post(f"/api/queues/{remote}/messages", json={"body": "x"})
        assert refused.json()["mq_error"] == "MQ_ERROR_ACCESS_DENIED", refused.text
        assert f"lacks WRITE_MESSAGE on {remote!r}" in refused.json()["detail"]
    async with _client(app, "10.1.2.3", _bearer(outgoing["key"])) as client:
        sent = await client.post(f"/api/queues/{remote}/messages", json={"body": "x"})
        # Past the right: refused by the outbound allow-list (MSMQGW_SRMP_OUTBOUND_HOSTS) instead.
        assert sent.json()["mq_error"] == "MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION", sent.text


async def test_requests_arriving_together_with_a_new_key_hash_it_once(
    app: FastAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with _client(app) as admin:
        key = await _key(admin, "ops", (None, ["GET_PROPERTIES"]))
    hashed = _count_hashes(monkeypatch)
    async with _client(app, headers=_bearer(key["key"])) as client:
        answers = await asyncio.gather(*(client.get("/api/queue-manager") for _ in range(16)))
    assert [answer.status_code for answer in answers] == [200] * 16
    assert len(hashed) == 1


async def test_a_grant_taken_away_here_is_refused_at_once(app: FastAPI) -> None:
    async with _client(app) as admin:
        await admin.post("/api/queues", json={"path": "private$/orders"})
        key = await _key(admin, "app", ("private$/orders", ["WRITE_MESSAGE"]))
        async with _client(app, "10.1.2.3", _bearer(key["key"])) as client:
            for _ in range(2):  # the second is answered from the remembered decision
                assert (
                    await client.post("/api/queues/private$/orders/messages", json={"body": "x"})
                ).status_code == 201
            revoke = {
                "principal": "app",
                "queue": "private$/orders",
                "rights": ["WRITE_MESSAGE"],
                "revoke": True,
            }
            assert (await admin.post("/api/grants", json=revoke)).json()["rights"] == []
            assert (
                await client.post("/api/queues/private$/orders/messages", json={"body": "x"})
            ).status_code == 403


async def test_a_grant_taken_away_by_another_process_is_refused_once_remembered_grants_expire(
    app: FastAPI, settings: Settings, clock: SettableClock
) -> None:
    ticks = [1000.0]
    security: auth.Security = app.state.security
    security.access._monotonic = lambda: ticks[0]  # this process's clock of remembered grants
    async with _client(app) as admin:
        await admin.post("/api/queues", json={"path": "private$/orders"})
        key = await _key(admin, "app", ("private$/orders", ["WRITE_MESSAGE"]))
    other = create_app(settings, clock)  # another gateway process on the same database
    async with other.router.lifespan_context(other), _client(other) as other_admin:
        async with _client(app, "10.1.2.3", _bearer(key["key"])) as client:
            assert (
                await client.post("/api/queues/private$/orders/messages", json={"body": "x"})
            ).status_code == 201
            revoke = {
                "principal": "app",
                "queue": "private$/orders",
                "rights": ["WRITE_MESSAGE"],
                "revoke": True,
            }
            assert (await other_admin.post("/api/grants", json=revoke)).status_code == 200
            assert (
                await client.post("/api/queues/private$/orders/messages", json={"body": "x"})
            ).status_code == 201
            ticks[0] += settings.auth_cache_ttl_s
            assert (
                await client.post("/api/queues/private$/orders/messages", json={"body": "x"})
            ).status_code == 403


async def test_a_deleted_queue_takes_its_grants_and_a_new_one_of_that_name_is_its_creators(
    app: FastAPI,
) -> None:
    async with _client(app) as admin:
        first = await _key(admin, "first", (None, ["CREATE_QUEUE"]))
        second = await _key(admin, "second", (None, ["CREATE_QUEUE"]))
        grant = {"principal": "reader", "queue": "PRIVATE$/Shared", "rights": ["PEEK_MESSAGE"]}
        assert (await admin.post("/api/grants", json=grant)).status_code == 200
        pattern = {"principal": "reader", "queue": "private$/shar*", "rights": ["GET_PROPERTIES"]}
        assert (await admin.post("/api/grants", json=pattern)).status_code == 200
    async with _client(app, "10.1.2.3", _bearer(first["key"])) as client:
        assert (await client.post("/api/queues", json={"path": "private$/shared"})).status_code == 201
        assert (await client.delete("/api/queues/private$/shared")).status_code == 200
    async with _client(app, "10.1.2.3", _bearer(second["key"])) as client:
        assert (await client.post("/api/queues", json={"path": "private$/shared"})).status_code == 201
    async with _client(app, "10.1.2.3", _bearer(first["key"])) as client:
        assert (
            await client.post("/api/queues/private$/shared/messages", json={"body": "x"})
        ).status_code == 403
    async with _client(app) as admin:
        left = {(grant["principal"], grant["queue"]) for grant in (await admin.get("/api/grants")).json()}
    assert ("reader", "PRIVATE$/Shared") not in left  # the queue's own grants went with it
    assert ("reader", "private$/shar*") in left  # patterns stay: they name no one queue
    assert ("second", "private$/shared") in left


async def test_a_key_is_looked_up_again_when_remembered_but_never_hashed_again(
    app: FastAPI, settings: Settings, clock: SettableClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the TTL a key costs one read of its record (revoked elsewhere? refused), not scrypt."""
    ticks = [1000.0]
    security: auth.Security = app.state.security
    security.keys._monotonic = lambda: ticks[0]
    async with _client(app) as admin:
        key = await _key(admin, "ops", (None, ["GET_PROPERTIES"]))
    hashed = _count_hashes(monkeypatch)
    async with _client(app, headers=_bearer(key["key"])) as client:
        for _ in range(3):
            assert (await client.get("/api/queue-manager")).status_code == 200
            ticks[0] += settings.auth_cache_ttl_s
        assert (await client.get("/api/queue-manager")).status_code == 200  # looked up, remembered
        assert len(hashed) == 1
        other = create_app(settings, clock)  # another gateway process revokes it
        async with other.router.lifespan_context(other), _client(other) as other_admin:
            assert (await other_admin.delete(f"/api/keys/{key['key_id']}")).status_code == 204
        assert (await client.get("/api/queue-manager")).status_code == 200  # remembered
        ticks[0] += settings.auth_cache_ttl_s
        assert (await client.get("/api/queue-manager")).status_code == 401
