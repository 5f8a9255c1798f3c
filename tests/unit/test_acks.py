from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from qm.acks import acknowledgment, message_id_bytes, requested
from qm.model import INFINITE, Acknowledgment, Delivery, MessageClass, MessageProperties

ORIGINAL = MessageProperties(body=b"payload", label="order", priority=5, app_specific=7, body_type=8)
ORIGINAL_ID = "{5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93}\\7001"
GATEWAY = uuid.UUID("c4a19f02-7d3e-4b1a-8f55-2e9d6a0b7c31")
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def test_message_ids_become_msmqs_twenty_bytes() -> None:
    # Reference §5.8 worked example.
    assert message_id_bytes(ORIGINAL_ID) == bytes.fromhex("1a7e0c5b3d2f8e4c9a610d4f2b7c8e93591b0000")
    assert message_id_bytes("5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93\\-1") is not None
    assert message_id_bytes("not an id") is None


@pytest.mark.parametrize(
    ("flags", "message_class", "wanted"),
    [
        (Acknowledgment.POS_ARRIVAL, MessageClass.ACK_REACH_QUEUE, True),
        (Acknowledgment.NEG_ARRIVAL, MessageClass.ACK_REACH_QUEUE, False),
        (Acknowledgment.POS_RECEIVE, MessageClass.ACK_RECEIVE, True),
        (Acknowledgment.NEG_RECEIVE, MessageClass.NACK_RECEIVE_TIMEOUT, True),
        (Acknowledgment.NEG_ARRIVAL, MessageClass.NACK_RECEIVE_TIMEOUT, False),
        (Acknowledgment.NEG_ARRIVAL, MessageClass.NACK_Q_EXCEED_QUOTA, True),
        (Acknowledgment.NEG_RECEIVE, MessageClass.NACK_Q_EXCEED_QUOTA, False),
        (0x0E, MessageClass.NACK_Q_PURGED, True),  # MQMSG_ACKNOWLEDGMENT_FULL_RECEIVE
        (Acknowledgment.NONE, MessageClass.NACK_Q_DELETED, False),
    ],
)
def test_acknowledgments_follow_the_requested_levels(flags: int, message_class: int, wanted: bool) -> None:
    assert requested(flags, message_class) is wanted


def test_a_negative_acknowledgment_carries_the_original_body_and_identity() -> None:
    ack = acknowledgment(
        ORIGINAL, ORIGINAL_ID, MessageClass.NACK_RECEIVE_TIMEOUT, "DIRECT=OS:.\\q", GATEWAY, NOW
    )
    assert ack.message_class == MessageClass.NACK_RECEIVE_TIMEOUT
    assert ack.body == b"payload" and ack.label == "order" and ack.app_specific == 7
    assert ack.correlation_id == message_id_bytes(ORIGINAL_ID)
    assert ack.response_queue == "DIRECT=OS:.\\q"
    assert ack.priority == 5 and ack.delivery is Delivery.EXPRESS
    assert ack.time_to_be_received == INFINITE and ack.acknowledge == 0 and ack.admin_queue is None
    assert ack.source_machine == GATEWAY


def test_a_positive_acknowledgment_has_no_body_and_transactional_originals_give_priority_0() -> None:
    ack = acknowledgment(
        ORIGINAL, ORIGINAL_ID, MessageClass.ACK_RECEIVE, "q", GATEWAY, NOW, transactional=True
    )
    assert ack.body == b"" and ack.priority == 0
