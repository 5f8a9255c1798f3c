"""Format names (reference §8.2): parse them, and resolve the ones that name a local queue.

Applications give format names for response and admin queues, and dead-letter queues are
known by them (`MACHINE={guid};DEADLETTER`). The gateway is the only queue manager it can
reach directly, so resolution answers: a local queue path, a remote HTTP(S) URL, or neither.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from qm.errors import MqError, MqErrorCode
from qm.paths import QueuePath, SystemQueue, parse_queue_path, system_queue_path

_DEFAULT_VIRTUAL_DIRECTORY = "msmq"
_MACHINE_SUFFIXES = {
    "journal": SystemQueue.JOURNAL,
    "deadletter": SystemQueue.DEADLETTER,
    "deadxact": SystemQueue.DEADXACT,
}


class FormatKind(enum.Enum):
    DIRECT_OS = "direct-os"
    DIRECT_TCP = "direct-tcp"
    DIRECT_HTTP = "direct-http"
    PRIVATE = "private"
    PUBLIC = "public"
    MACHINE = "machine"


@dataclass(frozen=True, slots=True)
class FormatName:
    kind: FormatKind
    text: str
    host: str = ""
    """Computer name, IP address or HTTP host (without port); empty where none."""
    path: QueuePath | None = None
    """The queue part, where the format name carries one."""
    machine: uuid.UUID | None = None
    private_id: int | None = None
    url: str | None = None

    @property
    def send_only(self) -> bool:
        """HTTP format names are for sending only (reference §8.3)."""
        return self.kind is FormatKind.DIRECT_HTTP


def parse_format_name(text: str) -> FormatName:
    """Parse one format name; `FormatName:` and `MSMQ:` prefixes are accepted and dropped."""
    original = text
    stripped = _strip_prefixes(text.strip())
    keyword, separator, rest = stripped.partition("=")
    if not separator:
        raise _illegal(original, "a format name has the form KIND=...")
    parser = _PARSERS.get(keyword.strip().casefold())
    if parser is None:
        raise _illegal(original, f"unsupported format name kind {keyword!r}")
    return parser(original, rest.strip())


def _strip_prefixes(text: str) -> str:
    for prefix in ("formatname:", "msmq:"):
        if text.casefold().startswith(prefix):
            text = text[len(prefix) :]
    return text


def _parse_direct(original: str, rest: str) -> FormatName:
    protocol, separator, address = rest.partition(":")
    protocol = protocol.casefold()
    if protocol in ("http", "https") and separator:
        return _parse_http(original, rest)
    if protocol in ("os", "tcp") and separator:
        host, slash, queue_part = address.partition("\\")
        if not host or not slash:
            raise _illegal(original, "DIRECT=OS: and DIRECT=TCP: need computer\\queue")
        kind = FormatKind.DIRECT_OS if protocol == "os" else FormatKind.DIRECT_TCP
        return FormatName(kind, original, host=host, path=_queue_part(original, queue_part))
    raise _illegal(original, "DIRECT= takes OS:, TCP:, HTTP:// or HTTPS://")


def _parse_http(original: str, url: str) -> FormatName:
    parts = urlsplit(url.replace("\\", "/"))
    if not parts.hostname:
        raise _illegal(original, "an HTTP format name needs a host")
    segments = [unquote(segment) for segment in parts.path.split("/") if segment]
    if len(segments) < 2:
        raise _illegal(original, "an HTTP format name is http://host/msmq/[private$/]queue")
    path = parse_queue_path("/".join(segments[1:]))
    return FormatName(FormatKind.DIRECT_HTTP, original, host=parts.hostname, path=path, url=url)


def _queue_part(original: str, queue_part: str) -> QueuePath:
    lowered = queue_part.casefold()
    if lowered.startswith("system$;"):
        return _system_path(original, lowered[len("system$;") :])
    return parse_queue_path(queue_part)


def _system_path(original: str, suffix: str) -> QueuePath:
    queue = _MACHINE_SUFFIXES.get(suffix)
    if queue is None:
        raise _illegal(original, f"unknown system queue {suffix!r}")
    return system_queue_path(queue)


def _parse_machine(original: str, rest: str) -> FormatName:
    guid_text, separator, suffix = rest.partition(";")
    if not separator:
        raise _illegal(original, "MACHINE= needs ;JOURNAL, ;DEADLETTER or ;DEADXACT")
    return FormatName(
        FormatKind.MACHINE,
        original,
        machine=_guid(original, guid_text),
        path=_system_path(original, suffix.casefold()),
    )


def _parse_private(original: str, rest: str) -> FormatName:
    guid_text, separator, identifier = rest.partition("\\")
    identifier = identifier.split(";", 1)[0]
    try:
        private_id = int(identifier, 16)
    except ValueError:
        raise _illegal(original, "PRIVATE= needs qm-guid\\hex-id") from None
    if not separator:
        raise _illegal(original, "PRIVATE= needs qm-guid\\hex-id")
    return FormatName(FormatKind.PRIVATE, original, machine=_guid(original, guid_text), private_id=private_id)


def _parse_public(original: str, rest: str) -> FormatName:
    return FormatName(FormatKind.PUBLIC, original, machine=_guid(original, rest.split(";", 1)[0]))


def _guid(original: str, text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text.strip().strip("{}"))
    except ValueError:
        raise _illegal(original, f"{text!r} is not a GUID") from None


def _illegal(original: str, reason: str) -> MqError:
    return MqError(MqErrorCode.MQ_ERROR_ILLEGAL_FORMATNAME, f"{original!r}: {reason}")


_PARSERS = {
    "direct": _parse_direct,
    "machine": _parse_machine,
    "private": _parse_private,
    "public": _parse_public,
}


@dataclass(frozen=True, slots=True)
class LocalIdentity:
    """What makes a format name local: this queue manager's GUID and its host names."""

    guid: uuid.UUID
    host_names: frozenset[str]
    """Lower-case names and addresses of this gateway; '.' always counts."""
    virtual_directory: str = _DEFAULT_VIRTUAL_DIRECTORY

    def is_local_host(self, host: str) -> bool:
        return host == "." or host.casefold() in self.host_names


def local_queue_path(name: FormatName, identity: LocalIdentity) -> QueuePath | None:
    """The local queue a format name designates, or None when it is remote (or unknown)."""
    if name.kind is FormatKind.MACHINE:
        return name.path if name.machine == identity.guid else None
    if name.kind in (FormatKind.DIRECT_OS, FormatKind.DIRECT_TCP, FormatKind.DIRECT_HTTP):
        return name.path if identity.is_local_host(name.host) else None
    return None
