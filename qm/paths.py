"""Queue path names (reference §8.1): parsing, validation and the canonical forms.

MSMQ writes `private$\\orders`; URLs carry `private$/orders`. Both separators and a
leading local-computer part (`.\\`) are accepted. Names compare case-insensitively in ASCII
only, as Windows compares queue names: Unicode case folding would make the Kelvin sign `K`
name the queue `k`, and `ß` the queue `ss`.
"""

from __future__ import annotations

import enum
import functools
import unicodedata
from dataclasses import dataclass

from qm.errors import MqError, MqErrorCode

MAX_QUEUE_NAME_LENGTH = 124
_FORBIDDEN_NAME_CHARACTERS = frozenset('\\/;+,"=*')
"""Reference §8.1's list, `=` and `*`. Wherever a queue is named, text with `=` is read as a
format name (`PRIVATE=…`, `DIRECT=…`, `DL=…`), so a queue whose name has one could never be
named. In a grant's path `*` stands for any characters, and a queue's creator owns it by a
grant on its path: creating `private$/s*` would give every private queue starting with `s`."""
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def ascii_fold(text: str) -> str:
    """Lower-case A-Z and nothing else: how queue names are compared."""
    return text.translate(_ASCII_LOWER)


_PRIVATE_PREFIX = "private$"
_SYSTEM_PREFIX = "system$"
_JOURNAL_SUFFIX = ";journal"


class QueueKind(enum.Enum):
    PUBLIC = "public"
    PRIVATE = "private"
    SYSTEM = "system"
    OUTGOING = "outgoing"
    """Messages waiting to be sent to a remote SRMP queue; the name is the queue's URL."""


class SystemQueue(enum.Enum):
    """The queue manager's own queues (reference §7.1), by their format-name suffix."""

    DEADLETTER = "deadletter"
    DEADXACT = "deadxact"
    JOURNAL = "journal"


@dataclass(frozen=True, slots=True)
class QueuePath:
    """A parsed queue path. `journal` selects the queue's journal queue (read-only)."""

    kind: QueueKind
    name: str
    journal: bool = False

    @property
    def key(self) -> str:
        """The case-insensitive identity used to find the queue in the store."""
        return ascii_fold(self.pathname)

    @property
    def pathname(self) -> str:
        """MSMQ's path-name form, without the computer part: `private$\\orders`."""
        return self._render("\\")

    @property
    def url_path(self) -> str:
        """The form used in this gateway's URLs: `private$/orders`."""
        return self._render("/")

    @property
    def base(self) -> QueuePath:
        """The queue a journal path belongs to (itself for any other path)."""
        return QueuePath(self.kind, self.name)

    @property
    def journal_path(self) -> QueuePath:
        """The journal queue of this queue."""
        return QueuePath(self.kind, self.name, journal=True)

    @property
    def writable(self) -> bool:
        """Applications may send only to public and private queues, never to journals."""
        return self.kind in (QueueKind.PUBLIC, QueueKind.PRIVATE) and not self.journal

    def _render(self, separator: str) -> str:
        if self.kind is QueueKind.OUTGOING:
            return f"DIRECT={self.name}"
        if self.kind is QueueKind.SYSTEM:
            return f"{_SYSTEM_PREFIX};{self.name}"
        suffix = _JOURNAL_SUFFIX if self.journal else ""
        if self.kind is QueueKind.PRIVATE:
            return f"{_PRIVATE_PREFIX}{separator}{self.name}{suffix}"
        return f"{self.name}{suffix}"


def system_queue_path(queue: SystemQueue) -> QueuePath:
    return QueuePath(QueueKind.SYSTEM, queue.value)


def outgoing_queue_path(url: str) -> QueuePath:
    """The outgoing queue of a remote SRMP queue, named by its URL (scheme and host lower case)."""
    scheme, _, rest = url.strip().replace("\\", "/").partition("://")
    host, slash, path = rest.partition("/")
    return QueuePath(QueueKind.OUTGOING, f"{scheme.upper()}://{host.casefold()}{slash}{path}")


@functools.lru_cache(maxsize=4096)
def parse_queue_path(text: str) -> QueuePath:
    """Parse `private$\\name`, `private$/name`, `name`, `system$;deadletter`, `...;journal`.

    Remembered per text (a QueuePath is immutable): every send and receive names its queue,
    and parsing and validating the name was about 1.5 % of the gateway's CPU under load.
    A name that is refused raises each time and is not remembered."""
    unified = text.strip().replace("\\", "/")
    if unified.startswith("./"):
        unified = unified[2:]
    lowered = ascii_fold(unified)
    if lowered.startswith(_SYSTEM_PREFIX + ";"):
        return _parse_system_queue(text, lowered[len(_SYSTEM_PREFIX) + 1 :])
    journal = lowered.endswith(_JOURNAL_SUFFIX)
    if journal:
        unified = unified[: -len(_JOURNAL_SUFFIX)]
    if ascii_fold(unified).startswith(_PRIVATE_PREFIX + "/"):
        name = unified[len(_PRIVATE_PREFIX) + 1 :]
        return QueuePath(QueueKind.PRIVATE, validate_queue_name(name, text), journal)
    return QueuePath(QueueKind.PUBLIC, validate_queue_name(unified, text), journal)


def _parse_system_queue(original: str, suffix: str) -> QueuePath:
    try:
        return system_queue_path(SystemQueue(suffix))
    except ValueError:
        raise _illegal(original, "unknown system queue; use deadletter, deadxact or journal") from None


def validate_queue_name(name: str, original: str) -> str:
    """Apply reference §8.1: 1-124 printable characters, none of `\\ / ; + , "` (nor `=`, `*`), no `..`."""
    if not name:
        raise _illegal(original, "the queue name is empty")
    if len(name) > MAX_QUEUE_NAME_LENGTH:
        raise _illegal(original, f"the queue name is longer than {MAX_QUEUE_NAME_LENGTH} characters")
    if ".." in name or ascii_fold(name) in (_PRIVATE_PREFIX, _SYSTEM_PREFIX):
        raise _illegal(original, "the queue name is reserved or contains '..'")
    for character in name:
        if character in _FORBIDDEN_NAME_CHARACTERS or not _printable(character):
            raise _illegal(original, f"the queue name contains the character {character!r}")
    return name


def _printable(character: str) -> bool:
    category = unicodedata.category(character)
    return not character.isspace() and category[0] not in ("C", "Z")


def _illegal(original: str, reason: str) -> MqError:
    return MqError(MqErrorCode.MQ_ERROR_ILLEGAL_QUEUE_PATHNAME, f"{original!r}: {reason}")
