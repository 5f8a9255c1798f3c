"""Pure queue-manager rules: lookup IDs (§5.9), quotas (§7.3), property limits, timers."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qm import rules
from qm.errors import MqError, MqErrorCode
from qm.model import INFINITE, MessageProperties
from qm.store import EnqueueOutcome

priorities = st.integers(min_value=0, max_value=7)
counters = st.integers(min_value=0, max_value=rules.COUNTER_MASK)
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_lookup_id_of_the_reference_example() -> None:
    """First message, priority 3 -> 0x0400000000000001 (reference §5.9)."""
    assert rules.lookup_id_for(3, 1) == 0x0400000000000001 == 288230376151711745


def test_lookup_id_layout_extremes() -> None:
    assert rules.lookup_id_for(7, 1) == 1
    assert rules.lookup_id_for(0, 1) == 0x0700000000000001
    assert rules.lookup_id_for(0, rules.COUNTER_MASK) < 2**63
    assert rules.lookup_id_for(3, rules.COUNTER_MASK + 5) == rules.lookup_id_for(3, 4)


@given(priorities, counters)
def test_lookup_id_round_trip(priority: int, counter: int) -> None:
    lookup_id = rules.lookup_id_for(priority, counter)
    assert rules.priority_of(lookup_id) == priority
    assert rules.counter_of(lookup_id) == counter
    assert 0 <= lookup_id < 2**63  # fits a signed BIGINT column


@given(priorities, counters, priorities, counters)
def test_lookup_id_order_is_queue_order(p1: int, c1: int, p2: int, c2: int) -> None:
    """Numeric order = priority descending, then arrival (counter) ascending."""
    by_lookup = rules.lookup_id_for(p1, c1) < rules.lookup_id_for(p2, c2)
    by_queue_order = (-p1, c1) < (-p2, c2)
    assert by_lookup == by_queue_order


def test_message_id_form() -> None:
    guid = uuid.UUID("5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93")
    assert rules.message_id_for(guid, 7001) == "{5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93}\\7001"
    assert rules.message_id_for(guid, 2**32 + 5).endswith("\\5")


def test_stored_size_counts_body_and_extension() -> None:
    assert rules.stored_size(MessageProperties(body=b"12345", extension=b"abc")) == 8


@pytest.mark.parametrize(
    ("size", "queue_bytes", "queue_kb", "total", "machine_kb", "throttled", "expected"),
    [
        (1, 0, INFINITE, 0, INFINITE, False, EnqueueOutcome.ACCEPTED),
        (1024, 0, 1, 0, INFINITE, False, EnqueueOutcome.ACCEPTED),
        (1025, 0, 1, 0, INFINITE, False, EnqueueOutcome.QUEUE_QUOTA_EXCEEDED),
        (1, 1024, 1, 1024, INFINITE, False, EnqueueOutcome.QUEUE_QUOTA_EXCEEDED),
        (0, 0, 0, 0, INFINITE, False, EnqueueOutcome.ACCEPTED),
        (1, 0, 0, 0, INFINITE, False, EnqueueOutcome.QUEUE_QUOTA_EXCEEDED),
        (1, 0, INFINITE, 2048, 2, False, EnqueueOutcome.QUEUE_MANAGER_QUOTA_EXCEEDED),
        (1, 0, INFINITE, 0, INFINITE, True, EnqueueOutcome.QUEUE_MANAGER_QUOTA_EXCEEDED),
        # the machine's limit is checked first
        (5000, 0, 1, 0, 1, False, EnqueueOutcome.QUEUE_MANAGER_QUOTA_EXCEEDED),
    ],
)
def test_admit(
    size: int,
    queue_bytes: int,
    queue_kb: int,
    total: int,
    machine_kb: int,
    throttled: bool,
    expected: EnqueueOutcome,
) -> None:
    assert rules.admit(size, queue_bytes, queue_kb, total, machine_kb, throttled) is expected


def test_infinite_quota_is_never_exceeded() -> None:
    assert not rules.exceeds(2**62, INFINITE)
    assert rules.exceeds(1025, 1)
    assert not rules.exceeds(1024, 1)


@pytest.mark.parametrize(
    ("properties", "code"),
    [
        (MessageProperties(priority=8), MqErrorCode.MQ_ERROR_ILLEGAL_PROPERTY_VALUE),
        (MessageProperties(priority=-1), MqErrorCode.MQ_ERROR_ILLEGAL_PROPERTY_VALUE),
        (MessageProperties(label="x" * 250), MqErrorCode.MQ_ERROR_LABEL_TOO_LONG),
        (MessageProperties(correlation_id=b"x" * 19), MqErrorCode.MQ_ERROR_ILLEGAL_PROPERTY_SIZE),
        (MessageProperties(correlation_id=b"x" * 21), MqErrorCode.MQ_ERROR_ILLEGAL_PROPERTY_SIZE),
        (MessageProperties(correlation_id=b""), MqErrorCode.MQ_ERROR_ILLEGAL_PROPERTY_SIZE),
        (MessageProperties(body=b"x" * 101), MqErrorCode.MQ_ERROR_INSUFFICIENT_RESOURCES),
        (MessageProperties(body_type=0x10000), MqErrorCode.MQ_ERROR_ILLEGAL_PROPERTY_VALUE),
        (MessageProperties(message_class=-1), MqErrorCode.MQ_ERROR_ILLEGAL_PROPERTY_VALUE),
        (MessageProperties(app_specific=2**32), MqErrorCode.MQ_ERROR_ILLEGAL_PROPERTY_VALUE),
        (MessageProperties(acknowledge=0x10), MqErrorCode.MQ_ERROR_ILLEGAL_PROPERTY_VALUE),
        (MessageProperties(journal=4), MqErrorCode.MQ_ERROR_ILLEGAL_PROPERTY_VALUE),
        (MessageProperties(time_to_be_received=-1), MqErrorCode.MQ_ERROR_ILLEGAL_PROPERTY_VALUE),
        (MessageProperties(time_to_reach_queue=INFINITE + 1), MqErrorCode.MQ_ERROR_ILLEGAL_PROPERTY_VALUE),
    ],
)
def test_invalid_properties(properties: MessageProperties, code: MqErrorCode) -> None:
    with pytest.raises(MqError) as caught:
        rules.validate_properties(properties, max_body_bytes=100)
    assert caught.value.code is code


def test_properties_at_their_limits_are_valid() -> None:
    rules.validate_properties(
        MessageProperties(
            body=b"x" * 100,
            label="x" * 249,
            priority=7,
            correlation_id=b"c" * 20,
            body_type=0xFFFF,
            app_specific=2**32 - 1,
            acknowledge=0x0F,
            journal=3,
            time_to_be_received=0,
        ),
        max_body_bytes=100,
    )
    rules.validate_properties(MessageProperties(priority=0), max_body_bytes=100)


def test_deadlines() -> None:
    assert rules.deadline(NOW, INFINITE) is None
    assert rules.deadline(NOW, 30) == NOW + timedelta(seconds=30)
    assert rules.deadline(NOW, 0) == NOW


def test_remaining_seconds() -> None:
    deadline = NOW + timedelta(seconds=60)
    assert rules.remaining_seconds(None, NOW) == INFINITE
    assert rules.remaining_seconds(deadline, NOW) == 60
    assert rules.remaining_seconds(deadline, NOW + timedelta(seconds=20.5)) == 40  # rounded up
    assert rules.remaining_seconds(deadline, NOW + timedelta(seconds=59.999)) == 1
    assert rules.remaining_seconds(deadline, deadline) == 0
    assert rules.remaining_seconds(deadline, NOW + timedelta(seconds=90)) == 0


def test_expiry_is_at_the_deadline() -> None:
    deadline = NOW + timedelta(seconds=1)
    assert not rules.is_expired(None, NOW)
    assert not rules.is_expired(deadline, NOW)
    assert rules.is_expired(deadline, deadline)
