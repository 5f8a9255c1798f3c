"""The one exception of the codec: what the receiver answers, and why (reference §1.7, §2.1)."""

from __future__ import annotations

BAD_REQUEST = 400
METHOD_NOT_ALLOWED = 405
PAYLOAD_TOO_LARGE = 413


class SrmpError(Exception):
    """A request the receiver must refuse, with the HTTP status to answer and a reason to log.

    SRMP senders only read the status (reference §2.1): the reason is for the gateway's log.
    """

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"{status}: {reason}")
        self.status = status
        self.reason = reason


def bad_request(reason: str) -> SrmpError:
    return SrmpError(BAD_REQUEST, reason)


def too_large(reason: str) -> SrmpError:
    return SrmpError(PAYLOAD_TOO_LARGE, reason)
