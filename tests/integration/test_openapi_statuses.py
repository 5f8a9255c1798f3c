"""The OpenAPI document declares what the app's error table makes of the failures each
operation's inputs can cause, and describes everything it shows."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

import httpx
import pytest

from app.errors import PROBLEM_JSON, status_of
from qm.errors import MqErrorCode
from tests.integration.test_errors import FAILURES, concrete
from tests.integration.test_openapi_drift import checked_in, operations

E = MqErrorCode
CHOSEN = frozenset({401, 413, 415, 421})
"""Statuses the app gives without its error table: credentials not valid (401), a body too large,
app/edge.py's refusals."""
PARAMETER_ERRORS: dict[tuple[str, str], tuple[MqErrorCode, ...]] = {
    ("path", "path"): (
        E.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME,
        E.MQ_ERROR_ILLEGAL_FORMATNAME,
        E.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION,
        E.MQ_ERROR_QUEUE_NOT_FOUND,
    ),
    ("path", "lookup_id"): (E.MQ_ERROR_INVALID_PARAMETER, E.MQ_ERROR_MESSAGE_NOT_FOUND),
    ("path", "cursor_id"): (E.MQ_ERROR_INVALID_HANDLE,),
    ("path", "tag"): (
        E.MQ_ERROR_INVALID_HANDLE,
        E.MQ_ERROR_TRANSACTION_SEQUENCE,
        E.MQ_ERROR_MESSAGE_ALREADY_RECEIVED,
    ),
    ("path", "transaction_id"): (E.MQ_ERROR_TRANSACTION_SEQUENCE,),
    ("path", "queue_id"): (E.MQ_ERROR_INVALID_PARAMETER, E.MQ_ERROR_QUEUE_NOT_FOUND),
    ("path", "rule"): (E.MQ_ERROR_INVALID_HANDLE,),
    ("path", "trigger"): (E.MQ_ERROR_INVALID_HANDLE,),
    ("query", "transaction"): (E.MQ_ERROR_TRANSACTION_SEQUENCE, E.MQ_ERROR_TRANSACTION_USAGE),
    ("query", "timeout_ms"): (E.MQ_ERROR_INVALID_PARAMETER,),
}
"""What a bad value of each parameter is, as the queue manager reports it (qm/, app/gateway.py):
a queue path that does not parse, names no local queue or no queue; a lookup ID that is not
a number or names no message; a handle (cursor, lock tag, transaction, rule, trigger) that
names nothing live."""

STORE_FREE = {"GET /soap", "POST /soap", "GET /api/srmp/statistics", "POST /msmq/{path}"}
"""Operations that answer without the message store (SOAP answers every failure as a fault)."""


def _declared(operation: dict[str, Any]) -> set[int]:
    return {int(status) for status in operation["responses"] if status.isdigit()}


def _problem_statuses(operation: dict[str, Any]) -> set[int]:
    return {
        int(status)
        for status, response in operation["responses"].items()
        if PROBLEM_JSON in response.get("content", {})
    }


def missing_statuses(document: dict[str, Any]) -> list[str]:
    missing = []
    for name, operation in operations(document):
        if not name.split(" ", 1)[1].startswith("/api/"):
            continue
        problems = _problem_statuses(operation)
        for parameter in operation.get("parameters", []):
            codes = PARAMETER_ERRORS.get((parameter["in"], parameter["name"]), ())
            for code in codes:
                if status_of(code) not in problems:
                    missing.append(
                        f"{name}: {parameter['name']} can fail with {code.name} ({status_of(code)})"
                    )
            if parameter["name"] == "timeout_ms" and 204 not in _declared(operation):
                missing.append(f"{name}: timeout_ms can run out (204)")
        takes_input = operation.get("requestBody") or any(
            parameter["in"] == "query" for parameter in operation.get("parameters", [])
        )
        if takes_input and HTTPStatus.BAD_REQUEST not in problems:
            missing.append(f"{name}: its input is validated (400 problem+json)")
        if name not in STORE_FREE and HTTPStatus.SERVICE_UNAVAILABLE not in problems:
            missing.append(f"{name}: the store can be unavailable (503 problem+json)")
    return missing


def test_every_operation_declares_what_its_inputs_can_fail_with() -> None:
    missing = missing_statuses(checked_in())
    assert not missing, "\n".join(missing)


