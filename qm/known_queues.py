"""Queues remembered by path key, so a send or a plain receive reads no queue row before its
transaction.

Only what never changes after a queue is created is relied upon (its ID, path and
transactional flag). The transaction that sends or receives re-reads what can change (quotas,
journaling) and checks that the ID still names a queue with this path key, so a queue deleted
(or deleted and re-created) by another process is caught there, and the caller looks it up
again once.
"""

from __future__ import annotations

from collections import OrderedDict

from qm.model import Queue

DEFAULT_CAPACITY = 4096


class KnownQueues:
    """A bounded, least-recently-used map of path key -> queue."""

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self._capacity = capacity
        self._queues: OrderedDict[str, Queue] = OrderedDict()

    def get(self, key: str) -> Queue | None:
        queue = self._queues.get(key)
        if queue is not None:
            self._queues.move_to_end(key)
        return queue

    def put(self, queue: Queue) -> None:
        self._queues[queue.path.key] = queue
        self._queues.move_to_end(queue.path.key)
        while len(self._queues) > self._capacity:
            self._queues.popitem(last=False)

    def forget(self, key: str) -> None:
        self._queues.pop(key, None)
