"""The gateway as an SRMP sender: what the receiver's answer means (reference §2.2), outgoing
queues and their retry schedule."""

from __future__ import annotations

import enum
import functools
import ipaddress
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from http import HTTPStatus
from typing import Literal
from urllib.parse import urlsplit

from qm.model import Queue

_RETRIED_CLIENT_ERRORS = frozenset({HTTPStatus.REQUEST_TIMEOUT, HTTPStatus.TOO_MANY_REQUESTS})


class Verdict(enum.Enum):
    DELIVERED = "delivered"
    """2xx: the receiver has the message."""
    REFUSED = "refused"
    """400 and other permanent answers: undeliverable, never retried (dead letter at the source)."""
    RETRY = "retry"
    """5xx, 408, 429, a connection failure or a timeout: try again later."""


def verdict(status: int | None) -> Verdict:
    """`status` None means no answer at all (connection refused, reset, timed out)."""
    if status is None or status >= 500 or status in _RETRIED_CLIENT_ERRORS:
        return Verdict.RETRY
    if 200 <= status < 300:
        return Verdict.DELIVERED
    return Verdict.REFUSED  # 3xx included: redirects are not followed (the target was checked)


OutgoingState = Literal["connected", "idle", "waiting-to-connect", "paused"]


@dataclass(frozen=True, slots=True)
class OutgoingQueue:
    """The sender's side of one remote SRMP queue (what MSMQ shows under Outgoing Queues)."""

    queue: Queue
    url: str
    paused: bool
    attempts: int
    """Failed attempts since the last delivery: 0 while the destination answers."""
    next_attempt_at: datetime
    last_error: str | None
    last_attempt_at: datetime | None
    delivered_count: int
    owner: str | None = None
    """The gateway process sending this queue's messages now (its lease), None when none is."""
    lease_expires_at: datetime | None = None
    """When the owner's lease runs out unless renewed; after that any process may take over."""

    @property
    def state(self) -> OutgoingState:
        """`paused`, `waiting-to-connect` (failing, retrying later), `connected` or `idle`."""
        if self.paused:
            return "paused"
        if self.attempts:
            return "waiting-to-connect"
        return "connected" if self.queue.message_count else "idle"


def retry_delay(attempts: int, minimum_s: float, maximum_s: float) -> timedelta:
    """Exponential backoff after `attempts` failures in a row, from `minimum_s` up to `maximum_s`."""
    exponent = min(max(attempts, 1) - 1, 32)
    return timedelta(seconds=min(maximum_s, minimum_s * 2**exponent))


def lease_needs_renewal(held_until: datetime | None, now: datetime, lease_s: float) -> bool:
    """Renew the sending lease when less than two thirds of it is left (or none is held).

    A POST starts only with at least two thirds of a lease left, and the client bounds each POST
    by the send timeout, which settings keep at most half a lease: a POST always ends before
    the lease that covered its start runs out, so no other process sends from the queue meanwhile."""
    return held_until is None or held_until - now < timedelta(seconds=lease_s * 2 / 3)


@dataclass(frozen=True, slots=True)
class OutgoingStreamPosition:
    """Where a transactional message sits in the stream of its outgoing queue."""

    stream_id: str
    ordinal: int
    previous: int | None
    """The ordinal before this one when messages between were dropped at the source (a gap)."""


def new_stream_id(now: datetime) -> str:
    """`uid:<random GUID>\\<(seconds << 32) | 1>`: a new stream in the form of §5.8.

    Windows writes its queue-manager GUID where this writes a fresh random (version 4) one: a
    stream receipt settles the messages of the stream it names, so the ID is all that proves a
    receipt comes from the receiver, and the queue-manager GUID is no secret (every message ID
    we send carries it). Receivers key streams on the whole ID and never resolve the GUID."""
    return f"uid:{uuid.uuid4()}\\{(int(now.timestamp()) << 32) | 1}"


_DEFAULT_PORTS = {"http": 80, "https": 443}
ANY_PORT = -1


@dataclass(frozen=True, slots=True)
class AllowedDestination:
    """One entry of MSMQGW_SRMP_OUTBOUND_HOSTS: `host` (http or https on the scheme's default
    port), `host:port`, `host:*` (any port), each optionally prefixed by `http://` or
    `https://` (that scheme only); `[v6]:port` brackets an IPv6 address; `*` allows anything."""

    host: str
    port: int | None
    """None: the default port of the URL's scheme; ANY_PORT: any port."""
    scheme: str | None = None

    @classmethod
    def parse(cls, entry: str) -> AllowedDestination:
        text = entry.strip()
        scheme = None
        if "://" in text:
            scheme, text = text.split("://", 1)
            scheme = scheme.casefold()
            if scheme not in _DEFAULT_PORTS:
                raise ValueError(f"{entry!r}: only http:// and https:// destinations are allowed")
        host, port_text = _split_host_port(text, entry)
        if not host or any(c in host for c in "/?#@ "):
            raise ValueError(f"{entry!r} is not a host, host:port or scheme://host:port")
        if port_text is None:
            return cls(host.casefold(), None, scheme)
        if port_text == "*":
            return cls(host.casefold(), ANY_PORT, scheme)
        if not (port_text.isascii() and port_text.isdigit()) or not 0 < int(port_text) < 65536:
            raise ValueError(f"{entry!r}: the port must be 1-65535 or *")
        return cls(host.casefold(), int(port_text), scheme)

    def allows(self, scheme: str, host: str, port: int | None) -> bool:
        if self.host != "*" and host != self.host:
            return False
        if self.scheme is not None and scheme != self.scheme:
            return False
        actual = _DEFAULT_PORTS[scheme] if port is None else port
        wanted = _DEFAULT_PORTS[scheme] if self.port is None else self.port
        return self.port == ANY_PORT or actual == wanted


