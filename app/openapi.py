"""The OpenAPI document as the app really answers: 400 problem+json, never FastAPI's 422."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from app.docs import problem_example

PROBLEM_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "RFC 9457 problem details carrying MSMQ's error name and code",
    "required": ["type", "title", "status", "detail", "mq_error", "mq_error_code"],
    "properties": {
        "type": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "mq_error": {"type": "string", "example": "MQ_ERROR_QUEUE_NOT_FOUND"},
        "mq_error_code": {"type": "string", "example": "0xC00E0003"},
    },
}
_BAD_REQUEST = problem_example(
    "MQ_ERROR_INVALID_PARAMETER", "0xC00E0006", 400, "timeout_ms: Input should be a valid integer"
)


def install(app: FastAPI, served_below_the_router: dict[str, Any]) -> None:
    """`served_below_the_router`: OpenAPI paths of endpoints that middleware serves itself."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = get_openapi(
                title=app.title, version=app.version, description=app.description, routes=app.routes
            )
            document["paths"] |= served_below_the_router
            app.openapi_schema = _problems_instead_of_422(document)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _problems_instead_of_422(document: dict[str, Any]) -> dict[str, Any]:
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    for unused in ("HTTPValidationError", "ValidationError"):
        schemas.pop(unused, None)
    schemas["Problem"] = PROBLEM_SCHEMA
    for operations in document["paths"].values():
        for operation in operations.values():
            responses = operation.get("responses", {})
            if responses.pop("422", None) is not None:
                responses.setdefault("400", _BAD_REQUEST)
            for response in responses.values():
                problem = response.get("content", {}).get("application/problem+json")
                if problem is not None:
                    problem.setdefault("schema", {"$ref": "#/components/schemas/Problem"})
    return document
