"""A queue's own security (MQGetQueueSecurity / MQSetQueueSecurity, its owner): shown, changed and
taken over on exactly that queue, guarded by the queue's GET_PERMISSIONS, CHANGE_PERMISSIONS and
TAKE_OWNERSHIP; never reaching another queue, a pattern or the queue manager."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from tests.integration.support import key_with_grants as _key

pytestmark = pytest.mark.anyio
DENIED = "MQ_ERROR_ACCESS_DENIED"


def _client(app: FastAPI, key: str | None = None) -> httpx.AsyncClient:
    """The loopback administrator without a key; a remote principal with one."""
    host = "127.0.0.1" if key is None else "10.1.2.3"
    headers = {} if key is None else {"Authorization": f"Bearer {key}"}
    transport = httpx.ASGITransport(app=app, client=(host, 50000))
    return httpx.AsyncClient(transport=transport, base_url="http://localhost", headers=headers)


async def _grants(admin: httpx.AsyncClient) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = (await admin.get("/api/grants")).json()
    return sorted(listed, key=repr)


async def test_a_queue_named_with_a_star_gives_its_creator_that_queue_only(app: FastAPI) -> None:
    async with _client(app) as admin:
        creator = await _key(admin, "creator", (None, ["CREATE_QUEUE"]))
        assert (await admin.post("/api/queues", json={"path": "private$/orders"})).status_code == 201
        await admin.post("/api/queues/private$/orders/messages", json={"body": "theirs"})
    async with _client(app, creator) as own:
        # A `*` in a queue name is refused: the creator's grant on it would be a pattern.
        assert (await own.post("/api/queues", json={"path": "private$/*"})).status_code == 400
        stolen = await own.post("/api/queues/private$/orders/receive")
        assert stolen.status_code == 403, stolen.text
        assert stolen.json()["mq_error"] == DENIED
    async with _client(app) as admin:
        assert (await admin.get("/api/queues/private$/orders")).json()["message_count"] == 1


async def _setup(app: FastAPI) -> dict[str, str]:
    """alice may create queues and creates private$/mine; the administrator creates
    private$/theirs (no owner: made without credentials); bob may receive from private$/mine."""
    async with _client(app) as admin:
        keys = {
            "alice": await _key(admin, "alice", (None, ["CREATE_QUEUE"])),
            "bob": await _key(admin, "bob", ("private$/mine", ["RECEIVE_MESSAGE"])),
        }
        assert (await admin.post("/api/queues", json={"path": "private$/theirs"})).status_code == 201
    async with _client(app, keys["alice"]) as alice:
        assert (await alice.post("/api/queues", json={"path": "private$/mine"})).status_code == 201
    return keys


async def test_the_owner_sees_and_changes_its_queue_permissions_and_no_others(app: FastAPI) -> None:
    keys = await _setup(app)
    async with _client(app, keys["alice"]) as alice:
        shown = await alice.get("/api/queues/private$/mine/permissions")
        assert shown.status_code == 200, shown.text
        security = shown.json()
        assert security["owner"] == "alice" and security["queue"] == "private$/mine"
        assert security["owner_rights"] == ["GET_PERMISSIONS", "CHANGE_PERMISSIONS"]
        assert [(g["principal"], g["own"], g["mask"]) for g in security["grants"]] == [
            ("alice", True, 0xF003F),
            ("bob", True, 0x3),
        ]
        given = await alice.post(
            "/api/queues/private$/mine/permissions", json={"principal": "carol", "rights": ["WRITE_MESSAGE"]}
        )
        assert given.status_code == 200, given.text
        assert given.json() == {
            "principal": "carol",
            "queue": "private$/mine",
            "rights": ["WRITE_MESSAGE"],
            "mask": 4,
            "exact": False,
        }
        taken = await alice.post(
            "/api/queues/private$/mine/permissions",
            json={"principal": "bob", "rights": ["DELETE_MESSAGE"], "revoke": True},
        )
        assert taken.json()["rights"] == ["PEEK_MESSAGE"]
        for method in ("GET", "POST"):
            other = await alice.request(
                method,
                "/api/queues/private$/theirs/permissions",
                json={"principal": "alice", "rights": ["DELETE"]},
            )
            assert other.status_code == 403 and other.json()["mq_error"] == DENIED
        assert (await alice.get("/api/grants")).status_code == 403
    async with _client(app, keys["bob"]) as bob:
        assert (await bob.post("/api/queues/private$/mine/receive")).status_code == 403
    async with _client(app) as admin:
        audit = (await admin.get("/api/audit?limit=3")).json()["entries"]
        assert [(e["principal"], e["action"], e["outcome"]) for e in audit] == [
            ("alice", "POST /api/queues/{path:path}/permissions", "denied"),
            ("alice", "POST /api/queues/{path:path}/permissions", "allowed 200"),
            ("alice", "POST /api/queues/{path:path}/permissions", "allowed 200"),
        ]
        assert audit[1]["target"] == "path=private$/mine"


async def test_receive_message_alone_is_denied_and_changes_nothing(app: FastAPI) -> None:
    keys = await _setup(app)
    async with _client(app) as admin:
        before = await _grants(admin)
    async with _client(app, keys["bob"]) as bob:
        for method, route, body in (
            ("GET", "permissions", None),
            ("POST", "permissions", {"principal": "bob", "rights": ["GENERIC_ALL"]}),
            ("POST", "owner", None),
        ):
            refused = await bob.request(method, f"/api/queues/private$/mine/{route}", json=body)
            assert refused.status_code == 403, refused.text
            assert refused.json()["mq_error"] == DENIED
            assert refused.json()["detail"].startswith("'bob' lacks ")
    async with _client(app) as admin:
        assert await _grants(admin) == before
        assert (await admin.get("/api/queues/private$/mine/permissions")).json()["owner"] == "alice"


async def test_take_ownership(app: FastAPI) -> None:
    keys = await _setup(app)
    async with _client(app) as admin:
        keys["dave"] = await _key(admin, "dave", ("private$/mine", ["TAKE_OWNERSHIP"]))
        refused = await admin.post("/api/queues/private$/mine/owner")  # the loopback administrator
        assert refused.status_code == 403 and refused.json()["mq_error"] == DENIED
    async with _client(app, keys["dave"]) as dave:
        assert (await dave.get("/api/queues/private$/mine/permissions")).status_code == 403
        taken = await dave.post("/api/queues/PRIVATE$/Mine/owner")
        assert taken.status_code == 200, taken.text
        assert taken.json() == {"queue": "private$/mine", "owner": "dave"}
        # The owner holds GET_PERMISSIONS and CHANGE_PERMISSIONS without a grant.
        assert (await dave.get("/api/queues/private$/mine/permissions")).json()["owner"] == "dave"
        revoked = await dave.post(
            "/api/queues/private$/mine/permissions",
            json={"principal": "alice", "rights": ["GENERIC_ALL"], "revoke": True},
        )
        assert revoked.json()["rights"] == []
        assert (await dave.post("/api/queues/private$/theirs/owner")).status_code == 403
    async with _client(app, keys["alice"]) as alice:
        assert (await alice.get("/api/queues/private$/mine/permissions")).status_code == 403
        assert (await alice.post("/api/queues/private$/mine/owner")).status_code == 403


async def test_an_owner_that_revoked_its_own_grant_still_holds_the_permissions(app: FastAPI) -> None:
    keys = await _setup(app)
    async with _client(app, keys["alice"]) as alice:
        mine = "/api/queues/private$/mine"
        dropped = await alice.post(
            mine + "/permissions", json={"principal": "alice", "rights": ["GENERIC_ALL"], "revoke": True}
        )
        assert dropped.status_code == 200 and dropped.json()["rights"] == []
        assert (await alice.get(mine)).status_code == 403  # GET_PROPERTIES is gone
        assert (await alice.get(mine + "/permissions")).status_code == 200
        regained = await alice.post(
            mine + "/permissions", json={"principal": "alice", "rights": ["GET_PROPERTIES"]}
        )
        assert regained.status_code == 200
        assert (await alice.get(mine)).status_code == 200
        assert (await alice.post(mine + "/owner")).status_code == 403  # TAKE_OWNERSHIP went too


async def test_a_deleted_queue_takes_its_owner_and_own_grants_with_it(app: FastAPI) -> None:
    keys = await _setup(app)
    async with _client(app, keys["alice"]) as alice:
        assert (await alice.delete("/api/queues/private$/mine")).status_code == 200
    async with _client(app) as admin:
        assert (await admin.post("/api/queues", json={"path": "private$/MINE"})).status_code == 201
        security = (await admin.get("/api/queues/private$/mine/permissions")).json()
        assert security == {
            "queue": "private$/MINE",
            "owner": None,
            "owner_rights": ["GET_PERMISSIONS", "CHANGE_PERMISSIONS"],
            "grants": [],
        }
    async with _client(app, keys["alice"]) as alice:
        assert (await alice.get("/api/queues/private$/mine/permissions")).status_code == 403


KELVIN = "\u212a"  # KELVIN SIGN: Windows does not fold it to `k`, so neither do queue paths


async def test_change_permissions_on_one_queue_reaches_no_other_queue_pattern_or_the_queue_manager(
    app: FastAPI,
) -> None:
    """carol holds CHANGE_PERMISSIONS on exactly private$/k and tries to write anywhere else."""
    async with _client(app) as admin:
        for name in ("private$/k", "private$/b", f"private$/{KELVIN}"):
            assert (await admin.post("/api/queues", json={"path": name})).status_code == 201, name
        carol = await _key(admin, "carol", ("private$/k", ["CHANGE_PERMISSIONS"]))
        before = await _grants(admin)
    grab = {"principal": "carol", "rights": ["GENERIC_ALL"]}
    async with _client(app, carol) as client:
        for target in (
            "private$/b",
            "private%24%2Fb",  # percent-encoded: the same queue b
            f"private$/{KELVIN}",
            "private$/%E2%84%AA",
            "private$/k*",  # a queue whose name holds `*`, not a pattern
            "private$/k%2A",
            "*",  # the queue named `*`: not every queue
            "private$/*",  # no such queue: not a pattern either
            "DIRECT=OS:.%5Cprivate$%5Cb",  # a format name designating queue b
        ):
            refused = await client.post(f"/api/queues/{target}/permissions", json=grab)
            assert refused.status_code in (400, 403, 404), (target, refused.text)
        for target in ("private$/k/", "private$/k//", "private$/k%2F", "private$"):
            malformed = await client.post(f"/api/queues/{target}/permissions", json=grab)
            assert malformed.status_code == 400, (target, malformed.text)
        not_a_queue_right = await client.post(
            "/api/queues/private$/k/permissions", json={"principal": "carol", "rights": ["CREATE_QUEUE"]}
        )
        assert not_a_queue_right.status_code == 400
        assert not_a_queue_right.json()["mq_error"] == "MQ_ERROR_INVALID_PARAMETER"
    async with _client(app) as admin:
        assert await _grants(admin) == before
    async with _client(app, carol) as client:
        # On its own queue, spelled any way, a sneaked-in scope is ignored: the grant is on k only.
        sneaky = dict(grab, queue="*", exact=False)
        given = await client.post("/api/queues/PRIVATE$%5CK/permissions", json=sneaky)
        assert given.status_code == 200, given.text
        assert (given.json()["queue"], given.json()["mask"]) == ("private$/k", 0xF003F)
        for other in ("private$/b", f"private$/{KELVIN}"):
            assert (await client.get(f"/api/queues/{other}")).status_code == 403, other
        assert (await client.get("/api/queues/private$/k")).status_code == 200
        assert (await client.get("/api/grants")).status_code == 403
    async with _client(app) as admin:
        after = await _grants(admin)
    assert [g for g in after if g not in before] == [
        {
            "principal": "carol",
            "queue": "private$/k",
            "rights": _every_queue_right(),
            "mask": 0xF003F,
            "exact": False,
        }
    ]


def _every_queue_right() -> list[str]:
    from qm.rights import rights_names

    return rights_names(0xF003F, "private$/k")


async def test_a_queue_created_over_soap_with_a_key_is_its_creators(app: FastAPI) -> None:
    from soap.namespaces import SOAP_ENV
    from soap.service import TARGET_NAMESPACE

    async with _client(app) as admin:
        alice = await _key(admin, "alice", (None, ["CREATE_QUEUE"]))
    envelope = (
        f'<s:Envelope xmlns:s="{SOAP_ENV}" xmlns:gw="{TARGET_NAMESPACE}"><s:Body>'
        "<gw:CreateQueue><path>PRIVATE$\\Soapy</path></gw:CreateQueue></s:Body></s:Envelope>"
    )
    async with _client(app, alice) as client:
        created = await client.post("/soap", content=envelope, headers={"Content-Type": "text/xml"})
        assert created.status_code == 200, created.text
        security = (await client.get("/api/queues/private$/soapy/permissions")).json()
    assert security["owner"] == "alice"
    assert [(g["principal"], g["own"]) for g in security["grants"]] == [("alice", True)]


async def test_the_callers_rights_on_its_queue_include_what_it_holds_as_owner(app: FastAPI) -> None:
    keys = await _setup(app)
    async with _client(app, keys["alice"]) as alice:
        await alice.post(
            "/api/queues/private$/mine/permissions",
            json={"principal": "alice", "rights": ["GENERIC_ALL"], "revoke": True},
        )
        rights = (await alice.get("/api/me/rights", params={"queue": "private$/mine"})).json()
    assert rights == {"queue": "private$/mine", "rights": ["GET_PERMISSIONS", "CHANGE_PERMISSIONS"]}
    async with _client(app, keys["bob"]) as bob:
        rights = (await bob.get("/api/me/rights", params={"queue": "private$/mine"})).json()
    assert rights["rights"] == ["DELETE_MESSAGE", "PEEK_MESSAGE"]


async def test_a_built_in_principal_owns_nothing(app: FastAPI) -> None:
    """No key proves `anonymous` or `anonymous-srmp`, and keyless callers given TAKE_OWNERSHIP
    cannot take a queue: what `anonymous` owned would be every keyless caller's."""
    async with _client(app) as admin:
        for built_in in ("anonymous", "anonymous-srmp"):
            refused_key = await admin.post("/api/keys", json={"principal": built_in})
            assert refused_key.status_code == 400, refused_key.text
        assert (await admin.post("/api/queues", json={"path": "private$/shared"})).status_code == 201
        granted = await admin.post(
            "/api/grants",
            json={"principal": "anonymous", "queue": "private$/shared", "rights": ["TAKE_OWNERSHIP"]},
        )
        assert granted.status_code == 200, granted.text
    transport = httpx.ASGITransport(app=app, client=("10.1.2.3", 50000))
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as keyless:
        taken = await keyless.post("/api/queues/private$/shared/owner")
        assert taken.status_code in (400, 403), taken.text
    async with _client(app) as admin:
        assert (await admin.get("/api/queues/private$/shared/permissions")).json()["owner"] is None
