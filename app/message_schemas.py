"""JSON shapes of the REST API's messages: what is sent, what is read, what a send answers.
Lookup IDs are decimal strings (they exceed 2**53)."""

from __future__ import annotations

import base64
import binascii
from datetime import datetime
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from app.answer_bytes import body_text
from app.parameters import Strict
from app.schemas import DeliveryName
from bodies import FORMATS, decode_body
from bodies.encode import EncodeError, activex, dotnet_xml_string, vt_number
from qm.model import (
    DEFAULT_PRIORITY,
    INFINITE,
    MAX_LABEL_LENGTH,
    Delivery,
    Message,
    MessageClass,
    MessageProperties,
)


class MessageIn(Strict):
    """A message to send. Give the body as `body` (text, sent as UTF-8) or `body_base64`."""

    binary_text: ClassVar[frozenset[str]] = frozenset({"body", "value"})
    """The body (or the ActiveX value it is made from) is bytes: a NUL in it is kept."""

    body: str | None = Field(None, description="The body as text, stored as its UTF-8 bytes")
    body_base64: str | None = Field(
        None, description="The body in base64, for binary bodies; neither this nor `body`: an empty body"
    )
    label: str = Field("", description=f"At most {MAX_LABEL_LENGTH} characters")
    priority: int = Field(DEFAULT_PRIORITY, description="0 (lowest) to 7; transactional sends get 0")
    body_type: int = Field(0, description="VARTYPE of the body, 0-65535 (reference §5.7)")
    message_class: int = Field(MessageClass.NORMAL, description="0-65535")
    correlation_id: str | None = Field(None, description="20 bytes, base64")
    app_specific: int = Field(0, description="Unsigned 32-bit")
    extension_base64: str | None = Field(
        None, description="PROPID_M_EXTENSION in base64; its bytes count against quotas"
    )
    response_queue: str | None = Field(None, description="Format name, stored as given")
    admin_queue: str | None = Field(None, description="Format name, stored as given")
    acknowledge: int = Field(0, description="MQMSG_ACKNOWLEDGMENT_* flags, 0-15")
    journal: int = Field(0, description="1 = MQMSG_DEADLETTER, 2 = MQMSG_JOURNAL")
    delivery: DeliveryName = Field(
        "recoverable", description="`recoverable`: on stable storage before the 201; `express`: cheaper"
    )
    time_to_be_received: int = Field(
        INFINITE, description=f"Seconds from the send until it must be received; {INFINITE} = INFINITE"
    )
    time_to_reach_queue: int = Field(
        INFINITE, description=f"Seconds to reach the queue; {INFINITE} = INFINITE"
    )
    format: Literal["raw", "dotnet-xml-string", "activex"] = Field(
        "raw",
        description="`raw` (default): the body as given, with `body_type`. `dotnet-xml-string`: `body` "
        "as XmlMessageFormatter writes a string (BodyType 0). `activex`: `value` (or `body` for "
        "text) as the VARIANT type `vt`, as ActiveXMessageFormatter and COM senders write it; "
        "the BodyType is `vt` (docs/bodies.md)",
    )
    vt: str | int | None = Field(
        None,
        description="With `activex`: VT_BSTR, VT_LPWSTR, VT_LPSTR, VT_I1…VT_UI8, VT_R4, VT_R8, "
        "VT_BOOL, VT_CY, VT_DATE, VT_CLSID or VT_UI1|VT_VECTOR (base64), or its number",
    )
    value: str | int | float | bool | None = Field(
        None, description="With `activex`: the value (64-bit integers and VT_CY may be decimal text)"
    )
    _encoded: tuple[bytes, int] | None = PrivateAttr(None)

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {"body": "order 1", "label": "new order", "priority": 5},
                {"body": "order 1", "format": "dotnet-xml-string"},
                {"format": "activex", "vt": "VT_I4", "value": 42},
            ]
        },
    )

    @field_validator("body_base64", "correlation_id", "extension_base64")
    @classmethod
    def _base64(cls, value: str | None) -> str | None:
        if value is not None:
            decode_base64(value)
        return value

    @model_validator(mode="after")
    def _one_body(self) -> MessageIn:
        if self.body is not None and self.body_base64 is not None:
            raise ValueError("give either body or body_base64, not both")
        if self.format != "raw":
            self._encoded = self._formatted()
        elif self.vt is not None or self.value is not None:
            raise ValueError("vt and value are for format activex")
        return self

    def _formatted(self) -> tuple[bytes, int]:
        """(body, BodyType) of a dotnet-xml-string or activex send; ValueError when it cannot be."""
        if self.body_base64 is not None:
            raise ValueError(f"format {self.format} takes body (or value), not body_base64")
        if self.body_type != 0:
            raise ValueError(f"format {self.format} sets the body type itself: leave body_type out")
        try:
            if self.format == "dotnet-xml-string":
                if self.vt is not None or self.value is not None:
                    raise EncodeError("vt and value are for format activex")
                return dotnet_xml_string(self.body or ""), 0
            if self.vt is None:
                raise EncodeError("format activex needs vt")
            if self.body is not None and self.value is not None:
                raise EncodeError("give either body or value, not both")
            vt = vt_number(self.vt)
            return activex(vt, self.value if self.value is not None else self.body), vt
        except EncodeError as error:
            raise ValueError(str(error)) from None

    def properties(self) -> MessageProperties:
        if self._encoded is not None:
            body, body_type = self._encoded
        else:
            raw = (
                decode_base64(self.body_base64)
                if self.body_base64 is not None
                else (self.body or "").encode()
            )
            body, body_type = raw, self.body_type
        return MessageProperties(
            body=body,
            label=self.label,
            body_type=body_type,
            priority=self.priority,
            message_class=self.message_class,
            correlation_id=None if self.correlation_id is None else decode_base64(self.correlation_id),
            app_specific=self.app_specific,
            extension=decode_base64(self.extension_base64) if self.extension_base64 else b"",
            response_queue=self.response_queue,
            admin_queue=self.admin_queue,
            acknowledge=self.acknowledge,
            journal=self.journal,
            delivery=Delivery[self.delivery.upper()],
            time_to_be_received=self.time_to_be_received,
            time_to_reach_queue=self.time_to_reach_queue,
        )


