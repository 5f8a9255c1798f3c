"""Queues: create, get, list, update, delete, purge; path identity; system and journal queues."""

from __future__ import annotations

import pytest

from qm.clock import SettableClock
from qm.errors import MqErrorCode
from qm.manager import QueueManager
from qm.model import INFINITE, MessageProperties, QueueChanges, QueueSettings
from qm.paths import QueueKind
from qm.reading import QueueReader
from tests.contract.support import counts, mq_error, new_queue, send_bodies

pytestmark = pytest.mark.anyio

SYSTEM_QUEUES = ["system$;deadletter", "system$;deadxact", "system$;journal"]


async def test_create_returns_the_stored_queue(manager: QueueManager, clock: SettableClock) -> None:
    settings = QueueSettings(
        label="Orders", transactional=True, quota_kb=10, journal=True, journal_quota_kb=5
    )
    queue = await manager.create_queue("private$\\Orders", settings)
    assert queue.path.kind is QueueKind.PRIVATE
    assert queue.path.name == "Orders"
    assert queue.settings == settings
    assert queue.created_at == queue.modified_at == clock.now()
    assert (queue.message_count, queue.byte_count) == (0, 0)
    assert queue.journal_queue_id is not None
    assert await manager.get_queue("private$/orders") == queue


async def test_default_settings(manager: QueueManager) -> None:
    queue = await manager.create_queue("private$/plain", QueueSettings())
    assert not queue.settings.transactional
    assert queue.settings.quota_kb == INFINITE
    assert queue.settings.journal_quota_kb == INFINITE
    assert not queue.settings.journal


async def test_path_spellings_name_one_queue(manager: QueueManager) -> None:
    created = await manager.create_queue("private$\\Orders", QueueSettings())
    for other_spelling in (
        "private$/orders",
        "PRIVATE$\\ORDERS",
        ".\\private$\\Orders",
        "./Private$/orders",
        " private$/orders ",
    ):
        assert (await manager.get_queue(other_spelling)).id == created.id
        with mq_error(MqErrorCode.MQ_ERROR_QUEUE_EXISTS):
            await manager.create_queue(other_spelling, QueueSettings(label="second"))
    assert (await manager.get_queue("private$/orders")) == created


async def test_public_and_private_queues_of_one_name_are_distinct(manager: QueueManager) -> None:
    private = await manager.create_queue("private$/orders", QueueSettings())
    public = await manager.create_queue("orders", QueueSettings())
    assert private.id != public.id
    assert public.path.kind is QueueKind.PUBLIC
    await manager.send("orders", MessageProperties(body=b"public"))
    assert await counts(manager, "private$/orders") == (0, 0)
    assert await counts(manager, "orders") == (1, 6)


ILLEGAL_PATHS = [
    "",
    "private$/",
    "private$/" + "q" * 125,
    "private$/a;b",
    "private$/a/b",
    "private$/a b",
    "private$/a..b",
    "private$/a,b",
    "private$/a+b",
    'private$/a"b',
    "private$/a\tb",
]


async def test_illegal_path_names_create_nothing(manager: QueueManager) -> None:
    """The full character rules are unit-tested in tests/unit/test_paths.py."""
    before = await manager.list_queues()
    for path in ILLEGAL_PATHS:
        with mq_error(MqErrorCode.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME):
            await manager.create_queue(path, QueueSettings())
        with mq_error(MqErrorCode.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME):
            await manager.send(path, MessageProperties())
    assert await manager.list_queues() == before


async def test_a_name_of_124_characters_is_legal(manager: QueueManager) -> None:
    path = "private$/" + "q" * 124
    await manager.create_queue(path, QueueSettings())
    assert (await manager.get_queue(path)).path.name == "q" * 124


async def test_journal_and_system_queues_cannot_be_created(manager: QueueManager) -> None:
    for path in ["private$/orders;journal", *SYSTEM_QUEUES]:
        with mq_error(MqErrorCode.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME):
            await manager.create_queue(path, QueueSettings())
    with mq_error(MqErrorCode.MQ_ERROR_QUEUE_NOT_FOUND):
        await manager.get_queue("private$/orders")