def test_the_status_check_finds_an_undeclared_status() -> None:
    operation = {
        "parameters": [{"in": "path", "name": "path"}, {"in": "query", "name": "transaction"}],
        "responses": {"200": {}, "404": {"content": {PROBLEM_JSON: {}}}},
    }
    found = missing_statuses({"paths": {"/api/queues/{path}/receive": {"post": operation}}})
    assert any("MQ_ERROR_TRANSACTION_USAGE" in line for line in found)
    assert any("MQ_ERROR_ILLEGAL_QUEUE_PATHNAME" in line for line in found)
    assert any("503" in line for line in found)


def test_every_problem_example_agrees_with_the_error_table() -> None:
    """A problem example's status is the one app/errors.py gives its MQ_ERROR code (except the
    statuses the app chooses itself: 413 a body too large, and app/edge.py's 415 and 421), and
    it is the response's status."""
    wrong = []
    for name, operation in operations(checked_in()):
        for status, response in operation["responses"].items():
            media = response.get("content", {}).get(PROBLEM_JSON)
            if media is None:
                continue
            values = [media["example"]] if "example" in media else []
            values += [named["value"] for named in media.get("examples", {}).values()]
            assert values, f"{name} {status}: a problem without an example"
            for value in values:
                code = MqErrorCode[value["mq_error"]]
                expected = HTTPStatus(value["status"]) if value["status"] in CHOSEN else status_of(code)
                if not (int(status) == value["status"] == expected and value["mq_error_code"] == code.hex):
                    wrong.append(f"{name} {status}: {value}")
                if value["title"] != code.name or value["type"] != f"urn:msmq-gateway:error:{code.name}":
                    wrong.append(f"{name} {status}: {value}")
    assert not wrong, "\n".join(wrong)


def undescribed(document: dict[str, Any]) -> list[str]:
    found = []
    for model, schema in document["components"]["schemas"].items():
        for field, prop in schema.get("properties", {}).items():
            if not prop.get("description", "").strip():
                found.append(f"schema {model}.{field}")
    for name, operation in operations(document):
        for parameter in operation.get("parameters", []):
            if not parameter.get("description", "").strip():
                found.append(f"{name}: parameter {parameter['name']}")
    return found


def test_every_schema_property_and_parameter_is_described() -> None:
    found = undescribed(checked_in())
    assert not found, f"{len(found)} without a description:\n" + "\n".join(found)


def test_every_operation_has_one_tag_and_every_tag_is_described() -> None:
    document = checked_in()
    described = {tag["name"] for tag in document.get("tags", []) if tag.get("description")}
    for name, operation in operations(document):
        assert len(operation.get("tags", [])) == 1, f"{name}: tags {operation.get('tags')}"
        assert operation["tags"][0] in described, f"{name}: tag {operation['tags'][0]} is not described"


def test_raw_answers_declare_their_x_msmq_headers() -> None:
    """Every operation that can answer a raw body (`application/octet-stream`) declares the
    X-Msmq-* headers that carry the message's properties."""
    for name, operation in operations(checked_in()):
        for status, response in operation["responses"].items():
            if "application/octet-stream" in response.get("content", {}):
                headers = response.get("headers", {})
                assert {"X-Msmq-Lookup-Id", "X-Msmq-Message-Id", "X-Msmq-Label"} <= set(headers), (
                    f"{name} {status}"
                )


@pytest.mark.anyio
async def test_every_failure_the_app_answers_is_declared(client: httpx.AsyncClient) -> None:
    """Each operation's failing call of tests/integration/test_errors.py, made for real on each
    store: the document declares the status it answers, with an example of its MQ_ERROR."""
    document = checked_in()
    undeclared = []
    for (method, path), (extras, status, _mq_error) in sorted(FAILURES.items()):
        if not status:
            continue
        answer = await client.request(method, concrete(path), **extras)
        responses = document["paths"][path][method.lower()]["responses"]
        declared = responses.get(str(answer.status_code), {}).get("content", {}).get(PROBLEM_JSON)
        if declared is None:
            undeclared.append(f"{method} {path}: {answer.status_code} is not declared")
            continue
        values = [named["value"] for named in declared.get("examples", {}).values()]
        names = {value["mq_error"] for value in [*values, declared.get("example", {})] if value}
        if answer.json()["mq_error"] not in names:
            undeclared.append(
                f"{method} {path}: {answer.status_code} {answer.json()['mq_error']} has no example"
            )
    assert not undeclared, "\n".join(undeclared)
