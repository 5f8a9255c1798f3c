"""A message's weight (app.answer_bytes) is an upper bound of its JSON in an answer, whatever
its body, label and format names hold, and a body goes as text only where text is not longer
than base64."""

from __future__ import annotations

import base64
import random
import uuid
from datetime import UTC, datetime

import pytest
from pydantic_core import to_json

from app.answer_bytes import ENVELOPE_BYTES, answer_budget, body_text, json_text_size
from app.message_schemas import message_fields
from qm.model import Delivery, Message, MessageClass, MessageProperties
from qm.store import Footprint

QUEUE = "private$/orders;journal"
WIDEST_TIME = datetime(2026, 11, 23, 6, 4, 43, 981158, tzinfo=UTC)
LOCK_TAG = "18446744073709551615-9f3c2b1a0d4e5f6a7b8c9d0e"


def message(properties: MessageProperties, destination_queue: str | None = None) -> Message:
    """The widest fixed fields: 20-digit IDs, microsecond times, the longest class name."""
    return Message(
        lookup_id=(1 << 64) - 1,
        queue_id=1,
        message_id="{d84f250c-4160-4521-860d-5b861b201341}\\18446744073709551615",
        properties=properties,
        sent_time=WIDEST_TIME,
        arrived_time=WIDEST_TIME,
        source_machine=uuid.UUID("d84f250c-4160-4521-860d-5b861b201341"),
        ttbr_deadline=None,
        ttrq_deadline=None,
        first_in_transaction=True,
        last_in_transaction=True,
        abort_count=(1 << 31) - 1,
        destination_queue=destination_queue,
    )


def widest(body: bytes = b"", label: str = "", extension: bytes = b"", names: str | None = None) -> Message:
    return message(
        MessageProperties(
            body=body,
            label=label,
            body_type=65535,
            priority=7,
            message_class=MessageClass.NACK_SOURCE_COMPUTER_GUID_CHANGED,
            correlation_id=bytes(20),
            app_specific=(1 << 32) - 1,
            extension=extension,
            response_queue=names,
            admin_queue=names,
            acknowledge=15,
            journal=3,
            delivery=Delivery.RECOVERABLE,
            time_to_be_received=(1 << 32) - 1,
            time_to_reach_queue=(1 << 32) - 1,
        ),
        destination_queue=names,
    )


def footprint(sent: Message) -> Footprint:
    """As the store reads it: bytes of body and extension, characters of the texts."""
    properties = sent.properties
    texts = [properties.label, properties.response_queue, properties.admin_queue, sent.destination_queue]
    return Footprint(len(properties.body), len(properties.extension), sum(len(t or "") for t in texts))


HOSTILE_TEXT = '\x01\x1f"\\\n\U0001f600\u2028é'
CASES = [
    widest(),
    widest(b"\x01" * 3000),
    widest(b'"' * 3000, label='"' * 249),
    widest(random.Random(7).randbytes(5000), extension=random.Random(8).randbytes(3000)),
    widest((HOSTILE_TEXT * 300).encode(), label=(HOSTILE_TEXT * 40)[:249], names=HOSTILE_TEXT * 100),
    widest("\U0001f600".encode() * 1000, label="\U0001f600" * 249, names="\x00" * 500),
]


@pytest.mark.parametrize("sent", CASES, ids=range(len(CASES)))
def test_a_message_weighs_at_least_its_json_with_a_lock(sent: Message) -> None:
    fields = message_fields(sent, QUEUE, LOCK_TAG, WIDEST_TIME, decode=False)
    written = len(b"," + to_json(fields))
    weight = answer_budget(1 << 30, QUEUE).weigh(footprint(sent))
    assert written <= weight


def test_the_envelope_fits_its_allowance() -> None:
    assert len(b'{"messages":[],"next_after":"18446744073709551615"}') <= ENVELOPE_BYTES


@pytest.mark.parametrize("character", [chr(code) for code in range(0x80)] + ["é", "\u2028", "\U0001f600"])
def test_the_json_text_size_is_what_json_writes(character: str) -> None:
    text = f"a{character}b{character * 3}"
    assert json_text_size(text.encode()) == len(to_json(text)) - 2


@pytest.mark.parametrize(
    ("body", "as_text"),
    [
        (b"", True),
        (b"order 1", True),
        ('h\u00e9llo\n\t"q"'.encode(), True),
        (b"\x01", False),  # six bytes as text, four as base64
        (b"\x01" + b"x" * 20, True),  # 26 against 28
        (b"\x01\x01" + b"x" * 20, True),  # 32 against 32: not longer
        (b"\x01\x01" + b"x" * 19, False),  # 31 against 28
        (b"\xff\xfe", False),
    ],
)
def test_a_body_is_text_unless_its_json_is_longer_than_its_base64(body: bytes, as_text: bool) -> None:
    text = body_text(body)
    assert (text is not None) == as_text
    if text is not None:
        assert len(to_json(text)) - 2 <= len(base64.b64encode(body))
