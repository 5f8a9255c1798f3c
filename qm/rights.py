"""Access rights in MSMQ's own terms, and the one decision: may this principal do that?

Queue rights are [MS-MQMQ] 2.2.24 MQQUEUEACCESSMASK, bit for bit; queue-manager rights are
2.2.23 MQQMACCESSMASK where MSMQ has one (create queue, machine properties and permissions,
the dead-letter and computer journal queues) and the gateway's own above bit 24 where MSMQ has
none (triggers, outgoing queues, metrics, the audit log, transactions and two-phase locks).

A grant gives a principal rights on one scope: the queue manager, the queues whose path
matches a pattern (`*` standing for any run of characters), or exactly one queue's path (an
exact grant, whose `*` is a character of the name: queue names may hold one). A queue's
creator is given MQSEC_QUEUE_GENERIC_ALL on its exact path (and is its owner: qm.queue_security).
Everything else is refused: there is no deny entry, as in RabbitMQ and unlike a Windows DACL.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from qm.errors import MqError, MqErrorCode
from qm.paths import QueueKind, QueuePath, SystemQueue


class QueueRight(enum.IntFlag):
    """MQQUEUEACCESSMASK ([MS-MQMQ] 2.2.24)."""

    DELETE_MESSAGE = 0x00000001
    PEEK_MESSAGE = 0x00000002
    WRITE_MESSAGE = 0x00000004
    DELETE_JOURNAL_MESSAGE = 0x00000008
    SET_PROPERTIES = 0x00000010
    GET_PROPERTIES = 0x00000020
    DELETE = 0x00010000
    GET_PERMISSIONS = 0x00020000
    CHANGE_PERMISSIONS = 0x00040000
    TAKE_OWNERSHIP = 0x00080000
    RECEIVE_MESSAGE = DELETE_MESSAGE | PEEK_MESSAGE
    RECEIVE_JOURNAL_MESSAGE = DELETE_JOURNAL_MESSAGE | PEEK_MESSAGE
    GENERIC_READ = GET_PROPERTIES | GET_PERMISSIONS | RECEIVE_MESSAGE | RECEIVE_JOURNAL_MESSAGE
    GENERIC_WRITE = GET_PROPERTIES | GET_PERMISSIONS | WRITE_MESSAGE
    GENERIC_ALL = (
        RECEIVE_MESSAGE
        | RECEIVE_JOURNAL_MESSAGE
        | WRITE_MESSAGE
        | SET_PROPERTIES
        | GET_PROPERTIES
        | DELETE
        | GET_PERMISSIONS
        | CHANGE_PERMISSIONS
        | TAKE_OWNERSHIP
    )


class QueueManagerRight(enum.IntFlag):
    """MQQMACCESSMASK ([MS-MQMQ] 2.2.23) where MSMQ has the right; the gateway's own above."""

    DELETE_DEADLETTER_MESSAGE = 0x00000001
    PEEK_DEADLETTER_MESSAGE = 0x00000002
    CREATE_QUEUE = 0x00000004
    SET_PROPERTIES = 0x00000010
    GET_PROPERTIES = 0x00000020
    DELETE_JOURNAL_QUEUE_MESSAGE = 0x00000040
    PEEK_JOURNAL_QUEUE_MESSAGE = 0x00000080
    GET_PERMISSIONS = 0x00020000
    CHANGE_PERMISSIONS = 0x00040000
    """Principals, API keys and grants: whoever holds it can give themselves anything."""
    MANAGE_TRIGGERS = 0x01000000
    """Triggers and rules (MSMQ keeps these outside the queue manager's ACL)."""
    MANAGE_OUTGOING = 0x02000000
    """Pause, resume and purge outgoing queues."""
    READ_METRICS = 0x04000000
    READ_AUDIT = 0x08000000
    TRANSACT = 0x10000000
    """Begin, show, commit and abort transactions and end two-phase locks: handles whose secret
    ID only their holder was given. What is sent or received in one needs the queue's right."""
    RECEIVE_DEADLETTER_MESSAGE = DELETE_DEADLETTER_MESSAGE | PEEK_DEADLETTER_MESSAGE
    RECEIVE_JOURNAL_QUEUE_MESSAGE = DELETE_JOURNAL_QUEUE_MESSAGE | PEEK_JOURNAL_QUEUE_MESSAGE
    GENERIC_READ = (
        GET_PROPERTIES | GET_PERMISSIONS | RECEIVE_DEADLETTER_MESSAGE | RECEIVE_JOURNAL_QUEUE_MESSAGE
    )
    GENERIC_WRITE = GET_PROPERTIES | GET_PERMISSIONS | CREATE_QUEUE
    GENERIC_ALL = (
        GENERIC_READ
        | GENERIC_WRITE
        | SET_PROPERTIES
        | CHANGE_PERMISSIONS
        | MANAGE_TRIGGERS
        | MANAGE_OUTGOING
        | READ_METRICS
        | READ_AUDIT
        | TRANSACT
    )


