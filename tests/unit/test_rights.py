"""qm.rights: MSMQ's access masks and the one decision, exhaustively."""

from __future__ import annotations

import itertools

import pytest

from qm.errors import MqError, MqErrorCode
from qm.paths import parse_queue_path
from qm.rights import (
    ADMINISTRATOR_GRANTS,
    QUEUE_MANAGER,
    Grant,
    QueueManagerRight,
    QueueRight,
    Requirement,
    allows,
    matches,
    on_queue,
    on_queue_manager,
    owner_grant,
    parse_rights,
    require,
    rights_names,
)

SINGLE_QUEUE_RIGHTS = [right for right in QueueRight if right.value.bit_count() == 1]
SINGLE_QM_RIGHTS = [right for right in QueueManagerRight if right.value.bit_count() == 1]


def test_queue_rights_are_ms_mqmq_2_2_24() -> None:
    assert int(QueueRight.DELETE_MESSAGE) == 0x1
    assert int(QueueRight.PEEK_MESSAGE) == 0x2
    assert int(QueueRight.WRITE_MESSAGE) == 0x4
    assert int(QueueRight.DELETE_JOURNAL_MESSAGE) == 0x8
    assert int(QueueRight.SET_PROPERTIES) == 0x10
    assert int(QueueRight.GET_PROPERTIES) == 0x20
    assert int(QueueRight.DELETE) == 0x10000
    assert int(QueueRight.GET_PERMISSIONS) == 0x20000
    assert int(QueueRight.CHANGE_PERMISSIONS) == 0x40000
    assert int(QueueRight.TAKE_OWNERSHIP) == 0x80000
    assert int(QueueRight.RECEIVE_MESSAGE) == 0x3
    assert int(QueueRight.RECEIVE_JOURNAL_MESSAGE) == 0xA
    # MQSEC_QUEUE_GENERIC_READ / WRITE / ALL as the Windows SDK's mq.h has them.
    assert int(QueueRight.GENERIC_READ) == 0x2002B
    assert int(QueueRight.GENERIC_WRITE) == 0x20024
    assert int(QueueRight.GENERIC_ALL) == 0xF003F


def test_queue_manager_rights_reuse_ms_mqmq_2_2_23() -> None:
    assert int(QueueManagerRight.DELETE_DEADLETTER_MESSAGE) == 0x1
    assert int(QueueManagerRight.PEEK_DEADLETTER_MESSAGE) == 0x2
    assert int(QueueManagerRight.CREATE_QUEUE) == 0x4
    assert int(QueueManagerRight.SET_PROPERTIES) == 0x10
    assert int(QueueManagerRight.GET_PROPERTIES) == 0x20
    assert int(QueueManagerRight.DELETE_JOURNAL_QUEUE_MESSAGE) == 0x40
    assert int(QueueManagerRight.PEEK_JOURNAL_QUEUE_MESSAGE) == 0x80
    assert int(QueueManagerRight.GET_PERMISSIONS) == 0x20000
    assert int(QueueManagerRight.CHANGE_PERMISSIONS) == 0x40000
    # The gateway's own rights sit where MSMQ's mask has nothing.
    own = (
        QueueManagerRight.MANAGE_TRIGGERS
        | QueueManagerRight.MANAGE_OUTGOING
        | QueueManagerRight.READ_METRICS
        | QueueManagerRight.READ_AUDIT
        | QueueManagerRight.TRANSACT
    )
    assert own & 0x00FFFFFF == 0


@pytest.mark.parametrize(
    ("pattern", "path", "expected"),
    [
        ("private$/orders", "private$/orders", True),
        ("private$/orders", "PRIVATE$/Orders", True),
        ("private$\\orders", "private$/orders", True),
        ("private$/orders", "private$/orders2", False),
        ("private$/orders", "private$/order", False),
        ("private$/orders*", "private$/orders2", True),
        ("private$/orders*", "private$/orders", True),
        ("private$/*", "private$/a/b", True),
        ("private$/*", "orders", False),
        ("*", "anything", True),
        ("*", "", True),
        ("a*b*c", "abc", True),
        ("a*b*c", "axxbyyc", True),
        ("a*b*c", "acb", False),
        ("ab*ba", "aba", False),  # the ends may not overlap
        ("*.x", "a.x", True),
        ("a?c", "abc", False),  # only `*` is special
        ("[a]", "a", False),
        ("kelvin", "\u212aelvin", False),  # Windows folds ASCII only
        ("strasse", "stra\u00dfe", False),
    ],
)
def test_patterns(pattern: str, path: str, expected: bool) -> None:
    assert matches(pattern, path) is expected


