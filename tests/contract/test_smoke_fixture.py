from __future__ import annotations

import pytest

from qm.manager import QueueManager
from qm.model import MessageProperties
from qm.reading import QueueReader

pytestmark = pytest.mark.anyio


async def test_send_then_receive_returns_the_message(manager: QueueManager, reader: QueueReader) -> None:
    await manager.create_queue("private$/orders", manager_settings())
    await manager.send("private$/orders", MessageProperties(body=b"hello"))
    received = await reader.receive("private$/orders", 0)
    assert received is not None and received.properties.body == b"hello"


def manager_settings():  # type: ignore[no-untyped-def]
    from qm.model import QueueSettings

    return QueueSettings()
