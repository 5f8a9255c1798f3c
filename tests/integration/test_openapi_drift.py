"""openapi/openapi.json is what the app generates, and every operation is documented."""

from __future__ import annotations

import difflib
import json
from typing import Any

from app.openapi_export import render
from tests.conftest import repository_root

CHECKED_IN = repository_root() / "openapi" / "openapi.json"
METHODS = ("get", "put", "post", "delete", "patch", "head", "options")


def checked_in() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(CHECKED_IN.read_text(encoding="utf-8"))
    return document


def test_the_checked_in_document_is_what_the_app_generates() -> None:
    generated = render()
    stored = CHECKED_IN.read_text(encoding="utf-8")
    if generated != stored:
        diff = "".join(
            list(
                difflib.unified_diff(
                    stored.splitlines(keepends=True),
                    generated.splitlines(keepends=True),
                    "openapi/openapi.json",
                    "app.openapi_export.render()",
                )
            )[:80]
        )
        raise AssertionError(
            "openapi/openapi.json is out of date: run `make openapi` "
            f"(python -m app.openapi_export openapi/openapi.json)\n{diff}"
        )


def operations(document: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [
        (f"{method.upper()} {path}", operation)
        for path, item in document["paths"].items()
        for method, operation in item.items()
        if method in METHODS
    ]


def test_every_operation_has_a_summary() -> None:
    missing = [
        name for name, operation in operations(checked_in()) if not operation.get("summary", "").strip()
    ]
    assert not missing, f"operations without a summary: {missing}"


def has_example(node: Any, schemas: dict[str, Any], seen: frozenset[str] = frozenset()) -> bool:
    """An `example` or non-empty `examples` anywhere below, following $refs to schemas once."""
    if isinstance(node, list):
        return any(has_example(item, schemas, seen) for item in node)
    if not isinstance(node, dict):
        return False
    if "example" in node or node.get("examples"):
        return True
    reference = node.get("$ref")
    if isinstance(reference, str) and reference.startswith("#/components/schemas/"):
        name = reference.rsplit("/", 1)[-1]
        return name not in seen and has_example(schemas.get(name, {}), schemas, seen | {name})
    return any(has_example(value, schemas, seen) for value in node.values())


def test_every_operation_has_an_example_in_its_request_or_responses() -> None:
    document = checked_in()
    schemas = document.get("components", {}).get("schemas", {})
    missing = [
        name
        for name, operation in operations(document)
        if not has_example(
            [
                operation.get("parameters", []),
                operation.get("requestBody", {}),
                operation.get("responses", {}),
            ],
            schemas,
        )
    ]
    assert not missing, f"operations without any example in request or responses: {missing}"


def test_the_example_check_can_fail() -> None:
    schemas = {"Plain": {"type": "object"}, "Shown": {"type": "object", "examples": [{"a": 1}]}}
    assert not has_example(
        {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Plain"}}}}, schemas
    )
    assert has_example(
        {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Shown"}}}}, schemas
    )
    assert not has_example({"examples": []}, schemas)
