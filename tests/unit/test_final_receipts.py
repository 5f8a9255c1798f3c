"""Final receipts (reference §4.4): which removal earns which class, and what a returning
receipt means to the sender."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from qm.disposal import Departure, DisposalPolicy, PlacementKind, Reason, final_outcome
from qm.final_receipts import StreamOrigin, final_class
from qm.format_names import LocalIdentity
from qm.model import JournalFlags, Message, MessageProperties
from qm.paths import QueueKind, parse_queue_path
from qm.streams import StreamPosition

NOW = datetime(2026, 3, 1, tzinfo=UTC)
SENDER = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
POLICY = DisposalPolicy(LocalIdentity(uuid.UUID(int=7), frozenset({"localhost"})))
ORIGIN = StreamOrigin(
    "uid:0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0\\4294967297",
    "http://sender.example/msmq/private$/order_queue$",
    "http://localhost/msmq/private$/orders_tx",
    5,
)

# Reference §4.4's table, row by row (0x8001 is the administrator's delete).
TABLE = {
    Reason.RECEIVED: 0x4000,
    Reason.QUEUE_DELETED: 0xC000,
    Reason.PURGED: 0xC001,
    Reason.EXPIRED: 0xC002,
    Reason.DELETED_IN_TRANSIT: 0x8001,
    Reason.REJECTED: 0xC004,
}


@pytest.mark.parametrize("reason", list(Reason))
def test_the_class_of_each_outcome_is_the_one_of_the_table(reason: Reason) -> None:
    assert final_class(reason.value) == TABLE.get(reason)


@pytest.mark.parametrize(
    ("positive", "message_class", "expected"),
    [
        (True, 0x4000, Reason.DELIVERED),
        (False, 0xC000, Reason.QUEUE_DELETED),
        (False, 0xC001, Reason.PURGED),
        (False, 0xC002, Reason.EXPIRED),
        (False, 0x8001, Reason.DELETED_IN_TRANSIT),
        (False, 0xC004, Reason.REJECTED),
        (True, None, Reason.DELIVERED),
        (False, None, None),
        (False, 0xC003, None),  # not an outcome §4.4 lists: the sender's TTBR decides
    ],
)
def test_what_a_final_receipt_means_to_the_sender(
    positive: bool, message_class: int | None, expected: Reason | None
) -> None:
    assert final_outcome(positive, message_class) is expected


def departure(journal: int, transactional: bool = True, origin: StreamOrigin | None = ORIGIN) -> Departure:
    properties = MessageProperties(body=b"b", label="order", journal=journal, app_specific=9)
    message = Message(
        lookup_id=1,
        queue_id=1,
        message_id=f"{{{SENDER}}}\\42",
        properties=properties,
        sent_time=NOW,
        arrived_time=NOW,
        source_machine=SENDER,
        ttbr_deadline=None,
        ttrq_deadline=None,
        first_in_transaction=True,
        last_in_transaction=True,
        abort_count=0,
        transactional=transactional,
        stream=StreamPosition(ORIGIN.stream_id, 3),
    )
    return Departure(message, parse_queue_path("private$/orders_tx"), False, transactional, origin)


@pytest.mark.parametrize(("reason", "message_class"), list(TABLE.items()))
def test_a_final_receipt_goes_to_the_outgoing_queue_of_send_receipts_to(
    reason: Reason, message_class: int
) -> None:
    [receipt] = [
        placement
        for placement in POLICY.consequences(departure(JournalFlags.DEADLETTER), reason, NOW)
        if placement.kind is PlacementKind.FINAL_RECEIPT
    ]
    assert receipt.target.kind is QueueKind.OUTGOING
    assert receipt.target.name.casefold() == ORIGIN.send_receipts_to.casefold()
    assert receipt.properties.message_class == message_class
    assert receipt.properties.correlation_id is not None
    assert receipt.properties.correlation_id[:16] == SENDER.bytes_le
    assert receipt.properties.body == b"" and receipt.properties.label == "order"
    assert receipt.properties.response_queue == f"DIRECT={ORIGIN.destination}"
    assert receipt.stream == StreamPosition(ORIGIN.stream_id, ORIGIN.last_ordinal)
    assert receipt.message_id == ""  # the queue manager numbers it


@pytest.mark.parametrize(
    "gone",
    [
        departure(JournalFlags.NONE),
        departure(JournalFlags.JOURNAL),
        departure(JournalFlags.DEADLETTER, transactional=False),
        departure(JournalFlags.DEADLETTER, origin=None),
    ],
    ids=["no-flags", "journal-only", "not-transactional", "no-stream"],
)
def test_no_final_receipt_without_deadletter_on_a_transactional_stream_message(gone: Departure) -> None:
    for reason in TABLE:
        assert POLICY.final_receipt(gone, reason, NOW) == []


def test_no_final_receipt_for_arrival_or_the_senders_own_outcomes() -> None:
    for reason in set(Reason) - TABLE.keys():
        assert POLICY.final_receipt(departure(JournalFlags.DEADLETTER), reason, NOW) == []
