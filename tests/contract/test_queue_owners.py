"""storage.access on both stores: queue owners (they go with their queue and their principal)
and grants on exactly one queue (a `*` in its name is no wildcard; found as paths compare)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from qm.access import AccessControl
from qm.clock import SettableClock
from qm.errors import MqErrorCode
from qm.manager import QueueManager
from qm.model import QueueSettings
from qm.paths import parse_queue_path
from qm.rights import Grant, QueueRight, on_queue
from storage.access import SqlAccess
from storage.engine import make_engine
from storage.store import SqlStore
from tests.contract.support import mq_error

pytestmark = pytest.mark.anyio
READ = int(QueueRight.RECEIVE_MESSAGE)
WRITE = int(QueueRight.WRITE_MESSAGE)


@pytest.fixture
async def access(database_url: str) -> AsyncIterator[SqlAccess]:
    store = SqlStore(make_engine(database_url))
    yield store.access
    await store.close()


async def test_an_owner_goes_with_its_queue_and_its_principal(
    manager: QueueManager, access: SqlAccess, clock: SettableClock
) -> None:
    await manager.create_queue("private$/Orders", QueueSettings())
    orders = parse_queue_path("PRIVATE$\\orders")
    assert await access.queue_owner(orders.key) is None
    await access.ensure_principal("alice", "", clock.now())
    await access.ensure_principal("bob", "", clock.now())
    assert await access.set_queue_owner(orders.key, "alice")
    assert await access.set_queue_owner(orders.key, "bob")  # replaced, not added
    assert await access.queue_owner(orders.key) == "bob"
    assert not await access.set_queue_owner(parse_queue_path("private$/none").key, "bob")
    assert await access.delete_principal("bob")
    assert await access.queue_owner(orders.key) is None
    assert await access.set_queue_owner(orders.key, "alice")
    await manager.delete_queue("private$/orders")
    await manager.create_queue("private$/orders", QueueSettings())
    assert await access.queue_owner(orders.key) is None


async def test_a_queue_grant_is_one_row_found_as_paths_compare(
    access: SqlAccess, clock: SettableClock
) -> None:
    await access.ensure_principal("app", "", clock.now())
    await access.change_grant("app", "PRIVATE$/Orders", READ, 0)
    merged = await access.change_grant("app", "private$/orders", WRITE, 0, exact=True)
    assert merged == Grant("app", "private$/orders", READ | WRITE)
    assert await access.list_grants("app") == [merged]
    assert await access.change_grant("app", "private$/ORDERS", 0, READ | WRITE) is None
    assert await access.list_grants("app") == []


async def test_a_star_in_an_exact_grant_is_part_of_the_name(access: SqlAccess, clock: SettableClock) -> None:
    await access.ensure_principal("app", "", clock.now())
    pattern = await access.change_grant("app", "private$/team-*", READ, 0)
    exact = await access.change_grant("app", "PRIVATE$/Team-*", WRITE, 0, exact=True)
    assert pattern == Grant("app", "private$/team-*", READ)
    assert exact == Grant("app", "PRIVATE$/Team-*", WRITE, exact=True)
    assert sorted(await access.list_grants("app"), key=repr) == sorted([pattern, exact], key=repr)
    control = AccessControl(access, clock, ttl_s=60)
    await control.check("app", on_queue(QueueRight.RECEIVE_MESSAGE, parse_queue_path("private$/team-b")))
    with mq_error(MqErrorCode.MQ_ERROR_ACCESS_DENIED):
        await control.check("app", on_queue(QueueRight.WRITE_MESSAGE, parse_queue_path("private$/team-b")))
    # Deleting the queue `private$/team-*` takes its exact grant, not the pattern.
    assert await access.delete_queue_grants("private$/team-*") == 1
    assert await access.list_grants("app") == [pattern]
