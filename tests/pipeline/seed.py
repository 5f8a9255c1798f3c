"""A small message history made through the queue manager, as the gateway would make it.

In January 2026 (the settable clock's default): messages arrive in private$\\orders and
private$\\billing (journals on); some are received (journal copies), some expire with the
dead-letter flag (DEADLETTER copies, class 0xC002). Then, "today", one more is received:
its journal copy is newer than any cutoff the tests use. Some messages stay in the queues.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from qm.clock import SettableClock
from qm.manager import QueueManager
from qm.model import JournalFlags, MessageProperties, QueueSettings
from qm.reading import QueueReader

ORDERS = "private$/orders"
BILLING = "private$/billing"
DEADLETTER = "system$;deadletter"
CUTOFF = "2026-06-01T00:00:00Z"
"""Between the January history and today's journal copy."""
NACK_RECEIVE_TIMEOUT = 0xC002


@dataclass(frozen=True)
class History:
    journaled_old: int
    """Journal copies made in January (the receive "today" makes one more, of a January message)."""
    dead_letters: int
    live: int
    journaled_recent: int

    @property
    def archivable(self) -> int:
        return self.journaled_old + self.dead_letters


async def seed_history(manager: QueueManager, clock: SettableClock, per_queue: int = 4) -> History:
    settings = QueueSettings(journal=True)
    for path in (ORDERS, BILLING):
        await manager.create_queue(path, settings)
    reader = QueueReader(manager)
    for path in (ORDERS, BILLING):
        for number in range(per_queue):
            await manager.send(path, _properties(f"{path} #{number}", expiring=False))
            await manager.send(path, _properties(f"{path} expiring #{number}", expiring=True))
        clock.advance(2)
        for _ in range(per_queue - 1):  # receive the lasting ones but one: journal copies
            assert await reader.receive(path, 0) is not None
    clock.advance(60)
    dead = await manager.expire_due()
    clock.set(datetime.now(UTC))
    await manager.send(ORDERS, _properties("today", expiring=False))
    assert await reader.receive(ORDERS, 0) is not None
    assert dead == 2 * per_queue
    return History(journaled_old=2 * (per_queue - 1), dead_letters=dead, live=2, journaled_recent=1)


def _properties(label: str, expiring: bool) -> MessageProperties:
    return MessageProperties(
        body=label.encode() * 3,
        label=label,
        priority=3 if expiring else 5,  # receives take the lasting ones first
        time_to_be_received=10 if expiring else 0xFFFFFFFF,
        journal=JournalFlags.DEADLETTER if expiring else JournalFlags.NONE,
    )
