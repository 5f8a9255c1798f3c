"""Queue path names (reference §8.1): the forms accepted, identity, and what is refused."""

from __future__ import annotations

import pytest

from qm.errors import MqError, MqErrorCode
from qm.paths import (
    MAX_QUEUE_NAME_LENGTH,
    QueueKind,
    QueuePath,
    SystemQueue,
    parse_queue_path,
    system_queue_path,
)


@pytest.mark.parametrize(
    "text",
    ["private$\\orders", "private$/orders", ".\\private$\\orders", "./private$/orders", "  private$/orders "],
)
def test_private_path_forms_name_the_same_queue(text: str) -> None:
    assert parse_queue_path(text) == QueuePath(QueueKind.PRIVATE, "orders")


@pytest.mark.parametrize("text", ["orders", ".\\orders", "./orders"])
def test_public_path_forms(text: str) -> None:
    assert parse_queue_path(text) == QueuePath(QueueKind.PUBLIC, "orders")


def test_identity_is_case_insensitive_but_the_name_keeps_its_case() -> None:
    mixed = parse_queue_path("PRIVATE$\\Orders")
    lower = parse_queue_path("private$/orders")
    assert mixed.name == "Orders"
    assert mixed.key == lower.key == "private$\\orders"


def test_private_and_public_queues_of_one_name_differ() -> None:
    assert parse_queue_path("private$/orders").key != parse_queue_path("orders").key


def test_rendered_forms() -> None:
    path = parse_queue_path("private$/orders")
    assert path.pathname == "private$\\orders"
    assert path.url_path == "private$/orders"
    assert parse_queue_path("orders").pathname == "orders"


@pytest.mark.parametrize(
    ("text", "kind"),
    [("private$/orders;journal", QueueKind.PRIVATE), ("orders;JOURNAL", QueueKind.PUBLIC)],
)
def test_journal_paths_select_the_journal_queue(text: str, kind: QueueKind) -> None:
    path = parse_queue_path(text)
    assert path == QueuePath(kind, "orders", journal=True)
    assert path.base == QueuePath(kind, "orders")
    assert not path.writable
    assert path.url_path.endswith("orders;journal")


@pytest.mark.parametrize("queue", list(SystemQueue))
def test_system_queues(queue: SystemQueue) -> None:
    path = parse_queue_path(f"SYSTEM$;{queue.value.upper()}")
    assert path == system_queue_path(queue)
    assert path.kind is QueueKind.SYSTEM
    assert not path.writable
    assert path.url_path == f"system$;{queue.value}"


def test_ordinary_queues_are_writable() -> None:
    assert parse_queue_path("private$/orders").writable
    assert parse_queue_path("orders").writable


def test_longest_legal_name() -> None:
    name = "q" * MAX_QUEUE_NAME_LENGTH
    assert parse_queue_path(f"private$/{name}").name == name


def test_unicode_letters_are_allowed() -> None:
    assert parse_queue_path("private$/commandes-été").name == "commandes-été"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "   ",
        "private$/",
        "private$\\",
        "./",
        "private$",
        "system$",
        "private$/" + "q" * (MAX_QUEUE_NAME_LENGTH + 1),
        "q" * (MAX_QUEUE_NAME_LENGTH + 1),
        "private$/a..b",
        "..",
        "private$/../orders",
        "private$/a/b",
        "private$\\a\\b",
        "private$/a;b",
        "private$/a+b",
        "private$/a,b",
        'private$/a"b',
        "private$/a b",
        "private$/a\tb",
        "private$/a\x00b",
        "private$/a\x7fb",
        "system$;nosuchqueue",
        "system$;",
        "private$/;journal",
    ],
)
def test_illegal_paths(text: str) -> None:
    with pytest.raises(MqError) as caught:
        parse_queue_path(text)
    assert caught.value.code is MqErrorCode.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME


def test_a_refused_name_is_refused_every_time_and_a_parsed_one_is_the_same_each_time() -> None:
    for _ in range(2):  # parsing is remembered per text: a refusal must not be
        with pytest.raises(MqError) as caught:
            parse_queue_path("private$/a;b")
        assert caught.value.code is MqErrorCode.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME
    assert parse_queue_path("private$/Orders") == parse_queue_path("private$/Orders")
    assert parse_queue_path("private$/Orders;journal").journal
    assert not parse_queue_path("private$/Orders").journal
