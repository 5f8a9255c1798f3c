"""qm.queue_security: which grants reach a queue and which are its own, and what an owner holds."""

from __future__ import annotations

import pytest

from qm.errors import MqError
from qm.paths import parse_queue_path
from qm.queue_security import OWNER_IMPLICIT, is_own, owner_may, queue_security, securable
from qm.rights import Grant, QueueManagerRight, QueueRight, Requirement, on_queue, on_queue_manager

ORDERS = parse_queue_path("private$/orders")


def test_own_grants_are_on_exactly_the_queue_and_patterns_are_not() -> None:
    assert is_own(Grant("a", "PRIVATE$/Orders", 1), ORDERS)
    assert not is_own(Grant("a", "private$/ord*", 1), ORDERS)
    assert not is_own(Grant("a", None, 1), ORDERS)
    assert not is_own(Grant("a", "private$/orders*", 1), ORDERS)  # a pattern, though it matches
    assert not Grant("a", "private$/team-*", 1, exact=True).covers("private$/team-b")
    assert not Grant("a", "private$/\u212a", 1, exact=True).covers("private$/k")


def test_the_security_of_a_queue_lists_what_reaches_it_its_own_first() -> None:
    grants = [
        Grant("z", "*", 2),
        Grant("b", "private$/orders", 3),
        Grant("ops", None, int(QueueManagerRight.GENERIC_ALL)),
        Grant("a", "private$/other", 4),
        Grant("y", "private$/ord*", 4),
    ]
    security = queue_security(ORDERS, "b", grants)
    assert security.owner == "b"
    assert [(entry.principal, entry.queue, entry.own) for entry in security.entries] == [
        ("b", "private$/orders", True),
        ("y", "private$/ord*", False),
        ("z", "*", False),
    ]


def test_an_owner_holds_only_get_and_change_permissions() -> None:
    assert OWNER_IMPLICIT == 0x60000
    assert owner_may(on_queue(QueueRight.GET_PERMISSIONS, ORDERS))
    assert owner_may(on_queue(QueueRight.CHANGE_PERMISSIONS, ORDERS))
    assert not owner_may(on_queue(QueueRight.TAKE_OWNERSHIP, ORDERS))
    assert not owner_may(on_queue(QueueRight.RECEIVE_MESSAGE, ORDERS))
    assert not owner_may(Requirement(int(QueueRight.GENERIC_ALL), ORDERS.url_path))
    assert not owner_may(on_queue_manager(QueueManagerRight.GET_PERMISSIONS))


@pytest.mark.parametrize("text", ["private$/orders;journal", "system$;deadletter"])
def test_only_public_and_private_queues_have_security_of_their_own(text: str) -> None:
    with pytest.raises(MqError):
        securable(parse_queue_path(text))
    assert securable(ORDERS) is ORDERS
