"""Every operation of the served OpenAPI document and of the WSDL, called by a principal that
holds exactly the right its rule names (not refused) and by one that holds every right but that
one (refused with MQ_ERROR_ACCESS_DENIED, and nothing changed). A new endpoint without a rule
in app/access_rules.py fails here: it is refused to everyone, and it is missing from the table.
"""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from lxml import etree

from app.access_openapi import _route_path
from app.access_rules import RULES, SOAP_RULES, Locate
from qm.rights import QueueManagerRight, QueueRight
from soap.namespaces import SOAP_ENV
from soap.service import TARGET_NAMESPACE, wsdl_document

pytestmark = pytest.mark.anyio

QUEUE = "private$/walk"
OTHER_QUEUE = "private$/walk-created"
ALL_QUEUE_RIGHTS = [right for right in QueueRight if right.value.bit_count() == 1]
ALL_QM_RIGHTS = [right for right in QueueManagerRight if right.value.bit_count() == 1]


def operations(app: FastAPI) -> list[tuple[str, str]]:
    document = app.openapi()
    return sorted((method.upper(), path) for path, item in document["paths"].items() for method in item)


def soap_operations() -> list[str]:
    wsdl = etree.fromstring(wsdl_document("http://localhost/soap"))
    names = wsdl.xpath(
        "//wsdl:portType/wsdl:operation/@name", namespaces={"wsdl": "http://schemas.xmlsoap.org/wsdl/"}
    )
    return sorted(str(name) for name in names)


async def test_every_operation_has_exactly_one_rule(app: FastAPI) -> None:
    missing = [f"{method} {path}" for method, path in operations(app) if path != "/msmq/{path}"]
    missing = [name for name in missing if tuple(_key(name)) not in RULES]
    assert not missing, f"operations without an access rule (app/access_rules.py): {missing}"
    assert soap_operations() == sorted(SOAP_RULES)


def _key(name: str) -> tuple[str, str]:
    method, path = name.split(" ", 1)
    return method, _route_path(path)


