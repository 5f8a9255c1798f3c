"""A queue's own security, as MQGetQueueSecurity and MQSetQueueSecurity see it: its owner, and
the grants that reach it (its own, on exactly its path, and the patterns that match it).

Owner: the principal that created the queue with a key, or took ownership since
(TAKE_OWNERSHIP). As a Windows owner implicitly holds READ_CONTROL and WRITE_DAC on its object,
the owner implicitly holds GET_PERMISSIONS and CHANGE_PERMISSIONS on its queue: an owner who
took its own grant away can still see and mend the queue's permissions, and nothing but
taking ownership removes that. A queue created without credentials, by the CLI or before
migration 0015 has no owner (a grant to `anonymous` would reach every caller without a key).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from qm.errors import MqError, MqErrorCode
from qm.paths import QueuePath
from qm.rights import Grant, QueueRight, Requirement, names_exactly

OWNER_IMPLICIT = int(QueueRight.GET_PERMISSIONS | QueueRight.CHANGE_PERMISSIONS)
"""What the owner of a queue holds on it without a grant (Windows: READ_CONTROL | WRITE_DAC)."""


@dataclass(frozen=True, slots=True)
class SecurityEntry:
    """One grant that reaches a queue."""

    principal: str
    queue: str
    """The grant's scope as written: the queue's path, or a pattern."""
    rights: int
    own: bool
    """True: on exactly this queue (what its CHANGE_PERMISSIONS changes); False: a pattern that
    matches it (changed only with the queue manager's CHANGE_PERMISSIONS, /api/grants)."""


@dataclass(frozen=True, slots=True)
class QueueSecurity:
    path: QueuePath
    owner: str | None
    entries: tuple[SecurityEntry, ...]


def is_own(grant: Grant, path: QueuePath) -> bool:
    """A grant on exactly this queue: exact, or a path without `*` that names it."""
    return grant.queue is not None and names_exactly(grant.queue, grant.exact, path.url_path)


def queue_security(path: QueuePath, owner: str | None, grants: Iterable[Grant]) -> QueueSecurity:
    """The queue's owner and the grants that reach it, its own first, then by principal."""
    entries = [
        SecurityEntry(grant.principal, grant.queue, grant.rights, is_own(grant, path))
        for grant in grants
        if grant.queue is not None and grant.covers(path.url_path)
    ]
    entries.sort(key=lambda entry: (not entry.own, entry.principal, entry.queue))
    return QueueSecurity(path, owner, tuple(entries))


def owner_may(requirement: Requirement) -> bool:
    """Whether an owner's implicit rights alone would meet this requirement on a queue."""
    return requirement.queue is not None and requirement.rights & ~OWNER_IMPLICIT == 0


def securable(path: QueuePath) -> QueuePath:
    """Only public and private queues have security of their own: a journal's is its queue's,
    the system queues' the queue manager's, an outgoing queue's nobody's to change."""
    if not path.writable:
        raise MqError(
            MqErrorCode.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME,
            f"{path.url_path!r} has no security of its own: name a public or private queue",
        )
    return path
