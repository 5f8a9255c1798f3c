"""What the OpenAPI document says about access: the security schemes, each guarded
operation's right (`x-msmq-right`) and its 401 and 403 answers, from app/access_rules.py."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from app.access_rules import RULES, Locate, Rule
from app.errors import PROBLEM_JSON
from app.keys import REALM
from qm.errors import MqErrorCode
from qm.rights import QueueManagerRight


def problem_body(code: MqErrorCode, detail: str, status: HTTPStatus) -> dict[str, Any]:
    return {
        "type": f"urn:msmq-gateway:error:{code.name}",
        "title": code.name,
        "status": int(status),
        "detail": detail,
        "mq_error": code.name,
        "mq_error_code": code.hex,
    }


SECURITY_SCHEMES = {
    "apiKey": {
        "type": "http",
        "scheme": "bearer",
        "description": "An API key (`msmq-gateway keys create`, POST /api/keys): "
        "`Authorization: Bearer mgw_…`",
    },
    "basic": {
        "type": "http",
        "scheme": "basic",
        "description": "HTTP Basic: the principal or the key ID as user name, the API key as password",
    },
}
_UNAUTHENTICATED = {
    "description": "Credentials were sent and are not valid (unknown, revoked, or another principal's key)",
    "headers": {"WWW-Authenticate": {"description": REALM, "schema": {"type": "string"}}},
    "content": {
        PROBLEM_JSON: {
            "schema": {"$ref": "#/components/schemas/Problem"},
            "example": problem_body(
                MqErrorCode.MQ_ERROR_ACCESS_DENIED,
                "the key is not valid (unknown, revoked, or not this principal's)",
                HTTPStatus.UNAUTHORIZED,
            ),
        }
    },
}


def declare_access(document: dict[str, Any]) -> None:
    """Every guarded operation of the OpenAPI document: how to authenticate, the right it needs
    (`x-msmq-right`), and its 401 and 403 answers."""
    document.setdefault("components", {})["securitySchemes"] = SECURITY_SCHEMES
    for path, item in document["paths"].items():
        for method, operation in item.items():
            rule = RULES.get((method.upper(), _route_path(path)))
            if rule is None or rule.locate is Locate.PUBLIC:
                continue
            operation["security"] = [{"apiKey": []}, {"basic": []}, {}]
            operation["x-msmq-right"] = _right_text(rule, operation)
            responses = operation.setdefault("responses", {})
            responses["401"] = _UNAUTHENTICATED
            _add_denied(responses, operation["x-msmq-right"])


def _route_path(document_path: str) -> str:
    return document_path.replace("/api/queues/{path}", "/api/queues/{path:path}")


def _right_text(rule: Rule, operation: dict[str, Any]) -> str:
    if rule.locate is Locate.CALLER:
        return "none: any caller may ask about itself"
    if rule.right is None:
        return "one per SOAP operation (docs/security.md)"
    scope = "the queue manager" if isinstance(rule.right, QueueManagerRight) else "the queue"
    return f"{rule.right.name} on {scope}"


def _add_denied(responses: dict[str, Any], right: str) -> None:
    example = problem_body(
        MqErrorCode.MQ_ERROR_ACCESS_DENIED, f"'orders-app' lacks {right}", HTTPStatus.FORBIDDEN
    )
    denied = responses.setdefault(
        "403",
        {
            "description": "MQ_ERROR_ACCESS_DENIED",
            "content": {PROBLEM_JSON: {"schema": {"$ref": "#/components/schemas/Problem"}, "examples": {}}},
        },
    )
    media = denied.setdefault("content", {}).setdefault(PROBLEM_JSON, {})
    if "example" in media:
        media["examples"] = {"other": {"summary": "refused", "value": media.pop("example")}}
    media.setdefault("examples", {})["MQ_ERROR_ACCESS_DENIED (rights)"] = {
        "summary": "the caller's principal lacks the right",
        "value": example,
    }
    if "MQ_ERROR_ACCESS_DENIED" not in denied.get("description", ""):
        denied["description"] = denied.get("description", "") + " or MQ_ERROR_ACCESS_DENIED"