def _queue(path: str, right: QueueRight) -> Requirement:
    return on_queue(right, parse_queue_path(path))


@pytest.mark.parametrize("needed", SINGLE_QUEUE_RIGHTS)
@pytest.mark.parametrize("given", SINGLE_QUEUE_RIGHTS)
def test_each_queue_right_allows_itself_only(given: QueueRight, needed: QueueRight) -> None:
    grants = [Grant("app", "private$/orders", int(given))]
    assert allows(grants, _queue("private$/orders", needed)) is (given == needed)
    # ... on its own queue only, and never on the queue manager.
    assert not allows(grants, _queue("private$/other", needed))
    for qm_right in SINGLE_QM_RIGHTS:
        assert not allows(grants, on_queue_manager(qm_right))


@pytest.mark.parametrize("needed", SINGLE_QM_RIGHTS)
@pytest.mark.parametrize("given", SINGLE_QM_RIGHTS)
def test_each_queue_manager_right_allows_itself_only(
    given: QueueManagerRight, needed: QueueManagerRight
) -> None:
    grants = [Grant("ops", QUEUE_MANAGER, int(given))]
    assert allows(grants, on_queue_manager(needed)) is (given == needed)
    for queue_right in SINGLE_QUEUE_RIGHTS:  # a queue-manager grant is no queue grant
        assert not allows(grants, _queue("private$/orders", queue_right))


def test_receive_needs_both_delete_and_peek() -> None:
    receive = _queue("orders", QueueRight.RECEIVE_MESSAGE)
    assert not allows([Grant("a", "orders", int(QueueRight.PEEK_MESSAGE))], receive)
    assert not allows([Grant("a", "orders", int(QueueRight.DELETE_MESSAGE))], receive)
    split = [
        Grant("a", "orders", int(QueueRight.PEEK_MESSAGE)),
        Grant("a", "ord*", int(QueueRight.DELETE_MESSAGE)),
    ]
    assert allows(split, receive)  # grants add up


@pytest.mark.parametrize(
    ("generic", "included"),
    [
        (
            QueueRight.GENERIC_READ,
            {"GET_PROPERTIES", "GET_PERMISSIONS", "DELETE_MESSAGE", "PEEK_MESSAGE", "DELETE_JOURNAL_MESSAGE"},
        ),
        (QueueRight.GENERIC_WRITE, {"GET_PROPERTIES", "GET_PERMISSIONS", "WRITE_MESSAGE"}),
        (QueueRight.GENERIC_ALL, {right.name for right in SINGLE_QUEUE_RIGHTS}),
    ],
)
def test_generic_rights(generic: QueueRight, included: set[str]) -> None:
    grants = [Grant("a", "*", int(generic))]
    for right in SINGLE_QUEUE_RIGHTS:
        assert allows(grants, _queue("private$/x", right)) is (right.name in included)


def test_journal_queues_are_read_with_the_queues_journal_rights() -> None:
    assert _queue("private$/orders;journal", QueueRight.RECEIVE_MESSAGE) == Requirement(
        int(QueueRight.RECEIVE_JOURNAL_MESSAGE), "private$/orders"
    )
    assert _queue("private$/orders;journal", QueueRight.PEEK_MESSAGE) == Requirement(
        int(QueueRight.PEEK_MESSAGE), "private$/orders"
    )
    reader = [Grant("a", "private$/orders", int(QueueRight.RECEIVE_MESSAGE))]
    assert not allows(reader, _queue("private$/orders;journal", QueueRight.RECEIVE_MESSAGE))
    journal_reader = [Grant("a", "private$/orders", int(QueueRight.RECEIVE_JOURNAL_MESSAGE))]
    assert allows(journal_reader, _queue("private$/orders;journal", QueueRight.RECEIVE_MESSAGE))
    assert not allows(journal_reader, _queue("private$/orders", QueueRight.RECEIVE_MESSAGE))