def decode_base64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as error:
        raise ValueError(f"not valid base64: {error}") from None


class DecodedBodyOut(BaseModel):
    """The body as the gateway reads it (docs/bodies.md): only with `decode=true`."""

    format: Literal[FORMATS] = Field(  # type: ignore[valid-type]
        description="`text`, `xml` (`value` is a JSON view, `text` the document), `json`, `nrbf` "
        "(.NET binary serialization: the object graph), `variant` (a COM VARIANT value, `type` its "
        "VT name), or `binary` (nothing recognised: `reason` says why)"
    )
    type: str | None = Field(description="What was recognised: VT name, root class, root element")
    encoding: str | None = Field(description="The text encoding read, `(BOM)` when a BOM said so")
    value: Any = Field(description="JSON-compatible; 64-bit integers and decimals as strings")
    text: str | None = Field(description="The body as text, where it is text (an XML document)")
    headers: dict[str, str | None] | None = Field(
        description="Headers of a recognised envelope (NServiceBus's ArrayOfHeaderInfo in the "
        "Extension, a SOAP envelope's header blocks)"
    )
    envelope: Literal["nservicebus", "soap"] | None = Field(
        description="The envelope recognised around the body, if any"
    )
    reason: str | None = Field(description="Why the body is `binary`")
    warnings: list[str] = Field(description="What could not be read beside the body (bad headers)")