class Walk:
    """Principals with exactly one right, or with every right but one, made through the API by
    the anonymous administrator (the test client is on loopback)."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client
        self.keys: dict[str, str] = {}

    async def key_for(self, name: str, grants: list[tuple[str | None, list[str]]]) -> dict[str, str]:
        # Every time: deleting the walk queue (an operation walked) deletes the grants on it.
        for queue, rights in grants:
            granted = await self.client.post(
                "/api/grants", json={"principal": name, "queue": queue, "rights": rights}
            )
            assert granted.status_code == 200, granted.text
        if name not in self.keys:
            created = await self.client.post("/api/keys", json={"principal": name})
            assert created.status_code == 201, created.text
            self.keys[name] = created.json()["key"]
        return {"Authorization": f"Bearer {self.keys[name]}"}

    async def holding(self, right: QueueRight | QueueManagerRight) -> dict[str, str]:
        if isinstance(right, QueueManagerRight):
            grants: list[tuple[str | None, list[str]]] = [(None, _names(right))]
        else:
            grants = [(QUEUE, _names(right))]
        return await self.key_for(f"with-{_scope(right)}-{right.name}", grants)

    async def lacking(self, right: QueueRight | QueueManagerRight) -> dict[str, str]:
        """Every other right, everywhere: only the one right the operation needs is missing."""
        queue_rights = [r for r in ALL_QUEUE_RIGHTS if r & right != r or isinstance(right, QueueManagerRight)]
        qm_rights = [r for r in ALL_QM_RIGHTS if r & right != r or isinstance(right, QueueRight)]
        grants = [(None, [r.name or "" for r in qm_rights]), ("*", [r.name or "" for r in queue_rights])]
        return await self.key_for(f"without-{_scope(right)}-{right.name}", grants)

    async def prepare(self) -> dict[str, str]:
        """The walk queue with messages and an open cursor: values for the path parameters."""
        await self.client.post("/api/queues", json={"path": QUEUE})
        await self.client.delete(f"/api/queues/{OTHER_QUEUE}")
        for body in ("one", "two", "three"):
            sent = await self.client.post(f"/api/queues/{QUEUE}/messages", json={"body": body})
            assert sent.status_code == 201, sent.text
        lookup_id = sent.json()["lookup_id"]
        cursor = await self.client.post("/api/cursors", json={"queue": QUEUE})
        assert cursor.status_code == 201, cursor.text
        return {
            "{path}": QUEUE,
            "{lookup_id}": lookup_id,
            "{cursor_id}": cursor.json()["id"],
            "{tag}": f"{lookup_id}.nope",
            "{transaction_id}": "0" * 32,
            "{queue_id}": "1",
            "{trigger}": "00000000-0000-0000-0000-000000000000",
            "{rule}": "00000000-0000-0000-0000-000000000000",
            "{name}": "nobody",
            "{key_id}": "0000000000000000",
        }

    async def state(self) -> Any:
        """What a refused operation must leave as it was."""
        queues = (await self.client.get("/api/queues")).json()
        grants = (await self.client.get("/api/grants")).json()
        keys = (await self.client.get("/api/keys")).json()
        settings = (await self.client.get("/api/queue-manager")).json()
        triggers = (await self.client.get("/api/triggers")).json()
        rules = (await self.client.get("/api/rules")).json()
        return queues, grants, keys, settings, triggers, rules


BODIES: dict[tuple[str, str], dict[str, Any]] = {
    ("POST", "/api/queues"): {"json": {"path": OTHER_QUEUE}},
    ("POST", "/api/cursors"): {"json": {"queue": QUEUE}},
    ("POST", "/api/keys"): {"json": {"principal": "someone"}},
    ("POST", "/api/grants"): {"json": {"principal": "someone", "queue": QUEUE, "rights": ["PEEK_MESSAGE"]}},
    ("POST", "/api/queues/{path}/messages"): {"json": {"body": "x"}},
    ("PATCH", "/api/queues/{path}"): {"json": {"label": "changed"}},
    ("PATCH", "/api/queue-manager"): {"json": {"throttled": False}},
}


def _call(method: str, path: str, values: dict[str, str]) -> tuple[str, dict[str, Any]]:
    for placeholder, value in values.items():
        path = path.replace(placeholder, value)
    return path, BODIES.get((method, path), {})


def _scope(right: QueueRight | QueueManagerRight) -> str:
    return "qm" if isinstance(right, QueueManagerRight) else "queue"


def _names(right: QueueRight | QueueManagerRight) -> list[str]:
    return [right.name or ""]


def _refused(response: httpx.Response) -> bool:
    return response.status_code == 403 and response.json().get("mq_error") == "MQ_ERROR_ACCESS_DENIED"


async def test_every_rest_operation_needs_its_right_and_only_it(
    app: FastAPI, client: httpx.AsyncClient
) -> None:
    walk = Walk(client)
    failures = []
    for method, template in operations(app):
        rule = RULES.get((method, _route_path(template)))
        if template == "/msmq/{path}" or rule is None or rule.right is None:
            continue  # SRMP: its own principal (docs/security.md); public; SOAP: below
        values = await walk.prepare()
        path, extras = _call(method, template, values)
        extras = BODIES.get((method, template), extras)
        lacking, holding = await walk.lacking(rule.right), await walk.holding(rule.right)
        before = await walk.state()
        refused = await client.request(method, path, headers=lacking, **extras)
        if not _refused(refused):
            failures.append(
                f"{method} {template} without {rule.right.name}: {refused.status_code} {refused.text}"
            )
        elif await walk.state() != before:
            failures.append(f"{method} {template} without {rule.right.name}: refused but changed something")
        allowed = await client.request(method, path, headers=holding, **extras)
        if allowed.status_code in (401, 403):
            failures.append(
                f"{method} {template} with {rule.right.name}: {allowed.status_code} {allowed.text}"
            )
    assert not failures, "\n".join(failures)


def _soap(operation: str) -> bytes:
    queue_ops = {"Send", "Receive", "Peek", "ReceiveByLookupId", "PeekByLookupId"}
    path_ops = {"GetQueue", "DeleteQueue", "PurgeQueue"}
    if operation in queue_ops:
        inner = f"<queue>{QUEUE}</queue>"
        if operation == "Send":
            inner += f"<message><body>{base64.b64encode(b'hi').decode()}</body></message>"
        if operation.endswith("ByLookupId"):
            inner += "<action>first</action>"
    elif operation in path_ops:
        inner = f"<path>{QUEUE}</path>"
    elif operation == "CreateQueue":
        inner = f"<path>{OTHER_QUEUE}</path>"
    elif operation in ("CommitTransaction", "AbortTransaction"):
        inner = f"<transaction>{'0' * 32}</transaction>"
    else:
        inner = ""
    return (
        f'<s:Envelope xmlns:s="{SOAP_ENV}" xmlns:gw="{TARGET_NAMESPACE}"><s:Body>'
        f"<gw:{operation}>{inner}</gw:{operation}></s:Body></s:Envelope>"
    ).encode()


def _fault_code(response: httpx.Response) -> str | None:
    return next(iter(etree.fromstring(response.content).xpath("//*[local-name()='code']/text()")), None)


async def test_every_soap_operation_needs_its_right_and_only_it(client: httpx.AsyncClient) -> None:
    walk = Walk(client)
    failures = []
    headers = {"Content-Type": "text/xml; charset=utf-8"}
    for operation in soap_operations():
        right, _audited = SOAP_RULES[operation]
        await walk.prepare()
        lacking, holding = await walk.lacking(right), await walk.holding(right)
        before = await walk.state()
        refused = await client.post("/soap", content=_soap(operation), headers=headers | lacking)
        if refused.status_code != 500 or "MQ_ERROR_ACCESS_DENIED" not in refused.text:
            failures.append(f"SOAP {operation} without {right.name}: {refused.status_code} {refused.text}")
        elif await walk.state() != before:
            failures.append(f"SOAP {operation} without {right.name}: refused but changed something")
        allowed = await client.post("/soap", content=_soap(operation), headers=headers | holding)
        if "MQ_ERROR_ACCESS_DENIED" in allowed.text or allowed.status_code == 401:
            failures.append(f"SOAP {operation} with {right.name}: {allowed.status_code} {allowed.text}")
    assert not failures, "\n".join(failures)


async def test_public_operations_need_no_credentials(app: FastAPI, settings: Any) -> None:
    closed = settings.model_copy(update={"anonymous_admin": False})
    from app.main import create_app

    application = create_app(closed)
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            for (method, path), rule in RULES.items():
                if rule.locate is not Locate.PUBLIC or "{" in path:
                    continue
                response = await http.request(method, path)
                assert response.status_code not in (401, 403), (method, path, response.text)
            denied = await http.get("/api/queues")
            assert _refused(denied)
            assert "'anonymous' lacks GET_PROPERTIES on the queue manager" in denied.json()["detail"]


def test_the_rules_are_msmqs() -> None:
    """The table itself, against MSMQ's meaning of each right (the walk above checks that the
    table is what the gateway enforces)."""
    for (method, path), rule in RULES.items():
        if path.endswith("/receive") and path.startswith("/api/queues/"):
            assert rule.right is QueueRight.RECEIVE_MESSAGE, (method, path)
        elif (method == "GET" and "/messages" in path) or path.endswith("/peek"):
            assert rule.right is QueueRight.PEEK_MESSAGE, (method, path)
    assert RULES[("POST", "/api/queues/{path:path}/messages")].right is QueueRight.WRITE_MESSAGE
    assert RULES[("DELETE", "/api/queues/{path:path}")].right is QueueRight.DELETE
    assert RULES[("GET", "/api/queues/{path:path}")].right is QueueRight.GET_PROPERTIES
    assert RULES[("PATCH", "/api/queues/{path:path}")].right is QueueRight.SET_PROPERTIES
    assert RULES[("POST", "/api/queues/{path:path}/purge")].right is QueueRight.DELETE_MESSAGE
    assert RULES[("POST", "/api/queues")].right is QueueManagerRight.CREATE_QUEUE
    assert RULES[("POST", "/api/cursors/{cursor_id}/receive")].right is QueueRight.RECEIVE_MESSAGE
    assert SOAP_RULES["Send"][0] is QueueRight.WRITE_MESSAGE
    assert SOAP_RULES["Receive"][0] is SOAP_RULES["ReceiveByLookupId"][0] is QueueRight.RECEIVE_MESSAGE
    assert SOAP_RULES["DeleteQueue"][0] is QueueRight.DELETE
    assert SOAP_RULES["PurgeQueue"][0] is QueueRight.DELETE_MESSAGE
    audited = {key for key, rule in RULES.items() if rule.audited}
    assert all(method != "GET" for method, _path in audited)
    assert all(
        method == "GET" or (method, path) in audited
        for (method, path), rule in RULES.items()
        if rule.right is not None
        and not isinstance(rule.right, QueueRight)
        and rule.right is not QueueManagerRight.TRANSACT
    )
