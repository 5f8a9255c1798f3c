"""Properties of the SOAP API codec: what it writes reads back the same, and no mangled request
gets anything but a typed call or a fault."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from qm.model import Delivery, Message, MessageProperties
from soap.limits import DEFAULT_LIMITS
from soap.service import ServiceFault, message_values, parse_call, response_envelope
from soap.service.decode import read_fields
from soap.service.schema import MESSAGE
from tests.unit.soap.service_samples import operation
from tests.unit.soap.test_service_encode import body_child

XML_CHARACTERS = st.characters(exclude_categories=("Cs", "Co"), exclude_characters="\ufffe\uffff").filter(
    lambda character: character in "\t\n\r" or character >= " "
)
texts = st.text(XML_CHARACTERS, max_size=60)
UINT32 = st.integers(0, 0xFFFFFFFF)
properties = st.builds(
    MessageProperties,
    body=st.binary(max_size=300),
    label=texts,
    body_type=st.integers(0, 0xFFFF),
    priority=st.integers(0, 7),
    message_class=st.integers(0, 0xFFFF),
    correlation_id=st.one_of(st.none(), st.binary(min_size=20, max_size=20)),
    app_specific=UINT32,
    extension=st.binary(max_size=40),
    response_queue=st.one_of(st.none(), texts),
    admin_queue=st.one_of(st.none(), texts),
    acknowledge=st.integers(0, 15),
    journal=st.integers(0, 3),
    delivery=st.sampled_from(Delivery),
    time_to_be_received=UINT32,
    time_to_reach_queue=UINT32,
)


def received(properties: MessageProperties, lookup_id: int) -> Message:
    now = datetime(2026, 11, 22, tzinfo=UTC)
    return Message(
        lookup_id=lookup_id,
        queue_id=1,
        message_id=f"{{{uuid.UUID(int=lookup_id % 2**128)}}}\\1",
        properties=properties,
        sent_time=now,
        arrived_time=now,
        source_machine=uuid.UUID(int=7),
        ttbr_deadline=None,
        ttrq_deadline=None,
        first_in_transaction=False,
        last_in_transaction=True,
        abort_count=0,
        destination_queue=None,
    )


@settings(max_examples=100)
@given(properties, st.integers(0, 2**64 - 1), texts)
def test_a_written_message_reads_back_the_same(
    properties: MessageProperties, lookup_id: int, queue: str
) -> None:
    values = message_values(received(properties, lookup_id), queue)
    written = body_child(response_envelope("Receive", {"message": values}))
    read = read_fields(written[0], MESSAGE.fields)
    for name in ("sentTime", "arrivedTime"):
        assert datetime.fromisoformat(read.pop(name)) == values.pop(name)
    assert read == {name: value for name, value in values.items() if value is not None}


VALID = operation(
    "Send",
    "queue=private$/orders",
    "<gw:message><gw:body>aGVsbG8=</gw:body><gw:label>x &amp; y</gw:label><gw:priority>5</gw:priority>"
    "<gw:delivery>express</gw:delivery></gw:message>",
    "transaction=single",
)


@settings(max_examples=200)
@given(
    st.integers(0, len(VALID)),
    st.lists(st.tuples(st.integers(0, len(VALID) - 1), st.integers(0, 255)), max_size=4),
)
def test_truncated_and_flipped_requests_get_a_call_or_a_fault(
    length: int, flips: list[tuple[int, int]]
) -> None:
    data = bytearray(VALID[:length])
    for position, value in flips:
        if position < len(data):
            data[position] = value
    try:
        parse_call(bytes(data), "text/xml", DEFAULT_LIMITS)
    except ServiceFault:
        pass
