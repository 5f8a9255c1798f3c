"""Times as the store keeps them: integer microseconds since the epoch, UTC."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def to_us(moment: datetime) -> int:
    delta = moment - EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_us(value: int) -> datetime:
    return EPOCH + timedelta(microseconds=value)


def now() -> datetime:
    return datetime.now(UTC)


def now_us() -> int:
    return to_us(now())


def iso(value: int) -> str:
    return from_us(value).isoformat().replace("+00:00", "Z")


def parse_moment(text: str) -> datetime:
    """An ISO date or date-time; naive means UTC."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{text!r} is not an ISO date or date-time (e.g. 2026-11-01T00:00:00Z)") from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def midnight_days_ago(days: int) -> datetime:
    today = now().replace(hour=0, minute=0, second=0, microsecond=0)
    return today - timedelta(days=days)
