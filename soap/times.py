"""SRMP time strings and the timer mapping (reference §3).

On the wire a time is `YYYYMMDDThhmmss` in UTC. `20380119T031407` (2^31 - 1 seconds) or anything
later means INFINITE. Which of `<expiresAt>` and `<Msmq><TTrq>` carries the time-to-be-received
(TTBR) deadline and which the time-to-reach-queue (TTRQ) one is set by `srmp_timer_mapping`;
a message whose deadlines contradict the mapping is handled by `srmp_timer_layout_mismatch`.
"""

from __future__ import annotations

import calendar
import enum
import functools
import re
from dataclasses import dataclass
from datetime import UTC, datetime

from qm.model import INFINITE
from soap.errors import bad_request
from soap.namespaces import WHITESPACE

INFINITE_WIRE = 0x7FFFFFFF
"""Seconds since 1970 of the INFINITE sentinel, the largest signed 32-bit time."""
INFINITE_SENTINEL = "20380119T031407"
DEFAULT_TTRQ_S = 4 * 24 * 3600
"""Default time-to-reach-queue of current Windows (reference §3.2)."""

_TIME = re.compile(r"(\d{8})T(\d{2})(?:(\d{2})(\d{2})?)?", re.ASCII)
_DURATION = re.compile(
    r"P(?:(\d{1,4})Y)?(?:(\d{1,4})M)?(?:(\d{1,5})D)?(?:T(?:(\d{1,6})H)?(?:(\d{1,8})M)?(?:(\d{1,10})S)?)?",
    re.ASCII,
)
_YEAR_10000 = 253402300800
_DURATION_UNITS = (365 * 86400, 30 * 86400, 86400, 3600, 60, 1)


class TimerMapping(enum.StrEnum):
    """Setting `srmp_timer_mapping`: which wire field carries the TTBR deadline."""

    SDK = "sdk"
    """`<Msmq><TTrq>` = TTBR deadline, `<expiresAt>` = TTRQ deadline (the default)."""
    WIRE_EXAMPLE = "wire-example"
    """`<expiresAt>` = TTBR deadline, `<Msmq><TTrq>` = TTRQ deadline."""


class LayoutMismatch(enum.StrEnum):
    """Setting `srmp_timer_layout_mismatch`: what to do when the mapped TTRQ ends after the TTBR."""

    SWAP = "swap"
    """Take the later deadline as the TTBR, the earlier as the TTRQ (the default)."""
    CLAMP = "clamp"
    """Keep the mapping and lower the TTRQ deadline to the TTBR deadline."""


class TimerSource(enum.StrEnum):
    """The wire field a deadline was read from, spelled as the vectors spell it."""

    EXPIRES_AT = "expiresAt"
    TTRQ = "Msmq/TTrq"


@dataclass(frozen=True, slots=True)
class TimerSettings:
    mapping: TimerMapping = TimerMapping.SDK
    on_mismatch: LayoutMismatch = LayoutMismatch.SWAP


@dataclass(frozen=True, slots=True)
class SrmpTime:
    """A wire time: the text as received and its seconds since 1970 (UTC)."""

    text: str
    epoch: int

    @classmethod
    def parse(cls, text: str) -> SrmpTime:
        return _parse_time(text.strip(WHITESPACE))

    @classmethod
    def from_epoch(cls, epoch: int) -> SrmpTime:
        """The canonical form of a time; anything from the sentinel on becomes the sentinel."""
        clamped = max(0, min(epoch, INFINITE_WIRE))
        return cls(epoch_to_srmp(clamped), clamped)

    @classmethod
    def from_datetime(cls, moment: datetime) -> SrmpTime:
        return cls.from_epoch(epoch_of(moment))

    @property
    def infinite(self) -> bool:
        return self.epoch >= INFINITE_WIRE

    @property
    def utc(self) -> datetime:
        return datetime.fromtimestamp(self.epoch, UTC)


@functools.lru_cache(maxsize=256)
def _parse_time(text: str) -> SrmpTime:
    """Remembered: the times of a message repeat in it (TTrq and expiresAt often match) and in
    the messages sent in the same second. A refused time raises and is not kept, so every key
    is a valid time of at most 15 characters."""
    return SrmpTime(text, srmp_to_epoch(text))


def srmp_to_epoch(text: str) -> int:
    """Parse `YYYYMMDDThhmmss` (also `Thh` and `Thhmm`, and hour 24 as the next day's 00:00)."""
    match = _TIME.fullmatch(text)
    if match is None:
        raise bad_request(f"{text[:40]!r} is not an SRMP time (YYYYMMDDThhmmss)")
    date, hour_text, minute_text, second_text = match.groups()
    midnight = _midnight(date)
    if midnight is None:
        raise bad_request(f"{text!r} is not a valid date after 1970")
    hour, minute, second = int(hour_text), int(minute_text or 0), int(second_text or 0)
    if hour > 24 or minute > 59 or second > 59 or (hour == 24 and (minute or second)):
        raise bad_request(f"{text!r} is not a valid time of day")
    epoch = midnight + hour * 3600 + minute * 60 + second
    if epoch >= _YEAR_10000:
        raise bad_request(f"{text!r} is after the year 9999")
    return epoch