QUEUE_MANAGER = None
"""The scope of a queue-manager grant (a queue grant's scope is a path pattern)."""


@dataclass(frozen=True, slots=True)
class Grant:
    principal: str
    queue: str | None
    """A queue path pattern (`private$/orders`, `private$/app-*`, `*`), or QUEUE_MANAGER."""
    rights: int
    exact: bool = False
    """On exactly the queue named `queue` (its `*` is no wildcard): a queue's own grant."""

    def covers(self, path: str) -> bool:
        """Whether this queue grant reaches the queue at `path` (a URL path)."""
        if self.queue is None:
            return False
        if self.exact:
            return names_exactly(self.queue, True, path)
        return matches(self.queue, path)


@dataclass(frozen=True, slots=True)
class Requirement:
    """What one operation on one target needs: a right on a queue, or on the queue manager."""

    rights: int
    queue: str | None
    """The queue's URL path (`private$/orders`), or QUEUE_MANAGER."""

    def describe(self) -> str:
        if self.queue is None:
            return f"{_names(QueueManagerRight(self.rights))} on the queue manager"
        return f"{_names(QueueRight(self.rights))} on {self.queue!r}"


def _names(flag: enum.IntFlag) -> str:
    return flag.name or hex(flag.value)


def on_queue_manager(right: QueueManagerRight) -> Requirement:
    return Requirement(int(right), QUEUE_MANAGER)


def on_queue(right: QueueRight, path: QueuePath) -> Requirement:
    """The right an operation on `path` needs. A journal queue is read with its queue's journal
    rights; the queue manager's own queues (dead-letter, computer journal) with its rights,
    as MSMQ does. A right that makes no sense there (write, set properties) stays a queue right
    on the path itself, which no pattern but an exact grant or `*` reaches."""
    if path.kind is QueueKind.SYSTEM:
        system = _SYSTEM_RIGHTS.get((path.name, right))
        if system is not None:
            return on_queue_manager(system)
    elif path.journal:
        journal = _JOURNAL_RIGHTS.get(right)
        if journal is not None:
            return Requirement(int(journal), path.base.url_path)
    return Requirement(int(right), path.url_path)


_JOURNAL_RIGHTS = {
    QueueRight.PEEK_MESSAGE: QueueRight.PEEK_MESSAGE,
    QueueRight.DELETE_MESSAGE: QueueRight.DELETE_JOURNAL_MESSAGE,
    QueueRight.RECEIVE_MESSAGE: QueueRight.RECEIVE_JOURNAL_MESSAGE,
}
_DEAD = (SystemQueue.DEADLETTER.value, SystemQueue.DEADXACT.value)
_SYSTEM_RIGHTS: dict[tuple[str, QueueRight], QueueManagerRight] = {
    **{(name, QueueRight.PEEK_MESSAGE): QueueManagerRight.PEEK_DEADLETTER_MESSAGE for name in _DEAD},
    **{(name, QueueRight.DELETE_MESSAGE): QueueManagerRight.DELETE_DEADLETTER_MESSAGE for name in _DEAD},
    **{(name, QueueRight.RECEIVE_MESSAGE): QueueManagerRight.RECEIVE_DEADLETTER_MESSAGE for name in _DEAD},
    **{(name, QueueRight.GET_PROPERTIES): QueueManagerRight.GET_PROPERTIES for name in _DEAD},
    (SystemQueue.JOURNAL.value, QueueRight.PEEK_MESSAGE): QueueManagerRight.PEEK_JOURNAL_QUEUE_MESSAGE,
    (SystemQueue.JOURNAL.value, QueueRight.DELETE_MESSAGE): QueueManagerRight.DELETE_JOURNAL_QUEUE_MESSAGE,
    (SystemQueue.JOURNAL.value, QueueRight.RECEIVE_MESSAGE): QueueManagerRight.RECEIVE_JOURNAL_QUEUE_MESSAGE,
    (SystemQueue.JOURNAL.value, QueueRight.GET_PROPERTIES): QueueManagerRight.GET_PROPERTIES,
}


def fold(path: str) -> str:
    """Queue paths compare as Windows compares queue names: ASCII letters fold, nothing else
    (so the Kelvin sign is not `k`); either separator."""
    return path.replace("\\", "/").translate(_ASCII_LOWER)


