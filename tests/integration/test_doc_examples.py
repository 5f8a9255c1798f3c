"""The curl examples of README.md, docs/rest-api.md and docs/security.md work verbatim: each
page's examples run in order in one bash against a real `msmq-gateway serve` on an empty
database, as a reader runs them, and print what the page shows after them
(tests/doc_examples.py says what is compared)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import repository_root
from tests.databases import SqliteDatabases
from tests.doc_examples import Example, examples, mismatch, run
from tests.gateway_process import GatewayProcess

pytestmark = pytest.mark.slow
PAGES = ("README.md", "docs/rest-api.md", "docs/security.md")
DOCUMENTED_URL = "http://127.0.0.1:8080"
NOT_CURL = re.compile(r"\bmake (run|test)\b|msmq-gateway (serve|pipeline)|pip install")
"""Examples that start a server or need more than curl and the gateway (the Spark jobs)."""
RUN_TIMEOUT_S = 300


def others(page: Path) -> tuple[int, ...]:
    return tuple(example.line for example in examples(page) if NOT_CURL.search(example.command))


@pytest.fixture
def gateway(sqlite_databases: SqliteDatabases, tmp_path: Path) -> Iterator[GatewayProcess]:
    """As `make run` serves, on an empty database."""
    with sqlite_databases.database() as database_url:
        server = GatewayProcess(database_url, {}, tmp_path / "gateway.log")
        try:
            server.wait_ready()
            yield server
        finally:
            server.stop()


@pytest.mark.parametrize("name", PAGES)
def test_the_pages_curl_examples_print_what_the_page_shows(
    name: str, gateway: GatewayProcess, tmp_path: Path
) -> None:
    page = repository_root() / name
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    outcomes = run(page, {DOCUMENTED_URL: gateway.base_url}, scratch, RUN_TIMEOUT_S, skip=others(page))
    assert sum(outcome.example.expected is not None for outcome in outcomes) >= 1, "nothing to compare"
    wrong = [
        f"{name}:{outcome.example.line}: {outcome.problem}\n--- printed:\n{outcome.output[:3000]}"
        for outcome in outcomes
        if outcome.problem
    ]
    assert not wrong, "\n\n".join(wrong)


def test_a_changed_lookup_id_or_status_is_found_and_volatile_values_are_not() -> None:
    printed = (
        '{"lookup_id":"72057594037927940","message_id":"{5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93}\\\\4",'
        '"sent_time":"2026-11-27T10:09:29.978959Z","transaction":"6d83ef712627eabb895257dec31dce72"}\n'
        "204 after 2.011320 s\n"
    )
    shown = (
        '{"lookup_id":"72057594037927940","message_id":"{a5e090eb-9132-46eb-955d-2f8e28a1d46f}\\\\4",'
        '"sent_time":"2026-11-22T22:21:41.029773Z",…}\n'
        "204 after 2.004 s\n"
    )
    assert mismatch(shown, printed) is None
    assert mismatch(shown.replace("940", "943"), printed) is not None
    assert mismatch(shown.replace("\\\\4", "\\\\5"), printed) is not None
    assert mismatch(shown.replace("204", "200"), printed) is not None


def test_the_examples_are_found_with_their_outputs(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```sh\necho a\n```\n```json\na\n```\n\ntext\n\n```sh\necho b\n```\n\n```\nb\n```\n")
    found = examples(page)
    assert found == [Example(1, "echo a", "a"), Example(10, "echo b", None)]
