"""Queue names that could never be named again, and names that alias others (issue 18 item 7):
a name with `=` parses as a format name wherever a queue is named, so it is refused at
creation, and one created before is found and removed by `unreachable_queues`; names compare
case-insensitively in ASCII only, as Windows compares them, so the Kelvin sign is not `k` and
`ß` is not `ss`."""

from __future__ import annotations

import pytest

from qm.clock import SettableClock
from qm.errors import MqErrorCode
from qm.manager import QueueManager
from qm.model import MessageProperties, QueueSettings
from qm.paths import QueueKind, QueuePath
from tests.contract.support import counts, mq_error, new_queue

pytestmark = pytest.mark.anyio

FORMAT_NAME_LIKE = [
    "PRIVATE=abc",
    "DIRECT=x",
    "DL=x",
    "PUBLIC=",
    "MACHINE=",
    "MULTICAST=1.2.3.4:80",
    "private$/DIRECT=x",
    "a=b",
]


@pytest.mark.parametrize("path", FORMAT_NAME_LIKE)
async def test_a_name_that_parses_as_a_format_name_is_refused(manager: QueueManager, path: str) -> None:
    before = len(await manager.list_queues())
    with mq_error(MqErrorCode.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME):
        await manager.create_queue(path, QueueSettings())
    assert len(await manager.list_queues()) == before


@pytest.mark.parametrize(("first", "second"), [("k", "\u212a"), ("strasse", "straße"), ("i", "\u0130")])
async def test_only_ascii_letters_fold(manager: QueueManager, first: str, second: str) -> None:
    await new_queue(manager, f"private$/{first}")
    await new_queue(manager, f"private$/{second}")  # not MQ_ERROR_QUEUE_EXISTS
    await manager.send(f"private$/{second}", MessageProperties(body=b"x"))
    assert await counts(manager, f"private$/{first}") == (0, 0)
    assert (await manager.get_queue(f"private$/{second}")).path.name == second


async def test_ascii_letters_still_fold(manager: QueueManager) -> None:
    await new_queue(manager, "private$/Orders")
    with mq_error(MqErrorCode.MQ_ERROR_QUEUE_EXISTS):
        await manager.create_queue("private$/ORDERS", QueueSettings())
    assert (await manager.get_queue("PRIVATE$\\orders")).path.name == "Orders"


async def test_a_queue_created_with_an_unreachable_name_before_can_be_removed(
    manager: QueueManager, clock: SettableClock
) -> None:
    """As an older gateway stored it: the store takes any path it is given."""
    stored = await manager.store.queues.create_queue(
        QueuePath(QueueKind.PUBLIC, "DIRECT=x"), QueueSettings(), clock.now()
    )
    await new_queue(manager, "private$/fine")
    found = await manager.unreachable_queues()
    assert [queue.id for queue in found] == [stored.id]
    assert await manager.delete_unreachable_queue(stored.id) == 0
    assert await manager.unreachable_queues() == []
    local = [queue.path for queue in await manager.list_queues() if queue.path.kind is not QueueKind.SYSTEM]
    assert [path.url_path for path in local] == ["private$/fine", "private$/fine;journal"]
    with mq_error(MqErrorCode.MQ_ERROR_QUEUE_NOT_FOUND):  # only an unreachable queue goes this way
        await manager.delete_unreachable_queue((await manager.get_queue("private$/fine")).id)


@pytest.mark.parametrize("path", ["private$/s*", "*", "a*b"])
async def test_a_name_with_a_star_is_refused(manager: QueueManager, path: str) -> None:
    """`*` is a grant pattern's wildcard, and a queue's creator owns it by a grant on its path."""
    before = len(await manager.list_queues())
    with mq_error(MqErrorCode.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME):
        await manager.create_queue(path, QueueSettings())
    assert len(await manager.list_queues()) == before


async def test_a_queue_created_with_a_star_before_is_unreachable_and_can_be_removed(
    manager: QueueManager, clock: SettableClock
) -> None:
    stored = await manager.store.queues.create_queue(
        QueuePath(QueueKind.PRIVATE, "s*"), QueueSettings(), clock.now()
    )
    assert [queue.id for queue in await manager.unreachable_queues()] == [stored.id]
    assert await manager.delete_unreachable_queue(stored.id) == 0
    assert await manager.unreachable_queues() == []
