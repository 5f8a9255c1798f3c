"""Transactional streams received over SRMP (reference §4): the acceptance rule, the timing of
stream receipts and their retries.

Pure rules; the store keeps each stream's state in the same commit as its messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

RECEIPT_DELAY = timedelta(milliseconds=500)
"""Reference §4.3: a receipt follows the last stored message of a burst after about 500 ms..."""
RECEIPT_MAX_DELAY = timedelta(seconds=10)
"""...and at the latest 10 s after the first message it does not yet acknowledge."""
RECEIPT_RETRY_BACKOFF = (
    timedelta(seconds=1),
    timedelta(seconds=5),
    timedelta(seconds=30),
    timedelta(minutes=5),
)
"""Failed receipt POSTs are retried on this schedule, its last step repeating. Losing one costs
little: the sender resends, the messages are discarded as duplicates, the next receipt covers them."""


@dataclass(frozen=True, slots=True)
class StreamPosition:
    """Where a stream message sits in its stream (SRMP `<Stream>`)."""

    stream_id: str
    current: int
    previous: int | None = None
    send_receipts_to: str | None = None
    """Present exactly when the message carries `<start>`."""
    destination: str = ""
    """The destination URL the sender wrote in `<to>`: the receipt's `rev/via`."""
    max_streams_per_sender: int | None = None
    """How many incoming streams `stream_sender` may have at once (None: no limit); set by the
    queue manager from its configuration."""
    max_streams: int | None = None
    """How many incoming streams all senders together may have (None: no limit): sender GUIDs
    cost nothing to make up."""


def stream_sender(stream_id: str) -> str:
    """Who opened a stream, for the per-sender limit: the stream ID up to its `\\`, scheme and
    sending queue manager's GUID (`uid:<guid>`), in lower case. Anonymous senders choose it, so
    it bounds what one well-behaved sender holds; idle stream state expiring bounds the rest."""
    return stream_id.partition("\\")[0].lower()


@dataclass(frozen=True, slots=True)
class StreamReceiptDue:
    """A stream whose accepted messages are not yet all acknowledged to its sender."""

    stream_id: str
    last_ordinal: int
    send_receipts_to: str
    destination: str
    attempts: int


def accepts(last_accepted: int | None, position: StreamPosition) -> bool:
    """Reference §4.2: accept a new stream's first message, the next ordinal, or a declared gap.

    `last_accepted` is None for a stream never seen. Anything else is a duplicate or arrived out
    of order; it is discarded (answered 200) and the sender resends in order."""
    if last_accepted is None:
        return position.send_receipts_to is not None and position.current == 1
    if position.current == last_accepted + 1:
        return True
    previous = position.previous
    return position.current > last_accepted and previous is not None and previous <= last_accepted


def receipt_due(first_unacknowledged: datetime | None, now: datetime) -> datetime:
    """When the receipt of a stream that just accepted a message should go: 500 ms after this
    message (each message restarts the timer), never later than 10 s after the first message
    still unacknowledged."""
    return min(now + RECEIPT_DELAY, (first_unacknowledged or now) + RECEIPT_MAX_DELAY)


def retry_delay(attempts: int) -> timedelta:
    """The wait before retry number `attempts` (1-based) of a failed receipt or delivery."""
    step = min(max(attempts, 1), len(RECEIPT_RETRY_BACKOFF)) - 1
    return RECEIPT_RETRY_BACKOFF[step]
