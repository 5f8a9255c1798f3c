"""The house rule "no module over 400 lines", held for the gateway's and the pipeline's packages:
a module that grows past it is split along a seam, not waved through."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import repository_root

PACKAGES = ("app", "bodies", "qm", "storage", "soap", "pipeline", "bench")
MOST_LINES = 400


def line_count(module: Path) -> int:
    with module.open(encoding="utf-8") as text:
        return sum(1 for _ in text)


def oversized() -> list[str]:
    root = repository_root()
    return [
        f"{module.relative_to(root)}: {lines} lines"
        for package in PACKAGES
        for module in sorted((root / package).rglob("*.py"))
        if (lines := line_count(module)) > MOST_LINES
    ]


def test_every_package_is_there() -> None:
    """A renamed package would make the size check pass by looking at nothing."""
    root = repository_root()
    assert [package for package in PACKAGES if not any((root / package).rglob("*.py"))] == []


def test_no_module_is_over_400_lines() -> None:
    assert oversized() == []