async def test_unknown_queue(manager: QueueManager) -> None:
    with mq_error(MqErrorCode.MQ_ERROR_QUEUE_NOT_FOUND):
        await manager.get_queue("private$/missing")
    with mq_error(MqErrorCode.MQ_ERROR_QUEUE_NOT_FOUND):
        await manager.update_queue("private$/missing", QueueChanges(label="x"))
    with mq_error(MqErrorCode.MQ_ERROR_QUEUE_NOT_FOUND):
        await manager.delete_queue("private$/missing")
    with mq_error(MqErrorCode.MQ_ERROR_QUEUE_NOT_FOUND):
        await manager.purge_queue("private$/missing")
    with mq_error(MqErrorCode.MQ_ERROR_QUEUE_NOT_FOUND):
        await manager.send("private$/missing", MessageProperties())


async def test_list_holds_system_queues_and_each_queue_with_its_journal(manager: QueueManager) -> None:
    await new_queue(manager, "private$/b")
    await new_queue(manager, "a")
    listed = {queue.path.url_path for queue in await manager.list_queues()}
    assert listed == {*SYSTEM_QUEUES, "private$/b", "private$/b;journal", "a", "a;journal"}


async def test_system_queues_exist_from_the_start(manager: QueueManager) -> None:
    for path in SYSTEM_QUEUES:
        queue = await manager.get_queue(path.upper())
        assert queue.path.kind is QueueKind.SYSTEM
        assert queue.path.url_path == path
        assert queue.journal_queue_id is None
        assert (queue.message_count, queue.byte_count) == (0, 0)


async def test_journal_queue_exists_with_its_queue(manager: QueueManager) -> None:
    queue = await manager.create_queue("private$/orders", QueueSettings(journal_quota_kb=7))
    journal = await manager.get_queue("PRIVATE$\\Orders;Journal")
    assert journal.id == queue.journal_queue_id
    assert journal.path.journal
    assert journal.settings.quota_kb == 7


async def test_journal_and_system_queues_refuse_sends_updates_and_deletes(manager: QueueManager) -> None:
    await new_queue(manager, "private$/orders")
    for path in ["private$/orders;journal", "orders;journal", *SYSTEM_QUEUES]:
        with mq_error(MqErrorCode.MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION):
            await manager.send(path, MessageProperties(body=b"x"))
        with mq_error(MqErrorCode.MQ_ERROR_ACCESS_DENIED):
            await manager.update_queue(path, QueueChanges(label="mine"))
        with mq_error(MqErrorCode.MQ_ERROR_ACCESS_DENIED):
            await manager.delete_queue(path)
    for path in ["private$/orders;journal", *SYSTEM_QUEUES]:
        queue = await manager.get_queue(path)
        assert (queue.message_count, queue.settings.label) == (0, "")


async def test_journal_and_system_queues_can_be_purged(manager: QueueManager, reader: QueueReader) -> None:
    path = await new_queue(manager, "private$/orders", QueueSettings(journal=True))
    await send_bodies(manager, path, [b"a", b"b"])
    assert await reader.receive(path, 0) is not None
    assert await counts(manager, "private$/orders;journal") == (1, 1)
    assert await manager.purge_queue("private$/orders;journal") == 1
    assert await counts(manager, "private$/orders;journal") == (0, 0)
    assert await manager.purge_queue("system$;deadletter") == 0
    assert await counts(manager, path) == (1, 1)


async def test_update_changes_only_what_is_given(manager: QueueManager, clock: SettableClock) -> None:
    created = await manager.create_queue("private$/orders", QueueSettings(label="old", quota_kb=50))
    clock.advance(5)
    updated = await manager.update_queue("private$/orders", QueueChanges(label="new", journal=True))
    assert updated.settings == QueueSettings(label="new", quota_kb=50, journal=True)
    assert updated.created_at == created.created_at
    assert updated.modified_at == clock.now()
    assert await manager.get_queue("private$/orders") == updated


async def test_update_of_the_journal_quota_applies_to_the_journal_queue(manager: QueueManager) -> None:
    await new_queue(manager, "private$/orders")
    await manager.update_queue("private$/orders", QueueChanges(journal_quota_kb=3))
    assert (await manager.get_queue("private$/orders")).settings.journal_quota_kb == 3
    assert (await manager.get_queue("private$/orders;journal")).settings.quota_kb == 3