class MessageOut(BaseModel):
    lookup_id: str = Field(description="64-bit lookup ID as a decimal string")
    message_id: str = Field(description="`{GUID}\\sequence`")
    queue: str = Field(description="The queue's path as URLs write it, e.g. `private$/orders`")
    label: str = Field(description="PROPID_M_LABEL")
    body: str | None = Field(
        description="The body as text when it is valid UTF-8 and its JSON text is no longer than its "
        "base64 (control characters take six bytes each in JSON), else null"
    )
    body_base64: str | None = Field(
        description="The body in base64 when `body` is null (not UTF-8 text, or text JSON would "
        "write longer than base64); null when `body` carries it: an answer holds each body once"
    )
    body_size: int = Field(description="Body length in bytes (PROPID_M_BODY_SIZE)")
    body_type: int = Field(description="VARTYPE of the body, as sent (PROPID_M_BODY_TYPE)")
    priority: int = Field(description="0 (lowest) to 7")
    message_class: int = Field(
        description="PROPID_M_CLASS; acknowledgments and dead letters carry what happened"
    )
    message_class_name: str | None = Field(description="`MQMSG_CLASS_…` for a known class, else null")
    correlation_id: str | None = Field(description="base64 of 20 bytes")
    app_specific: int = Field(description="PROPID_M_APPSPECIFIC, unsigned 32-bit")
    extension_base64: str = Field(description="PROPID_M_EXTENSION in base64; empty when there is none")
    response_queue: str | None = Field(description="Format name, as sent")
    admin_queue: str | None = Field(description="Format name of the acknowledgment queue, as sent")
    acknowledge: int = Field(description="MQMSG_ACKNOWLEDGMENT_* flags, as sent")
    journal: int = Field(description="1 = MQMSG_DEADLETTER, 2 = MQMSG_JOURNAL, as sent")
    delivery: DeliveryName = Field(description="`recoverable` or `express`")
    time_to_be_received: int = Field(description="Seconds left to be received (INFINITE = 4294967295)")
    time_to_reach_queue: int = Field(description="Seconds, as sent (INFINITE = 4294967295)")
    sent_time: datetime = Field(description="UTC (PROPID_M_SENTTIME)")
    arrived_time: datetime = Field(description="UTC (PROPID_M_ARRIVEDTIME)")
    source_machine: str = Field(description="GUID of the sending queue manager (PROPID_M_SRC_MACHINE_ID)")
    first_in_transaction: bool = Field(description="The first message sent in its transaction")
    last_in_transaction: bool = Field(description="The last message sent in its transaction")
    abort_count: int = Field(description="How many transactions that received it were aborted")
    destination_queue: str | None = Field(
        description="On journal and dead-letter copies: MSMQ path name of the queue it was sent to; else null"
    )
    lock_tag: str | None = Field(None, description="Two-phase read: commit or abort with this tag")
    lock_expires_at: datetime | None = Field(
        None, description="Two-phase read: when the lock ends by itself and the message goes back"
    )
    decoded: DecodedBodyOut | None = Field(
        None,
        description="Only when asked with `decode=true` (decoding costs CPU): the body decoded",
        exclude_if=lambda value: value is None,  # absent, as message_fields leaves it, unless asked for
    )

    @classmethod
    def of(
        cls, message: Message, queue: str, lock_expires_at: datetime | None = None, decode: bool = False
    ) -> MessageOut:
        return cls.model_validate(message_fields(message, queue, None, lock_expires_at, decode))


def message_fields(
    message: Message,
    queue: str,
    lock_tag: str | None = None,
    lock_expires_at: datetime | None = None,
    decode: bool = False,
) -> dict[str, Any]:
    """MessageOut's fields in its order. The hot routes serialize this dict as it is: our own
    values need no validation, and pydantic writes the same JSON for it as for the model.
    `decoded` is there only when asked for."""
    body = message.properties.body
    text = body_text(body)
    fields = {
        **_heading_fields(message, queue),
        "body": text,
        "body_base64": None if text is not None else base64.b64encode(body).decode(),
        **_described_fields(message, lock_tag, lock_expires_at),
    }
    if decode:
        fields["decoded"] = decoded_fields(message)
    return fields


