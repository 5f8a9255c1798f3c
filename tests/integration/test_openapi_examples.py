"""Every example in the OpenAPI document is valid against its own schema (JSON Schema 2020-12,
which OpenAPI 3.1 schemas are), checked by a real validator: request bodies, responses,
response headers, parameters, and the examples inside component schemas."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import jsonschema
import pytest
from referencing import Registry, Resource
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

from tests.integration.test_openapi_drift import METHODS, checked_in

DOCUMENT_URI = "urn:msmq-gateway:openapi"
NO_SCHEMA = "/x-no-schema"


@dataclass(frozen=True)
class Example:
    where: str
    """JSON pointer of the example in the document."""
    schema: str
    """JSON pointer of the schema it must satisfy."""
    value: Any


def _escape(part: str) -> str:
    return part.replace("~", "~0").replace("/", "~1")


def pointer(*parts: str | int) -> str:
    return "/" + "/".join(_escape(str(part)) for part in parts)


def examples_of(node: dict[str, Any], *at: str | int) -> Iterator[Example]:
    """The example and named examples of a parameter, header or media type object at `at`
    (one without a schema is checked against the schema `false`: it cannot be verified)."""
    schema = pointer(*at, "schema") if "schema" in node else NO_SCHEMA
    if "example" in node:
        yield Example(pointer(*at, "example"), schema, node["example"])
    for name, named in node.get("examples", {}).items():
        if "value" in named:
            yield Example(pointer(*at, "examples", name, "value"), schema, named["value"])


def schema_examples(schema: Any, *at: str | int) -> Iterator[Example]:
    """`examples` (and OpenAPI's older `example`) written inside a schema, at any depth."""
    if isinstance(schema, list):
        for index, item in enumerate(schema):
            yield from schema_examples(item, *at, index)
        return
    if not isinstance(schema, dict):
        return
    for index, value in enumerate(
        schema.get("examples", []) if isinstance(schema.get("examples"), list) else []
    ):
        yield Example(pointer(*at, "examples", index), pointer(*at), value)
    if "example" in schema and "properties" not in at[-1:]:
        yield Example(pointer(*at, "example"), pointer(*at), schema["example"])
    for key, value in schema.items():
        if key in ("properties", "$defs", "patternProperties"):
            for name, sub in value.items():
                yield from schema_examples(sub, *at, key, name)
        elif key in ("items", "additionalProperties", "not", "anyOf", "oneOf", "allOf", "prefixItems"):
            yield from schema_examples(value, *at, key)


def document_examples(document: dict[str, Any]) -> Iterator[Example]:
    for path, item in document["paths"].items():
        for method, operation in item.items():
            if method not in METHODS:
                continue
            at = ("paths", path, method)
            for index, parameter in enumerate(operation.get("parameters", [])):
                yield from examples_of(parameter, *at, "parameters", index)
            for media, content in operation.get("requestBody", {}).get("content", {}).items():
                yield from examples_of(content, *at, "requestBody", "content", media)
            for status, response in operation.get("responses", {}).items():
                for media, content in response.get("content", {}).items():
                    yield from examples_of(content, *at, "responses", status, "content", media)
                for name, header in response.get("headers", {}).items():
                    yield from examples_of(header, *at, "responses", status, "headers", name)
    for name, schema in document.get("components", {}).get("schemas", {}).items():
        yield from schema_examples(schema, "components", "schemas", name)


FORMATS = jsonschema.FormatChecker(formats=())


@FORMATS.checks("date-time", raises=ValueError)
def _date_time(value: object) -> bool:
    """RFC 3339 with a zone, as the API writes times."""
    if isinstance(value, str):
        parsed = datetime.fromisoformat(value)
        if parsed.tzinfo is None:
            raise ValueError(f"{value!r} has no time zone")
    return True


def violations(document: dict[str, Any]) -> list[str]:
    contents = document | {NO_SCHEMA[1:]: False}
    registry: Registry[Any] = Registry().with_resource(
        DOCUMENT_URI, Resource.from_contents(contents, default_specification=DRAFT202012)
    )
    found = []
    for example in document_examples(document):
        validator = jsonschema.Draft202012Validator(
            {"$ref": f"{DOCUMENT_URI}#{example.schema}"}, registry=registry, format_checker=FORMATS
        )
        try:
            errors = list(validator.iter_errors(example.value))
        except Unresolvable as unresolvable:
            found.append(f"{example.where}: its schema refers to nothing ({unresolvable.ref})")
            continue
        if example.schema == NO_SCHEMA:
            found.append(f"{example.where}: an example without a schema")
            continue
        for error in errors:
            found.append(f"{example.where}: {error.message} (at {'/'.join(map(str, error.absolute_path))})")
    return found


def test_every_example_in_the_document_is_valid_against_its_schema() -> None:
    found = violations(checked_in())
    assert not found, f"{len(found)} examples contradict their schemas:\n" + "\n".join(found[:60])


def test_the_document_has_examples_of_every_kind_to_check() -> None:
    """The walk finds request, response, header, parameter and component examples: a walk
    that found none would pass the test above for nothing."""
    kinds = {_kind(example.where) for example in document_examples(checked_in())}
    assert kinds >= {"requestBody", "responses", "headers", "parameters", "components"}


def _kind(where: str) -> str:
    parts = where.split("/")
    if parts[1] == "components":
        return "components"
    return "headers" if "headers" in parts else parts[4]


@pytest.mark.parametrize(
    ("example", "schema"),
    [
        ({"lookup_id": "1"}, {"type": "object", "required": ["lookup_id", "lock_tag"]}),
        ({"lock_tag": None}, {"properties": {"lock_tag": {"type": "string"}}}),
        ({"at": "2026-11-22T10:00:00"}, {"properties": {"at": {"type": "string", "format": "date-time"}}}),
        ({"queue_id": 4}, {"type": "object", "additionalProperties": False, "properties": {"queue": {}}}),
    ],
)
def test_the_check_finds_an_example_that_contradicts_its_schema(
    example: dict[str, Any], schema: dict[str, Any]
) -> None:
    document = {
        "paths": {
            "/x": {
                "get": {
                    "responses": {
                        "200": {"content": {"application/json": {"schema": schema, "example": example}}}
                    }
                }
            }
        }
    }
    assert violations(document)


def test_the_check_finds_examples_without_a_schema_and_dangling_references() -> None:
    document = {
        "paths": {
            "/x": {
                "post": {
                    "requestBody": {
                        "content": {
                            "application/json": {
                                "schema": {"$ref": "#/components/schemas/Gone"},
                                "example": {},
                            }
                        }
                    },
                    "responses": {"200": {"content": {"text/plain": {"example": ""}}}},
                }
            }
        }
    }
    assert len(violations(document)) == 2


def test_the_check_follows_references_and_named_examples() -> None:
    document = {
        "paths": {
            "/x": {
                "get": {
                    "responses": {
                        "200": {
                            "content": {
                                "application/json": {
                                    "schema": {"$ref": "#/components/schemas/Thing"},
                                    "examples": {"bad": {"value": {"size": "big"}}},
                                }
                            }
                        }
                    }
                }
            }
        },
        "components": {"schemas": {"Thing": {"properties": {"size": {"type": "integer"}}}}},
    }
    assert len(violations(document)) == 1
