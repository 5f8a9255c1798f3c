"""The hot routes write their JSON from plain dicts: the bytes are those of the documented models.
Raw answers carry the same fields as headers."""

from __future__ import annotations

import base64
import json
import uuid
from datetime import UTC, datetime, timedelta
from urllib.parse import quote

import pytest
from pydantic_core import to_json, to_jsonable_python
from starlette.requests import Request
from starlette.responses import Response

from app.answers import MESSAGE_HEADERS
from app.http import OCTET_STREAM, _header_text, header_name, message_response
from app.message_schemas import MessageOut, SentOut, message_fields, sent_fields
from qm.model import Delivery, Message, MessageClass, MessageProperties

SENT = datetime(2026, 11, 23, 6, 4, 43, 981158, tzinfo=UTC)


def message(properties: MessageProperties, destination_queue: str | None = None) -> Message:
    return Message(
        lookup_id=(1 << 63) + 5,
        queue_id=1,
        message_id="{d84f250c-4160-4521-860d-5b861b201341}\\12",
        properties=properties,
        sent_time=SENT,
        arrived_time=SENT + timedelta(microseconds=7),
        source_machine=uuid.UUID("d84f250c-4160-4521-860d-5b861b201341"),
        ttbr_deadline=None,
        ttrq_deadline=None,
        first_in_transaction=True,
        last_in_transaction=False,
        abort_count=2,
        destination_queue=destination_queue,
    )


MESSAGES = [
    message(MessageProperties(body=b"order 1", label="new order", priority=5)),
    message(
        MessageProperties(
            body='h\u00e9llo \u2028 \x01 "q" \\ \U0001f600'.encode(),
            label="l\u00e4bel \x7f",
            message_class=MessageClass.ACK_RECEIVE,
            correlation_id=bytes(range(20)),
            extension=b"\x00\xff",
            response_queue="DIRECT=HTTP://gw01/msmq/private$/replies",
            admin_queue="DIRECT=HTTP://gw01/msmq/private$/admin",
            acknowledge=15,
            journal=2,
            delivery=Delivery.EXPRESS,
            time_to_be_received=30,
            time_to_reach_queue=7,
            app_specific=(1 << 32) - 1,
        ),
        destination_queue="private$/orders",
    ),
    message(MessageProperties(body=b"\xff\xfe not UTF-8", message_class=0x8001)),
]


@pytest.mark.parametrize("sent", MESSAGES)
@pytest.mark.parametrize(
    ("lock_tag", "lock_expires_at"), [(None, None), ("7205-9f", SENT + timedelta(seconds=30))]
)
def test_a_message_is_written_as_message_out_writes_it(
    sent: Message, lock_tag: str | None, lock_expires_at: datetime | None
) -> None:
    model = MessageOut.of(sent, "private$/\u00f6rders", lock_expires_at)
    model.lock_tag = lock_tag
    fields = message_fields(sent, "private$/\u00f6rders", lock_tag, lock_expires_at)
    assert to_json(fields) == model.model_dump_json().encode()


@pytest.mark.parametrize("transaction", [None, "single"])
def test_a_sent_message_is_written_as_sent_out_writes_it(transaction: str | None) -> None:
    sent = MESSAGES[1]
    model = SentOut(
        lookup_id=str(sent.lookup_id),
        message_id=sent.message_id,
        queue="private$/orders",
        priority=sent.properties.priority,
        transaction=transaction,
    )
    assert to_json(sent_fields(sent, "private$/orders", transaction)) == model.model_dump_json().encode()


