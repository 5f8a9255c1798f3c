"""Property: whatever envelope is built, parsing the request gives the same envelope back."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from soap.build import build_request
from soap.envelope import (
    CommitmentReceipt,
    DeliveryReceipt,
    Eod,
    Msmq,
    Path,
    Properties,
    Provider,
    Services,
    SrmpEnvelope,
    Stream,
    StreamReceipt,
)
from soap.ids import MessageId, StreamId
from soap.parse import parse_request
from soap.times import INFINITE_WIRE, SrmpTime

UINT32 = st.integers(min_value=0, max_value=0xFFFFFFFF)
xml_text = st.text(
    st.characters(exclude_categories=("Cs", "Cc"), exclude_characters="\ufffe\uffff"), max_size=40
)
free_text = st.one_of(xml_text, st.sampled_from(["", " x ", "a\r\nb\tc", "&<>\"'"]))
labels = st.text(st.characters(exclude_categories=("Cs", "Cc"), max_codepoint=0xFFFF), max_size=249).filter(
    lambda text: "\ufffe" not in text and "\uffff" not in text
)
hosts = st.sampled_from(["gw01.example.net", "GW01.example.net:8080", "10.1.2.3", "[::1]:8443"])
queues = st.sampled_from(["private$/orders", "orders", "Private$/Orders_Tx", "private$/order_queue$"])
urls = st.builds(
    lambda scheme, host, queue: f"{scheme}://{host}/msmq/{queue}",
    st.sampled_from(["http", "HTTPS"]),
    hosts,
    queues,
)
times = st.builds(SrmpTime.from_epoch, st.integers(min_value=0, max_value=INFINITE_WIRE + 1000))
message_ids = st.builds(MessageId, st.uuids(), UINT32)
stream_ids = st.builds(
    StreamId,
    st.uuids(),
    st.integers(min_value=0, max_value=2**64 - 1),
    st.sampled_from(["uid", "uri", "x-s"]),
)
format_names = st.lists(
    st.from_regex(r"[A-Za-z]{1,8}=[A-Za-z0-9:\\$._-]{1,20}", fullmatch=True), max_size=3
).map(tuple)
vias = st.one_of(
    st.none(),
    urls,
    st.sampled_from(["MSMQ:PUBLIC=5b0c7e1a-2f3d-4c8e-9a61-0d4f2b7c8e93", "msmq:DIRECT=OS:w\\q"]),
)

services = st.builds(
    Services,
    durable=st.booleans(),
    delivery_receipt_to=st.none() | urls,
    commitment_receipt_to=st.none() | urls,
    commitment_positive=st.booleans(),
    commitment_negative=st.booleans(),
).map(lambda s: s if s.commitment_receipt_to else Services(s.durable, s.delivery_receipt_to))
streams = st.builds(
    lambda stream_id, current, previous, receipts_to, start_expires, requested, end: Stream(
        stream_id, current, previous, receipts_to, start_expires if receipts_to else None, requested, end
    ),
    stream_ids,
    st.integers(min_value=1, max_value=0xFFFFFFFF),
    st.none() | UINT32,
    st.none() | urls,
    st.none() | times,
    st.booleans(),
    st.booleans(),
)
msmq_blocks = st.builds(
    Msmq,
    message_class=st.sampled_from([0, 1, 2, 255, 0x4000, 0x8000, 0x800D, 0xC000, 0xC004, 0xA190]),
    priority=st.integers(min_value=0, max_value=7),
    body_type=st.integers(min_value=0, max_value=0xFFFF),
    source_qm_guid=st.uuids(),
    ttrq=times,
    journal=st.booleans(),
    dead_letter=st.booleans(),
    correlation=st.none() | st.binary(min_size=20, max_size=20),
    trace=st.booleans(),
    connector_type=st.none() | st.uuids(),
    app=st.none() | UINT32,
    hash_algorithm=st.none() | UINT32,
    eod=st.none() | st.builds(Eod, st.booleans(), st.booleans(), st.none() | st.uuids()),
    provider=st.none() | st.builds(Provider, UINT32, free_text),
    destination_mqf=format_names,
    admin_mqf=format_names,
    response_mqf=format_names,
)


@st.composite
def envelopes(draw: st.DrawFn) -> SrmpEnvelope:
    msmq = draw(st.none() | msmq_blocks)
    message_id = draw(message_ids if msmq is not None else st.none() | message_ids)
    return SrmpEnvelope(
        path=Path(
            draw(st.one_of(labels.map("MSMQ:".__add__), free_text)), draw(urls), message_id, draw(vias)
        ),
        properties=Properties(draw(times), draw(st.none() | times)),
        services=draw(st.none() | services),
        stream=draw(st.none() | streams),
        stream_receipt=draw(st.none() | st.builds(StreamReceipt, stream_ids, UINT32)),
        delivery_receipt=draw(st.none() | st.builds(DeliveryReceipt, times, message_ids)),
        commitment_receipt=draw(
            st.none()
            | st.builds(
                CommitmentReceipt,
                times,
                st.booleans(),
                message_ids,
                st.none() | free_text,
                st.none() | free_text,
            )
        ),
        msmq=msmq,
        body=draw(st.none() | st.binary(max_size=300)),
        extension=draw(st.none() | st.binary(max_size=40)),
    )


@settings(max_examples=300)
@given(envelopes())
def test_build_then_parse_gives_the_envelope_back(envelope: SrmpEnvelope) -> None:
    content_type, body = build_request(envelope)
    parsed = parse_request(body, content_type)
    assert parsed == envelope
    assert parsed.envelope_xml in body


@given(envelopes())
def test_the_built_request_is_stable(envelope: SrmpEnvelope) -> None:
    """Building what was parsed gives the same bytes: nothing drifts on a second pass."""
    content_type, body = build_request(envelope)
    assert build_request(parse_request(body, content_type)) == (content_type, body)
