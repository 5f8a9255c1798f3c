"""The OpenAPI document as the app really answers: 400 problem+json, never FastAPI's 422.

FastAPI builds the document from the routes; what it cannot know is added here, in one pass:
the endpoints that middleware serves below the router, the models of bodies that routes read
themselves (`MessageIn`, `MessageBatch`), the examples as the routes declare them (FastAPI drops
every null value from the document, which made examples contradict their own schemas), and the
descriptions of the path parameters that many routes share.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema
from starlette.routing import BaseRoute

from app.access_openapi import declare_access
from app.answers import INVALID_PARAMETER, answers
from app.errors import PROBLEM_JSON
from app.message_schemas import MessageBatch, MessageIn
from app.parameters import LOOKUP_ID_PATTERN

PROBLEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "RFC 9457 problem details carrying MSMQ's error name and code",
    "required": ["type", "title", "status", "detail", "mq_error", "mq_error_code"],
    "properties": {
        "type": {"type": "string", "description": "`urn:msmq-gateway:error:` and the MQ_ERROR name"},
        "title": {"type": "string", "description": "The MQ_ERROR name"},
        "status": {"type": "integer", "description": "The HTTP status, as in the status line"},
        "detail": {"type": "string", "description": "What went wrong, for people"},
        "mq_error": {
            "type": "string",
            "description": "MSMQ's error name",
            "examples": ["MQ_ERROR_QUEUE_NOT_FOUND"],
        },
        "mq_error_code": {
            "type": "string",
            "description": "MSMQ's HRESULT as 8 hex digits",
            "pattern": "^0x[0-9A-F]{8}$",
            "examples": ["0xC00E0003"],
        },
    },
}

TAGS: list[dict[str, str]] = [
    {"name": "queues", "description": "Create, show, change, delete and purge queues"},
    {"name": "messages", "description": "Send, browse, receive and peek (MQSendMessage, MQReceiveMessage)"},
    {"name": "lookup", "description": "Read by lookup ID, message ID or correlation ID (never waits)"},
    {
        "name": "administration",
        "description": "Chosen messages: delete, move, resend dead letters, export, import",
    },
    {"name": "locks", "description": "End a two-phase read (Dequeue Message End): commit or abort"},
    {"name": "cursors", "description": "Forward-only positions in a queue (MQCreateCursor)"},
    {"name": "transactions", "description": "Internal transactions across queues (MQBeginTransaction)"},
    {"name": "queue manager", "description": "Identity, machine quota, throttling, health"},
    {"name": "outgoing queues", "description": "Messages waiting for remote SRMP queues"},
    {"name": "redrives", "description": "Dead letters staged by the pipeline, re-sent by the gateway"},
    {"name": "triggers", "description": "Message Queuing Triggers: rules and triggers"},
    {"name": "srmp", "description": "MSMQ over HTTP from Windows senders"},
    {"name": "soap", "description": "The SOAP 1.1 API and its WSDL"},
    {"name": "access", "description": "Principals, API keys, rights (MSMQ's access masks) and the audit log"},
    {"name": "operations", "description": "Prometheus metrics and Kubernetes probes (docs/operations.md)"},
]

PATH_PARAMETERS: dict[str, dict[str, Any]] = {
    "path": {
        "description": "The queue: `private$/name`, a public `name`, `…;journal`, `system$;deadletter`, "
        "`system$;deadxact`, `system$;journal`, or a format name of a local queue",
        "example": "private$/orders",
    },
    "lookup_id": {
        "description": "A lookup ID: an unsigned 64-bit number in decimal",
        "schema": {"pattern": LOOKUP_ID_PATTERN},
        "example": "72057594037927940",
    },
    "cursor_id": {"description": "The `id` that opening the cursor answered"},
    "tag": {"description": "The `lock_tag` of a two-phase read", "example": "72057594037927940-9f3c2b1a0d4e"},
    "transaction_id": {"description": "The `id` that beginning the transaction answered"},
    "queue_id": {"description": "The `id` of an outgoing queue", "example": 7},
    "rule": {"description": "The rule's ID or name", "example": "MyRule1"},
    "trigger": {"description": "The trigger's ID or name", "example": "PrivateTrigger"},
}
"""Path parameters that many routes share, described once (a route's own words win)."""

_EXAMPLE_KEYS = ("example", "examples")
_BAD_REQUEST = answers({}, INVALID_PARAMETER, store=False)[400]


def install(
    app: FastAPI,
    served_below_the_router: dict[str, Any],
    models: Sequence[type[BaseModel]] = (MessageIn, MessageBatch),
) -> None:
    """`served_below_the_router`: OpenAPI paths of endpoints that middleware serves itself.
    `models`: schemas of bodies that routes read or write themselves, which FastAPI cannot see."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
                tags=TAGS,
            )
            document["paths"] |= copy.deepcopy(served_below_the_router)
            _restore_examples(document, app.routes)
            _add_models(document, models)
            _describe_path_parameters(document)
            _edge_answers(document)
            app.openapi_schema = _problems_instead_of_422(document)
            declare_access(app.openapi_schema)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _restore_examples(document: dict[str, Any], routes: Iterable[BaseRoute]) -> None:
    """Put the routes' examples back as declared: FastAPI's encoding of the document drops every
    null, so `"lock_tag": null` vanished from examples whose schema requires it."""
    for route in routes:
        if not isinstance(route, APIRoute) or not route.include_in_schema:
            continue
        for method in route.methods or ():
            operation = document["paths"][route.path_format][method.lower()]
            declared = {str(status): response for status, response in route.responses.items()}
            _overlay_examples(operation["responses"], declared)
            _overlay_examples(operation, route.openapi_extra or {})


def _overlay_examples(target: dict[str, Any], source: Mapping[str, Any]) -> None:
    for key, value in source.items():
        if key in _EXAMPLE_KEYS:
            target[key] = copy.deepcopy(value)
        elif isinstance(value, Mapping) and isinstance(target.get(key), dict):
            _overlay_examples(target[key], value)


def _add_models(document: dict[str, Any], models: Sequence[type[BaseModel]]) -> None:
    _, top = models_json_schema(
        [(model, "validation" if issubclass(model, MessageIn) else "serialization") for model in models],
        ref_template="#/components/schemas/{model}",
    )
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    for name, schema in top.get("$defs", {}).items():
        schemas.setdefault(name, schema)
    document["components"]["schemas"] = dict(sorted(schemas.items()))


def _describe_path_parameters(document: dict[str, Any]) -> None:
    for item in document["paths"].values():
        for operation in item.values():
            for parameter in operation.get("parameters", []):
                known = PATH_PARAMETERS.get(parameter["name"])
                if parameter["in"] != "path" or known is None:
                    continue
                for key, value in known.items():
                    if key == "schema":
                        for name, rule in value.items():
                            parameter.setdefault("schema", {}).setdefault(name, rule)
                    else:
                        parameter.setdefault(key, value)


def _problems_instead_of_422(document: dict[str, Any]) -> dict[str, Any]:
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    schemas["Problem"] = PROBLEM_SCHEMA
    for operations in document["paths"].values():
        for operation in operations.values():
            responses = operation.get("responses", {})
            if responses.pop("422", None) is not None:
                responses.setdefault("400", copy.deepcopy(_BAD_REQUEST))
            for response in responses.values():
                problem = response.get("content", {}).get(PROBLEM_JSON)
                if problem is not None:
                    problem.setdefault("schema", {"$ref": "#/components/schemas/Problem"})
    return document


def _edge_problem(status: int, code: str, hex_code: str, detail: str) -> dict[str, Any]:
    example = {
        "type": f"urn:msmq-gateway:error:{code}",
        "title": code,
        "status": status,
        "detail": detail,
        "mq_error": code,
        "mq_error_code": hex_code,
    }
    return {
        "description": f"{code}: {detail}",
        "content": {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}, "example": example}},
    }


_MISDIRECTED = _edge_problem(
    421, "MQ_ERROR_ACCESS_DENIED", "0xC00E0025", "Host 'attacker.example' is not a name of this gateway"
)
_NOT_JSON = _edge_problem(
    415, "MQ_ERROR_INVALID_PARAMETER", "0xC00E0006", "a body of type 'text/plain' is not read here"
)
_TOO_LARGE = _edge_problem(
    413, "MQ_ERROR_INSUFFICIENT_RESOURCES", "0xC00E0027", "the request body has 2000000 bytes or more"
)


def _edge_answers(document: dict[str, Any]) -> None:
    """What `app.edge` answers before any route (docs/security.md): a foreign Host on every
    operation; on operations with a JSON request body, a body of another type or over the
    administrative cap."""
    for path, operations in document["paths"].items():
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            responses.setdefault("421", copy.deepcopy(_MISDIRECTED))
            body = operation.get("requestBody", {}).get("content", {})
            if "application/json" in body and "multipart/related" not in body and path != "/soap":
                responses.setdefault("415", copy.deepcopy(_NOT_JSON))
                responses.setdefault("413", copy.deepcopy(_TOO_LARGE))
