"""docs/decisions.md names, for each rule, the tests that hold it: they must exist."""

from __future__ import annotations

import re

from tests.conftest import repository_root

DECISIONS = repository_root() / "docs" / "decisions.md"
REFERENCE = re.compile(r"`(tests/[\w/]+\.py)(?:::(\w+))?`")


def rules() -> list[str]:
    """The rows of the Rules table."""
    text = DECISIONS.read_text(encoding="utf-8")
    table = text.split("## Rules", 1)[1].split("\n## ", 1)[0]
    return [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| Rule ")]


def missing(row: str) -> list[str]:
    gone = []
    for path, name in REFERENCE.findall(row):
        source = repository_root() / path
        if not source.is_file():
            gone.append(path)
        elif name and not re.search(
            rf"^(async )?def {name}\(", source.read_text(encoding="utf-8"), re.MULTILINE
        ):
            gone.append(f"{path}::{name}")
    return gone


def test_every_rule_names_a_test_and_every_test_named_exists() -> None:
    found = rules()
    assert len(found) >= 20
    for row in found:
        held_by = row.rstrip(" |").rsplit(" | ", 1)[1]
        assert REFERENCE.search(held_by) or "lint-imports" in held_by, f"a rule held by no test: {row}"
        assert not missing(row), f"{missing(row)} named in docs/decisions.md does not exist"


def test_the_check_finds_a_test_that_does_not_exist() -> None:
    assert missing("| r | w | `tests/unit/test_decisions_table.py::test_no_such_thing` |")
    assert missing("| r | w | `tests/unit/no_such_file.py` |")
    assert not missing(
        "| r | w | `tests/unit/test_decisions_table.py::test_the_check_finds_a_test_that_does_not_exist` |"
    )
