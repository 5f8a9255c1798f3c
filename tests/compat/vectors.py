"""The shared SRMP vectors, read in place from `<repo>/../shared/spec/vectors` (never copied)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

VECTORS = Path(__file__).resolve().parents[2].parent / "shared" / "spec" / "vectors"


@dataclass(frozen=True)
class HttpRequest:
    """A `.http` file split by hand: request line, headers (names lower-cased), body bytes."""

    method: str
    target: str
    headers: dict[str, str]
    body: bytes


@dataclass(frozen=True)
class Vector:
    name: str
    raw: bytes
    request: HttpRequest
    spec: dict[str, Any]

    @property
    def content_type(self) -> str | None:
        return self.request.headers.get("content-type")


def vector_names(prefix: str = "") -> list[str]:
    """The vectors' names, sorted; an assertion (not a skip) when the directory is missing."""
    assert VECTORS.is_dir(), f"the shared vectors are not at {VECTORS}"
    return sorted(path.stem for path in VECTORS.glob(f"{prefix}*.http"))


def valid_names() -> list[str]:
    return [name for name in vector_names() if not name.startswith("m")]


def malformed_names() -> list[str]:
    return vector_names("m")


def load(name: str) -> Vector:
    raw = (VECTORS / f"{name}.http").read_bytes()
    spec: dict[str, Any] = json.loads((VECTORS / f"{name}.json").read_text(encoding="utf-8"))
    return Vector(name, raw, split_http(raw), spec)


def split_http(raw: bytes) -> HttpRequest:
    head, separator, body = raw.partition(b"\r\n\r\n")
    assert separator, "no end of the HTTP head"
    request_line, *lines = head.decode("latin-1").split("\r\n")
    method, target, _version = request_line.split(" ")
    headers: dict[str, str] = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return HttpRequest(method, target, headers, body)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()