def decoded_fields(message: Message) -> dict[str, Any]:
    properties = message.properties
    return decode_body(
        properties.body_type, properties.body, properties.extension, properties.label
    ).as_json()


def header_fields(
    message: Message, queue: str, lock_tag: str | None = None, lock_expires_at: datetime | None = None
) -> dict[str, Any]:
    """`message_fields` without `body` and `body_base64`, in the same order: what a raw answer
    puts in X-Msmq-* headers. It carries the body as it is, so neither is worked out for it
    (base64 of the body is the costliest field)."""
    return _heading_fields(message, queue) | _described_fields(message, lock_tag, lock_expires_at)


def _heading_fields(message: Message, queue: str) -> dict[str, Any]:
    """MessageOut's fields before the body's."""
    return {
        "lookup_id": str(message.lookup_id),
        "message_id": message.message_id,
        "queue": queue,
        "label": message.properties.label,
    }


def _described_fields(
    message: Message, lock_tag: str | None, lock_expires_at: datetime | None
) -> dict[str, Any]:
    """MessageOut's fields after the body's."""
    properties = message.properties
    return {
        "body_size": len(properties.body),
        "body_type": properties.body_type,
        "priority": properties.priority,
        "message_class": properties.message_class,
        "message_class_name": _class_name(properties.message_class),
        "correlation_id": _b64_or_none(properties.correlation_id),
        "app_specific": properties.app_specific,
        "extension_base64": base64.b64encode(properties.extension).decode(),
        "response_queue": properties.response_queue,
        "admin_queue": properties.admin_queue,
        "acknowledge": properties.acknowledge,
        "journal": properties.journal,
        "delivery": "recoverable" if properties.delivery is Delivery.RECOVERABLE else "express",
        "time_to_be_received": properties.time_to_be_received,
        "time_to_reach_queue": properties.time_to_reach_queue,
        "sent_time": message.sent_time,
        "arrived_time": message.arrived_time,
        "source_machine": str(message.source_machine),
        "first_in_transaction": message.first_in_transaction,
        "last_in_transaction": message.last_in_transaction,
        "abort_count": message.abort_count,
        "destination_queue": message.destination_queue,
        "lock_tag": lock_tag,
        "lock_expires_at": lock_expires_at,
    }


def _b64_or_none(value: bytes | None) -> str | None:
    return None if value is None else base64.b64encode(value).decode()


def _class_name(value: int) -> str | None:
    try:
        return f"MQMSG_CLASS_{MessageClass(value).name}"
    except ValueError:
        return None


class MessagePage(BaseModel):
    messages: list[MessageOut] = Field(description="Available messages in queue order")
    next_after: str | None = Field(description="Pass as `after` for the next page; null at the end")


class MessageBatch(BaseModel):
    """What `receive?max_messages=N` answers: the messages removed, in queue order."""

    messages: list[MessageOut] = Field(description="1 to max_messages messages, in queue order")


class SentOut(BaseModel):
    lookup_id: str = Field(description="64-bit lookup ID as a decimal string")
    message_id: str = Field(description="`{GUID}\\sequence`")
    queue: str = Field(description="The queue it was stored in (an outgoing queue for a remote destination)")
    priority: int = Field(description="As stored: 0 for a transactional send")
    transaction: str | None = Field(description="The transaction it was sent in; it appears at commit")


def sent_fields(message: Message, queue: str, transaction: str | None) -> dict[str, Any]:
    """SentOut's fields in its order, serialized as they are (see `message_fields`)."""
    return {
        "lookup_id": str(message.lookup_id),
        "message_id": message.message_id,
        "queue": queue,
        "priority": message.properties.priority,
        "transaction": transaction,
    }