_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def names_exactly(scope: str, exact: bool, path: str) -> bool:
    """Whether a grant on `scope` is on exactly the queue at `path` (one of its own grants):
    an exact grant, or a scope without `*`, that names it as paths compare."""
    return (exact or "*" not in scope) and fold(scope) == fold(path)


def matches(pattern: str, path: str) -> bool:
    """`*` stands for any run of characters (`/` included); every other character is itself.
    Linear in the lengths: no regular expression is built from a stored pattern."""
    pieces = fold(pattern).split("*")
    text = fold(path)
    if len(pieces) == 1:
        return text == pieces[0]
    first, *middle, last = pieces
    if not text.startswith(first) or not text.endswith(last) or len(text) < len(first) + len(last):
        return False
    position, end = len(first), len(text) - len(last)
    for piece in middle:
        found = text.find(piece, position, end)
        if found < 0:
            return False
        position = found + len(piece)
    return True


def granted(grants: Iterable[Grant], requirement: Requirement) -> int:
    """The rights the grants give on the requirement's scope (their union)."""
    rights = 0
    for grant in grants:
        if requirement.queue is None:
            if grant.queue is None:
                rights |= grant.rights
        elif grant.covers(requirement.queue):
            rights |= grant.rights
    return rights


def allows(grants: Iterable[Grant], requirement: Requirement) -> bool:
    """Every bit the requirement names must be granted (receive is delete and peek)."""
    return granted(grants, requirement) & requirement.rights == requirement.rights


def require(principal: str, grants: Iterable[Grant], requirement: Requirement) -> None:
    """MQ_ERROR_ACCESS_DENIED unless the grants allow it; raised before anything changes."""
    if not allows(grants, requirement):
        raise MqError(
            MqErrorCode.MQ_ERROR_ACCESS_DENIED,
            f"{principal!r} lacks {requirement.describe()}",
        )


def owner_grant(principal: str, path: QueuePath) -> Grant:
    """What creating a queue gives its creator: everything on exactly that queue (a queue named
    `private$/*` is one queue, not every private queue)."""
    return Grant(principal, path.url_path, int(QueueRight.GENERIC_ALL), exact=True)


ADMINISTRATOR_GRANTS = (
    (QUEUE_MANAGER, int(QueueManagerRight.GENERIC_ALL)),
    ("*", int(QueueRight.GENERIC_ALL)),
)
"""What `grant --admin` gives: every right on the queue manager and on every queue."""


def parse_rights(text: str, scope: str | None) -> int:
    """`RECEIVE_MESSAGE,WRITE_MESSAGE` (names of the scope's rights, any case) -> the mask."""
    kind: type[enum.IntFlag] = QueueManagerRight if scope is None else QueueRight
    mask = 0
    for name in filter(None, (part.strip().upper() for part in text.split(","))):
        try:
            mask |= kind[name].value
        except KeyError:
            known = ", ".join(member.name or "" for member in kind.__members__.values())
            raise MqError(
                MqErrorCode.MQ_ERROR_INVALID_PARAMETER,
                f"{name!r} is not a {'queue-manager' if scope is None else 'queue'} right; known: {known}",
            ) from None
    if not mask:
        raise MqError(MqErrorCode.MQ_ERROR_INVALID_PARAMETER, "name at least one right")
    return mask


_Flag = TypeVar("_Flag", QueueRight, QueueManagerRight)


def rights_held(grants: Iterable[Grant], path: QueuePath | None, implicit: int = 0) -> list[str]:
    """The single rights the grants give on a queue (None: on the queue manager), by name: for
    each, whether an operation needing it there would be allowed, as `allows` decides.
    `implicit`: queue rights held without a grant (an owner's, qm.queue_security)."""
    if path is None:
        return [
            right.name or ""
            for right in _single(QueueManagerRight)
            if allows(grants, on_queue_manager(right))
        ]
    return [
        right.name or ""
        for right in _single(QueueRight)
        if (right & implicit) == right or allows(grants, on_queue(right, path))
    ]


def every_right(path: QueuePath | None) -> list[str]:
    """What the anonymous administrator holds: every single right."""
    if path is None:
        return [right.name or "" for right in _single(QueueManagerRight)]
    return [right.name or "" for right in _single(QueueRight)]


def _single(kind: type[_Flag]) -> list[_Flag]:
    return [member for member in kind.__members__.values() if member.value.bit_count() == 1]


def rights_names(rights: int, scope: str | None) -> list[str]:
    """The single rights a mask holds, by name (composites are spelled out)."""
    singles: Sequence[enum.IntFlag] = _single(QueueManagerRight) if scope is None else _single(QueueRight)
    return [member.name or "" for member in singles if rights & member.value]
