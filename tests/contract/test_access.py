"""storage.access on both stores: principals, key hashes, grants, the audit log; and
qm.access.AccessControl's remembered grants."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta

import pytest

from qm.access import AccessControl, ApiKeyRecord, AuditEntry
from qm.clock import SettableClock
from qm.errors import MqErrorCode
from qm.manager import QueueManager
from qm.model import Acknowledgment, MessageClass, MessageProperties, QueueSettings
from qm.paths import parse_queue_path
from qm.reading import QueueReader
from qm.rights import QUEUE_MANAGER, Grant, QueueManagerRight, QueueRight, on_queue, on_queue_manager
from storage.access import SqlAccess
from storage.engine import make_engine
from storage.store import SqlStore
from tests.contract.support import mq_error

pytestmark = pytest.mark.anyio


@pytest.fixture
async def access(database_url: str) -> AsyncIterator[SqlAccess]:
    store = SqlStore(make_engine(database_url))
    yield store.access
    await store.close()


def _key(key_id: str, principal: str, clock: SettableClock) -> ApiKeyRecord:
    return ApiKeyRecord(key_id, principal, b"s" * 16, b"h" * 64, "ci", clock.now())


async def test_principals_keys_and_revocation(access: SqlAccess, clock: SettableClock) -> None:
    created = await access.ensure_principal("app", "the order service", clock.now())
    again = await access.ensure_principal("app", "ignored", clock.now())
    assert created == again
    assert created.description == "the order service"
    await access.add_key(_key("k1", "app", clock))
    found = await access.find_key("k1")
    assert found is not None
    assert (found.principal, found.salt, found.hash, found.revoked_at) == ("app", b"s" * 16, b"h" * 64, None)
    assert await access.find_key("nope") is None
    assert await access.revoke_key("k1", clock.now())
    assert not await access.revoke_key("k1", clock.now())  # once
    revoked = await access.find_key("k1")
    assert revoked is not None
    assert revoked.revoked_at == clock.now()
    assert [key.key_id for key in await access.list_keys("app")] == ["k1"]
    assert await access.list_keys("other") == []


async def test_grants_merge_and_empty_grants_disappear(access: SqlAccess, clock: SettableClock) -> None:
    await access.ensure_principal("app", "", clock.now())
    read = int(QueueRight.RECEIVE_MESSAGE)
    write = int(QueueRight.WRITE_MESSAGE)
    assert await access.change_grant("app", "private$/orders", read, 0) == Grant(
        "app", "private$/orders", read
    )
    assert await access.change_grant("app", "private$/orders", write, 0) == Grant(
        "app", "private$/orders", read | write
    )
    qm_right = int(QueueManagerRight.TRANSACT)
    await access.change_grant("app", QUEUE_MANAGER, qm_right, 0)
    assert sorted(await access.grants_of("app"), key=repr) == sorted(
        [Grant("app", "private$/orders", read | write), Grant("app", None, qm_right)], key=repr
    )
    assert await access.change_grant("app", "private$/orders", 0, read) == Grant(
        "app", "private$/orders", write
    )
    assert await access.change_grant("app", "private$/orders", 0, write) is None
    assert await access.grants_of("app") == [Grant("app", None, qm_right)]


async def test_deleting_a_principal_takes_its_keys_and_grants(
    access: SqlAccess, clock: SettableClock
) -> None:
    await access.ensure_principal("app", "", clock.now())
    await access.add_key(_key("k1", "app", clock))
    await access.change_grant("app", "*", int(QueueRight.GENERIC_ALL), 0)
    assert await access.delete_principal("app")
    assert not await access.delete_principal("app")
    assert await access.find_key("k1") is None
    assert await access.grants_of("app") == []
    assert [principal.name for principal in await access.list_principals()] == []


async def test_audit_pages_newest_first_and_prunes_by_age(access: SqlAccess, clock: SettableClock) -> None:
    for number in range(5):
        await access.record_audit(
            AuditEntry(
                clock.now(), "ops", "127.0.0.1:5000", "DELETE /api/queues/{path}", f"q{number}", "allowed 204"
            )
        )
        clock.advance(60)
    page = await access.audit_page(None, 2)
    assert [entry.target for entry in page] == ["q4", "q3"]
    rest = await access.audit_page(page[-1].id, 10)
    assert [entry.target for entry in rest] == ["q2", "q1", "q0"]
    assert await access.prune_audit(clock.now() - timedelta(seconds=150)) == 3
    assert [entry.target for entry in await access.audit_page(None, 10)] == ["q4", "q3"]


async def test_access_control_remembers_grants_until_told_or_timed_out(
    access: SqlAccess, clock: SettableClock
) -> None:
    ticks = [0.0]
    control = AccessControl(access, clock, ttl_s=5.0, monotonic=lambda: ticks[0])
    orders = on_queue(QueueRight.WRITE_MESSAGE, parse_queue_path("private$/orders"))
    with mq_error(MqErrorCode.MQ_ERROR_ACCESS_DENIED):
        await control.check("app", orders)
    await control.change_grant("app", "private$/orders", int(QueueRight.WRITE_MESSAGE), 0)
    await control.check("app", orders)  # this process's change: seen at once
    # Another process revokes: seen once the remembered grants time out.
    other = AccessControl(access, clock, ttl_s=5.0)
    await other.change_grant("app", "private$/orders", 0, int(QueueRight.WRITE_MESSAGE))
    await control.check("app", orders)
    ticks[0] = 5.0
    with mq_error(MqErrorCode.MQ_ERROR_ACCESS_DENIED):
        await control.check("app", orders)
    with mq_error(MqErrorCode.MQ_ERROR_ACCESS_DENIED):
        await control.check("app", on_queue_manager(QueueManagerRight.CREATE_QUEUE))


async def test_a_refused_arrival_earns_only_its_nack_where_asked(manager: QueueManager) -> None:
    """MQMSG_CLASS_NACK_ACCESS_DENIED (0x8004) to the admin queue for a message that asked for
    negative arrival acknowledgments; nothing else stored anywhere."""
    await manager.create_queue("private$/orders", QueueSettings())
    await manager.create_queue("private$/admin", QueueSettings())
    asking = MessageProperties(
        body=b"order",
        label="o",
        admin_queue="DIRECT=OS:.\\private$\\admin",
        acknowledge=Acknowledgment.NEG_ARRIVAL,
    )
    path = manager.resolve("private$/orders")
    assert await manager.refuse_arrival(path, asking, "{0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0}\\7")
    not_asking = MessageProperties(body=b"x", admin_queue="DIRECT=OS:.\\private$\\admin")
    assert not await manager.refuse_arrival(path, not_asking, "{0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0}\\8")
    reader = QueueReader(manager)
    nack = await reader.receive("private$/admin", 0)
    assert nack is not None
    assert nack.properties.message_class == MessageClass.NACK_ACCESS_DENIED  # 0x8004
    assert nack.properties.body == b"order"
    assert nack.properties.response_queue == "DIRECT=OS:.\\private$\\orders"
    assert await reader.receive("private$/admin", 0) is None
    assert await reader.peek("private$/orders", 0) is None