def test_each_field_of_a_message_comes_from_its_own_property() -> None:
    """Written out field by field, independently of message_fields and MessageOut.of (which is
    built from it), so that a field mapped from the wrong property fails here."""
    sent = MESSAGES[1]
    written = json.loads(to_json(message_fields(sent, "private$/orders")))
    assert written == {
        "lookup_id": str((1 << 63) + 5),
        "message_id": "{d84f250c-4160-4521-860d-5b861b201341}\\12",
        "queue": "private$/orders",
        "label": "l\u00e4bel \x7f",
        "body": 'h\u00e9llo \u2028 \x01 "q" \\ \U0001f600',
        "body_base64": None,  # the body is valid UTF-8: it is in the answer once, as text
        "body_size": len('h\u00e9llo \u2028 \x01 "q" \\ \U0001f600'.encode()),
        "body_type": 0,
        "priority": 3,
        "message_class": int(MessageClass.ACK_RECEIVE),
        "message_class_name": "MQMSG_CLASS_ACK_RECEIVE",
        "correlation_id": base64.b64encode(bytes(range(20))).decode(),
        "app_specific": (1 << 32) - 1,
        "extension_base64": "AP8=",
        "response_queue": "DIRECT=HTTP://gw01/msmq/private$/replies",
        "admin_queue": "DIRECT=HTTP://gw01/msmq/private$/admin",
        "acknowledge": 15,
        "journal": 2,
        "delivery": "express",
        "time_to_be_received": 30,
        "time_to_reach_queue": 7,
        "sent_time": "2026-11-23T06:04:43.981158Z",
        "arrived_time": "2026-11-23T06:04:43.981165Z",
        "source_machine": "d84f250c-4160-4521-860d-5b861b201341",
        "first_in_transaction": True,
        "last_in_transaction": False,
        "abort_count": 2,
        "destination_queue": "private$/orders",
        "lock_tag": None,
        "lock_expires_at": None,
    }


def headers_as_written_generically(
    sent: Message, lock_tag: str | None, lock_expires_at: datetime | None
) -> list[tuple[str, str]]:
    """The raw answer's X-Msmq-* headers by the general rule: every non-empty field but the
    body, as JSON writes it, percent-encoded except for the characters a format name needs."""
    fields = to_jsonable_python(message_fields(sent, "private$/\u00f6rders", lock_tag, lock_expires_at))
    written = []
    for name, value in fields.items():
        if name in ("body", "body_base64") or value in (None, ""):
            continue
        text = str(value).lower() if isinstance(value, bool) else str(value)
        written.append((header_name(name), text if isinstance(value, int) else quote(text, safe=SAFE)))
    return written


SAFE = "{}\\$/:=;@+-_.,"
RAW = Request({"type": "http", "headers": [(b"accept", b"application/octet-stream")]})


@pytest.mark.parametrize("sent", MESSAGES)
@pytest.mark.parametrize(
    ("lock_tag", "lock_expires_at"), [(None, None), ("7205-9f", SENT + timedelta(seconds=30))]
)
def test_a_raw_answer_carries_the_fields_as_headers_by_the_general_rule(
    sent: Message, lock_tag: str | None, lock_expires_at: datetime | None
) -> None:
    response = message_response(RAW, sent, "private$/\u00f6rders", lock_tag, lock_expires_at)
    written = [(name, value) for name, value in response.headers.items() if name.startswith("x-msmq-")]
    expected = headers_as_written_generically(sent, lock_tag, lock_expires_at)
    assert written == [(name.lower(), text) for name, text in expected]
    assert response.body == sent.properties.body
    # Every header, in order, as Starlette writes the X-Msmq-* headers given to it as a mapping
    # (how the answer was built before its headers were given as bytes).
    as_a_mapping = Response(sent.properties.body, media_type=OCTET_STREAM, headers=dict(expected))
    assert response.raw_headers == as_a_mapping.raw_headers


def test_a_header_value_is_escaped_exactly_where_quote_escapes_it() -> None:
    """Values `quote` would leave as they are skip it; the shortcut must agree on every
    character (quote works character by character, so single characters cover it)."""
    for code in range(0x800):
        character = chr(code)
        assert _header_text(character) == quote(character, safe=SAFE), repr(character)
    for text in ("DIRECT=OS:.\\private$\\replies", "caf\u00e9 order", "a b", "{guid}\\12", "~"):
        assert _header_text(text) == quote(text, safe=SAFE)


def test_the_openapi_document_declares_the_headers_a_raw_answer_carries() -> None:
    sent = message(
        MessageProperties(
            body=b"x",
            label="l",
            correlation_id=bytes(20),
            extension=b"e",
            response_queue="r",
            admin_queue="a",
        ),
        destination_queue="private$\\orders",
    )
    answer = message_response(RAW, sent, "private$/orders", "1-a", datetime(2026, 1, 1, tzinfo=UTC))
    carried = {name.decode().lower() for name, _ in answer.raw_headers if name.startswith(b"x-msmq-")}
    assert carried == {name.lower() for name in MESSAGE_HEADERS}