async def test_invalid_updates_change_nothing(manager: QueueManager) -> None:
    created = await manager.create_queue("private$/orders", QueueSettings(label="kept"))
    for changes in (
        QueueChanges(label="x" * 125),
        QueueChanges(quota_kb=-1),
        QueueChanges(journal_quota_kb=INFINITE + 1),
        QueueChanges(base_priority=40000),
        QueueChanges(label="fine", quota_kb=-1),
    ):
        with mq_error(MqErrorCode.MQ_ERROR_ILLEGAL_PROPERTY_VALUE):
            await manager.update_queue("private$/orders", changes)
    assert await manager.get_queue("private$/orders") == created
    assert (await manager.get_queue("private$/orders;journal")).settings.quota_kb == INFINITE


async def test_invalid_settings_create_nothing(manager: QueueManager) -> None:
    before = await manager.list_queues()
    for settings in (
        QueueSettings(label="x" * 125),
        QueueSettings(quota_kb=-5),
        QueueSettings(journal_quota_kb=INFINITE + 1),
        QueueSettings(base_priority=-40000),
    ):
        with mq_error(MqErrorCode.MQ_ERROR_ILLEGAL_PROPERTY_VALUE):
            await manager.create_queue("private$/orders", settings)
    assert await manager.list_queues() == before


async def test_a_label_of_124_characters_is_legal(manager: QueueManager) -> None:
    queue = await manager.create_queue("private$/orders", QueueSettings(label="L" * 124))
    assert queue.settings.label == "L" * 124


async def test_delete_drops_the_queue_its_journal_and_their_messages(
    manager: QueueManager, reader: QueueReader
) -> None:
    path = await new_queue(manager, "private$/orders", QueueSettings(journal=True))
    await send_bodies(manager, path, [b"1", b"2", b"3"])
    assert await reader.receive(path, 0) is not None  # one copy in the journal
    assert await manager.delete_queue("private$\\ORDERS") == 3
    for gone in (path, "private$/orders;journal"):
        with mq_error(MqErrorCode.MQ_ERROR_QUEUE_NOT_FOUND):
            await manager.get_queue(gone)
    info = await manager.info()
    assert (info.message_count, info.byte_count) == (0, 0)


async def test_a_deleted_queue_can_be_created_again_empty(manager: QueueManager) -> None:
    path = await new_queue(manager, "private$/orders")
    await send_bodies(manager, path, [b"1"])
    await manager.delete_queue(path)
    recreated = await manager.create_queue(path, QueueSettings(transactional=True))
    assert recreated.settings.transactional
    assert await counts(manager, path) == (0, 0)


async def test_deleting_one_queue_leaves_the_others(manager: QueueManager) -> None:
    await new_queue(manager, "private$/a")
    await new_queue(manager, "private$/b")
    await send_bodies(manager, "private$/b", [b"kept"])
    await manager.delete_queue("private$/a")
    assert await counts(manager, "private$/b") == (1, 4)


async def test_purge_removes_every_available_message(manager: QueueManager, reader: QueueReader) -> None:
    path = await new_queue(manager, "private$/orders")
    await new_queue(manager, "private$/other")
    await send_bodies(manager, path, [b"1", b"22", b"333"])
    await send_bodies(manager, "private$/other", [b"kept"])
    assert await manager.purge_queue(path) == 3
    assert await counts(manager, path) == (0, 0)
    assert await reader.peek(path, 0) is None
    assert await counts(manager, "private$/other") == (1, 4)
    assert await manager.purge_queue(path) == 0


async def test_totals_follow_sends_and_receives(manager: QueueManager, reader: QueueReader) -> None:
    path = await new_queue(manager, "private$/orders")
    await manager.send(path, MessageProperties(body=b"12345", extension=b"abc"))
    await manager.send(path, MessageProperties(body=b"1234567890"))
    assert await counts(manager, path) == (2, 18)
    info = await manager.info()
    assert (info.message_count, info.byte_count) == (2, 18)
    await reader.receive(path, 0)
    assert await counts(manager, path) == (1, 10)
    await reader.receive(path, 0)
    assert await counts(manager, path) == (0, 0)
    info = await manager.info()
    assert (info.message_count, info.byte_count) == (0, 0)


async def test_machine_totals_span_every_queue(manager: QueueManager) -> None:
    await new_queue(manager, "private$/a")
    await new_queue(manager, "b")
    await send_bodies(manager, "private$/a", [b"xx", b"yyy"])
    await send_bodies(manager, "b", [b"zzzz"])
    info = await manager.info()
    assert (info.message_count, info.byte_count) == (3, 9)