@functools.lru_cache(maxsize=64)
def _midnight(date: str) -> int | None:
    """Seconds since 1970 at 00:00 UTC of `YYYYMMDD` (8 ASCII digits), None for no such day.

    Remembered: the times of a message, and of the messages around it, fall on the same days.
    """
    year, month, day = int(date[:4]), int(date[4:6]), int(date[6:])
    if year < 1970 or not 1 <= month <= 12 or not 1 <= day <= calendar.monthrange(year, month)[1]:
        return None
    return calendar.timegm((year, month, day, 0, 0, 0, 0, 0, 0))


def epoch_to_srmp(epoch: int) -> str:
    moment = datetime.fromtimestamp(max(0, min(epoch, INFINITE_WIRE)), UTC)
    return moment.strftime("%Y%m%dT%H%M%S")


def epoch_of(moment: datetime) -> int:
    if moment.tzinfo is None:
        raise ValueError("SRMP times are UTC: pass an aware datetime")
    return int(moment.timestamp())


def parse_duration(text: str) -> int:
    """An ISO 8601 duration `PnYnMnDTnHnMnS` in seconds (the [CE] `<duration>`).

    Years count 365 days and months 30 days; fractions are not accepted.
    """
    stripped = text.strip(WHITESPACE)
    match = _DURATION.fullmatch(stripped)
    if match is None or stripped in ("P", "PT") or stripped.endswith("T"):
        raise bad_request(f"{stripped[:40]!r} is not an ISO 8601 duration")
    return sum(int(value or 0) * unit for value, unit in zip(match.groups(), _DURATION_UNITS, strict=True))


@dataclass(frozen=True, slots=True)
class Timers:
    """The two timers of a received message after mapping and mismatch handling (reference §3.3).

    Deadlines are the sender's absolute times (None = INFINITE); the lifetimes are relative to
    `sentAt` and are what the gateway applies from its own arrival time (skew-proof).
    """

    settings: TimerSettings
    ttbr_source: TimerSource
    ttrq_source: TimerSource
    ttbr_deadline: datetime | None
    ttrq_deadline: datetime | None
    time_to_be_received: int
    """Seconds, or qm.model.INFINITE (0xFFFFFFFF)."""
    time_to_reach_queue: int
    layout_mismatch: bool
    fields_swapped: bool
    ttrq_clamped_to_ttbr: bool


def resolve_timers(sent: int, expires_at: int, ttrq: int | None, settings: TimerSettings) -> Timers:
    """Map `expiresAt` and `TTrq` (None without `<Msmq>`) to TTBR and TTRQ, per reference §3.3."""
    expires = (expires_at, TimerSource.EXPIRES_AT)
    if ttrq is None:
        ttbr_field = ttrq_field = expires
    elif settings.mapping is TimerMapping.SDK:
        ttbr_field, ttrq_field = (ttrq, TimerSource.TTRQ), expires
    else:
        ttbr_field, ttrq_field = expires, (ttrq, TimerSource.TTRQ)
    mismatch = _later(ttrq_field[0], ttbr_field[0])
    swapped = mismatch and settings.on_mismatch is LayoutMismatch.SWAP
    clamped = mismatch and not swapped
    if swapped:
        ttbr_field, ttrq_field = ttrq_field, ttbr_field
    ttbr_at = ttbr_field[0]
    ttrq_at = ttbr_at if clamped else ttrq_field[0]
    return Timers(
        settings=settings,
        ttbr_source=ttbr_field[1],
        ttrq_source=ttrq_field[1],
        ttbr_deadline=_deadline(ttbr_at),
        ttrq_deadline=_deadline(ttrq_at),
        time_to_be_received=_lifetime(sent, ttbr_at),
        time_to_reach_queue=_lifetime(sent, ttrq_at),
        layout_mismatch=mismatch,
        fields_swapped=swapped,
        ttrq_clamped_to_ttbr=clamped,
    )


def _later(first: int, second: int) -> bool:
    """Whether `first` ends after `second`; INFINITE deadlines are equal to each other."""
    return min(first, INFINITE_WIRE) > min(second, INFINITE_WIRE)


def _deadline(epoch: int) -> datetime | None:
    return None if epoch >= INFINITE_WIRE else datetime.fromtimestamp(epoch, UTC)


def _lifetime(sent: int, deadline_epoch: int) -> int:
    return INFINITE if deadline_epoch >= INFINITE_WIRE else max(0, deadline_epoch - sent)


def outbound_timer_fields(
    sent: int, time_to_be_received: int, time_to_reach_queue: int, mapping: TimerMapping
) -> tuple[SrmpTime, SrmpTime]:
    """`(expiresAt, TTrq)` for a message the gateway sends (reference §3.3, Outbound).

    The TTRQ is first clamped to the TTBR so that the gateway keeps MSMQ's invariant.
    """
    ttrq_s = min(time_to_reach_queue, time_to_be_received)
    ttbr_at = _absolute(sent, time_to_be_received)
    ttrq_at = _absolute(sent, ttrq_s)
    if mapping is TimerMapping.SDK:
        return ttrq_at, ttbr_at
    return ttbr_at, ttrq_at


def _absolute(sent: int, seconds: int) -> SrmpTime:
    return SrmpTime.from_epoch(INFINITE_WIRE if seconds >= INFINITE else sent + seconds)