@pytest.mark.parametrize(
    ("path", "right", "needed"),
    [
        ("system$;deadletter", QueueRight.RECEIVE_MESSAGE, QueueManagerRight.RECEIVE_DEADLETTER_MESSAGE),
        ("system$;deadxact", QueueRight.PEEK_MESSAGE, QueueManagerRight.PEEK_DEADLETTER_MESSAGE),
        ("system$;deadxact", QueueRight.DELETE_MESSAGE, QueueManagerRight.DELETE_DEADLETTER_MESSAGE),
        ("system$;journal", QueueRight.RECEIVE_MESSAGE, QueueManagerRight.RECEIVE_JOURNAL_QUEUE_MESSAGE),
        ("system$;journal", QueueRight.PEEK_MESSAGE, QueueManagerRight.PEEK_JOURNAL_QUEUE_MESSAGE),
        ("system$;journal", QueueRight.GET_PROPERTIES, QueueManagerRight.GET_PROPERTIES),
    ],
)
def test_system_queues_are_the_queue_managers(
    path: str, right: QueueRight, needed: QueueManagerRight
) -> None:
    requirement = _queue(path, right)
    assert requirement == on_queue_manager(needed)
    assert not allows([Grant("a", "*", int(QueueRight.GENERIC_ALL))], requirement)


def test_writing_a_system_queue_stays_a_queue_right() -> None:
    assert _queue("system$;deadletter", QueueRight.WRITE_MESSAGE) == Requirement(
        int(QueueRight.WRITE_MESSAGE), "system$;deadletter"
    )


def test_administrator_grants_allow_everything() -> None:
    grants = [Grant("root", scope, rights) for scope, rights in ADMINISTRATOR_GRANTS]
    for right in QueueRight:
        for path in ("orders", "private$/x;journal", "system$;deadletter", "system$;journal"):
            assert allows(grants, _queue(path, right))
    for qm_right in QueueManagerRight:
        assert allows(grants, on_queue_manager(qm_right))


def test_the_owner_has_everything_on_its_queue_only() -> None:
    grants = [owner_grant("app", parse_queue_path("PRIVATE$\\Orders"))]
    for right in SINGLE_QUEUE_RIGHTS:
        assert allows(grants, _queue("private$/orders", right))
        assert not allows(grants, _queue("private$/orders2", right))
    assert not allows(grants, on_queue_manager(QueueManagerRight.CREATE_QUEUE))


def test_no_grants_allow_nothing() -> None:
    for right in QueueRight:
        assert not allows([], _queue("orders", right))
    for qm_right in QueueManagerRight:
        assert not allows([], on_queue_manager(qm_right))


def test_require_raises_access_denied_naming_what_is_missing() -> None:
    with pytest.raises(MqError) as raised:
        require("app", [], _queue("private$/orders", QueueRight.WRITE_MESSAGE))
    assert raised.value.code is MqErrorCode.MQ_ERROR_ACCESS_DENIED
    assert "'app' lacks WRITE_MESSAGE on 'private$/orders'" in raised.value.detail
    require("app", [Grant("app", "*", int(QueueRight.WRITE_MESSAGE))], _queue("x", QueueRight.WRITE_MESSAGE))


def test_rights_parse_and_print_by_name() -> None:
    assert parse_rights("receive_message, write_message", "orders") == 0x7
    assert parse_rights("GENERIC_ALL", QUEUE_MANAGER) == int(QueueManagerRight.GENERIC_ALL)
    assert rights_names(0x7, "orders") == ["DELETE_MESSAGE", "PEEK_MESSAGE", "WRITE_MESSAGE"]
    assert rights_names(int(QueueManagerRight.TRANSACT), QUEUE_MANAGER) == ["TRANSACT"]
    for text, scope in (("CREATE_QUEUE", "orders"), ("WRITE_MESSAGE", QUEUE_MANAGER), ("", "x")):
        with pytest.raises(MqError) as raised:
            parse_rights(text, scope)
        assert raised.value.code is MqErrorCode.MQ_ERROR_INVALID_PARAMETER


def test_every_pair_of_single_rights_needs_both() -> None:
    for first, second in itertools.combinations(SINGLE_QUEUE_RIGHTS, 2):
        both = Requirement(int(first | second), "q")
        assert not allows([Grant("a", "q", int(first))], both)
        assert allows([Grant("a", "q", int(first)), Grant("a", "*", int(second))], both)