def _split_host_port(text: str, entry: str) -> tuple[str, str | None]:
    if text.startswith("["):
        host, bracket, rest = text[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            raise ValueError(f"{entry!r}: an IPv6 address is written [address] or [address]:port")
        return host, rest[1:] if rest else None
    if text.count(":") > 1:  # a bare IPv6 address
        return text, None
    host, colon, port = text.partition(":")
    return host, port if colon else None


def parse_allow_list(entries: Sequence[str]) -> tuple[AllowedDestination, ...]:
    """The allow-list; a malformed entry raises ValueError (the gateway refuses to start)."""
    return tuple(
        AllowedDestination("*", ANY_PORT) if entry.strip() == "*" else AllowedDestination.parse(entry)
        for entry in entries
        if entry.strip()
    )


def outbound_target(url: str, rewrites: Mapping[str, str], allowed_hosts: Sequence[str]) -> str | None:
    """Where an outbound POST to `url` really goes, or None when it is not allowed.

    Senders choose receipt and admin URLs, so following them blindly would let anyone make the
    gateway POST to internal services (SSRF). The rewrite map replaces a matching URL prefix
    (the sender's view of itself, e.g. `http://winbox/`, by a reachable address); then scheme,
    host and port must match an entry of the allow-list (AllowedDestination)."""
    target = url
    for prefix, replacement in rewrites.items():
        if target.casefold().startswith(prefix.casefold()):
            target = replacement + target[len(prefix) :]
            break
    parts = urlsplit(target)
    scheme = parts.scheme.casefold()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    try:
        port = parts.port
        allowed = parse_allow_list(allowed_hosts)
    except ValueError:
        return None
    host = parts.hostname.casefold()
    return target if any(entry.allows(scheme, host, port) for entry in allowed) else None


class OutgoingRefusal(enum.Enum):
    """Why an acknowledgment or final receipt for a remote queue was dropped where it was made:
    MSMQ gives these system messages no dead letter, acknowledgment or journal of their own
    (reference §7.14), so a destination they cannot reach loses them, counted."""

    NOT_ALLOWED = "not_allowed"
    """Its destination is not in MSMQGW_SRMP_OUTBOUND_HOSTS: no outgoing queue is made for it."""
    SOURCE_LIMIT = "source_limit"
    """Its outgoing queue would be one more than its anonymous sender's source may have made."""
    TOTAL_LIMIT = "total_limit"
    """Its outgoing queue would be one more than all anonymous senders together may have made."""


@dataclass(frozen=True, slots=True)
class OutgoingQueueLimits:
    """How many outgoing queues may exist that the messages of anonymous SRMP senders made (for
    their acknowledgments and final receipts): per source (`srmp_source`) and in all. Removing
    a queue (idle, or deleted by an operator) makes room again. None: no limit."""

    per_source: int | None = None
    total: int | None = None

    def refusal(self, made_for_source: int, made_for_all: int) -> OutgoingRefusal | None:
        """Whether one more may be made, given how many exist for the source and for all."""
        if self.per_source is not None and made_for_source >= self.per_source:
            return OutgoingRefusal.SOURCE_LIMIT
        if self.total is not None and made_for_all >= self.total:
            return OutgoingRefusal.TOTAL_LIMIT
        return None


IPV6_SOURCE_PREFIX = 64
"""An IPv6 source is counted by its /64: one site or subscriber usually holds a whole /64, so
counting single addresses would let one sender count as 2**64 senders."""


@functools.lru_cache(maxsize=1024)
def srmp_source(client_host: str) -> str:
    """The source an anonymous SRMP sender is counted as: its IPv4 address (an IPv4-mapped IPv6
    address counted as the IPv4 one), the /64 network of its IPv6 address, or the text it came
    with when it is no address (a Unix socket, a test client), cut to 64 characters.
    Remembered per address: every SRMP message asks, and senders come back."""
    try:
        address = ipaddress.ip_address(client_host.strip("[]").partition("%")[0])
    except ValueError:
        return client_host[:64]
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, IPV6_SOURCE_PREFIX), strict=False))
    return str(address)
