"""Queue-manager limits and timeouts, filled from the service settings."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from qm.model import INFINITE

DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024


class TransactionTtbr(enum.StrEnum):
    """Which time-to-be-received the messages sent in one transaction get."""

    FIRST_MESSAGE = "first-message"
    """MSMQ's documented rule: every message gets the TTBR of the transaction's first."""
    PER_MESSAGE = "per-message"
    """Each message keeps its own TTBR (avoids the rule's premature expiries)."""


@dataclass(frozen=True, slots=True)
class ManagerConfig:
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    initial_quota_kb: int = INFINITE
    """Machine quota written the first time the store is opened; later changed over the API."""
    transaction_timeout_s: float = 60.0
    cursor_idle_timeout_s: float = 300.0
    default_lock_timeout_s: float = 30.0
    max_lock_timeout_s: float = 3600.0
    local_host_names: frozenset[str] = frozenset({"localhost", "127.0.0.1", "::1"})
    """Names and addresses that designate this gateway in format names (lower case)."""
    transaction_ttbr: TransactionTtbr = TransactionTtbr.FIRST_MESSAGE
    sweep_batch: int = 500
    max_streams_per_sender: int = 1000
    """Incoming SRMP streams one sender (the GUID of its stream IDs) may have at once."""
    max_streams: int = 100_000
    """Incoming SRMP streams all senders together may have at once."""
    stream_idle_s: float = 14 * 86400.0
    """Incoming stream state untouched this long, with nothing owed to its sender, is forgotten."""
    outgoing_idle_s: float = 86400.0
    """An empty outgoing queue with no attempt for this long is removed (made again on use)."""
    duplicate_window_s: float = 1800.0
    """How long received SRMP message IDs are remembered for duplicate elimination."""
    outbound_hosts: tuple[str, ...] = ()
    """Hosts the gateway may POST SRMP messages and receipts to (`*`: any); others are refused."""
    outbound_rewrites: tuple[tuple[str, str], ...] = ()
    """URL prefix -> replacement, applied to every outbound URL before the host check."""
    max_outgoing_queues_per_source: int | None = 20
    """Outgoing queues the acknowledgments and final receipts of one anonymous SRMP sender's
    messages (by source address, IPv6 by /64) may have made and that still exist."""
    max_outgoing_queues: int | None = 1000
    """The same for all anonymous SRMP senders together."""
    stream_resend_s: float = 30.0
    """A transactional message sent over SRMP is sent again when no stream receipt covered it
    within this time (MSMQ's first resend interval)."""
    receipts_url: str = "http://localhost/msmq/private$/order_queue$"
    """`sendReceiptsTo` of the streams this gateway sends: where receivers POST stream receipts."""
    retry_min_s: float = 1.0
    retry_max_s: float = 60.0
    """Outgoing queues retry a failing destination after 1, 2, 4 ... seconds, up to this."""
    outgoing_lease_s: float = 90.0
    """How long one process's claim on sending an outgoing queue lasts unless renewed; a queue
    whose owner stopped (crashed) is taken over by another process after this."""
