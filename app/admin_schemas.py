"""JSON shapes of single-message administration: move, resend, export and import lines."""

from __future__ import annotations

import base64
import json
import uuid
from datetime import UTC, datetime
from typing import Any

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from app.message_schemas import decode_base64, message_fields
from app.parameters import StorableText, Strict, parse_lookup_id
from app.schemas import DeliveryName, Uint32
from qm.administration import MAX_CHOSEN, Imported
from qm.errors import MqError, MqErrorCode
from qm.model import DEFAULT_PRIORITY, INFINITE, Delivery, Message, MessageClass, MessageProperties
from qm.store import Moved

LookupIdText = str
MESSAGE_ID_PATTERN = (
    r"^\{[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\}\\[0-9]{1,10}$"
)
EXPORT_LEFT_OUT = ("body", "lock_tag", "lock_expires_at")
"""MessageOut's fields an export line does not carry: the body is there once, as base64."""


def parse_lookup_ids(texts: list[str]) -> list[int]:
    return [parse_lookup_id(text) for text in texts]


class MoveIn(Strict):
    lookup_ids: list[LookupIdText] = Field(
        description=f"The messages to move (1 to {MAX_CHOSEN} lookup IDs, as decimal strings)"
    )
    to: str = Field(description="The queue they go to: a path or a format name of a local queue")

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [{"lookup_ids": ["288230376151711745", "288230376151711747"], "to": "private$/retry"}]
        },
    )


class ResendIn(Strict):
    """Either `lookup_ids` or `all`."""

    lookup_ids: list[LookupIdText] | None = Field(
        None, description=f"The dead letters to resend (1 to {MAX_CHOSEN} lookup IDs)"
    )
    all: bool = Field(False, description=f"Resend the queue's first {MAX_CHOSEN} dead letters")

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"lookup_ids": ["288230376151711773"]}, {"all": True}]},
    )

    @model_validator(mode="after")
    def _one_choice(self) -> ResendIn:
        if (self.lookup_ids is None) == (not self.all):
            raise ValueError("give either lookup_ids or all: true")
        return self


class MovedOut(BaseModel):
    lookup_id: str = Field(description="Its lookup ID before (in the queue it left)")
    new_lookup_id: str = Field(description="Its lookup ID in the queue it went to")
    message_id: str = Field(description="Its message ID, kept")
    queue: str = Field(description="The queue it went to")

    @classmethod
    def of(cls, moved: Moved, queue: str) -> MovedOut:
        return cls(
            lookup_id=str(moved.old_lookup_id),
            new_lookup_id=str(moved.message.lookup_id),
            message_id=moved.message.message_id,
            queue=queue,
        )


class MoveOut(BaseModel):
    queue: str = Field(description="The queue the messages went to")
    moved: list[MovedOut] = Field(description="Each message moved, in the order it had in its queue")


class ResendOut(BaseModel):
    resent: list[MovedOut] = Field(description="Each dead letter resent, in queue order")


class ImportOut(BaseModel):
    queue: str = Field(description="The queue the messages went to")
    imported: int = Field(description="How many messages were stored (the file's lines, all of them)")


def export_line(message: Message, queue: str) -> dict[str, Any]:
    """One line of an export: MessageOut's fields, the body as base64 only (text bodies too: a
    file's lines read alike whatever their bodies)."""
    fields = message_fields(message, queue)
    for name in EXPORT_LEFT_OUT:
        del fields[name]
    fields["body_base64"] = base64.b64encode(message.properties.body).decode()
    return fields


class ImportLine(StorableText):
    """One line of an import file, as an export writes it; fields an export writes that an
    import does not take (lookup ID, queue, arrival time, ...) are ignored."""

    body_base64: str = Field(description="The body in base64")
    label: str = ""
    body_type: int = 0
    priority: int = DEFAULT_PRIORITY
    message_class: int = MessageClass.NORMAL
    correlation_id: str | None = None
    app_specific: int = 0
    extension_base64: str = ""
    response_queue: str | None = None
    admin_queue: str | None = None
    acknowledge: int = 0
    journal: int = 0
    delivery: DeliveryName = "recoverable"
    time_to_be_received: Uint32 = INFINITE
    time_to_reach_queue: Uint32 = INFINITE
    message_id: str | None = Field(None, pattern=MESSAGE_ID_PATTERN)
    sent_time: AwareDatetime | None = None
    source_machine: uuid.UUID | None = None
    first_in_transaction: bool = False
    last_in_transaction: bool = False

    model_config = ConfigDict(extra="ignore", strict=False)

    @field_validator("body_base64", "correlation_id", "extension_base64")
    @classmethod
    def _base64(cls, value: str | None) -> str | None:
        if value is not None:
            decode_base64(value)
        return value

    def imported(self, line: int = 0) -> Imported:
        properties = MessageProperties(
            body=decode_base64(self.body_base64),
            label=self.label,
            body_type=self.body_type,
            priority=self.priority,
            message_class=self.message_class,
            correlation_id=None if self.correlation_id is None else decode_base64(self.correlation_id),
            app_specific=self.app_specific,
            extension=decode_base64(self.extension_base64),
            response_queue=self.response_queue,
            admin_queue=self.admin_queue,
            acknowledge=self.acknowledge,
            journal=self.journal,
            delivery=Delivery[self.delivery.upper()],
            time_to_be_received=self.time_to_be_received,
            time_to_reach_queue=self.time_to_reach_queue,
            sent_time=_utc(self.sent_time),
            source_machine=self.source_machine,
            message_id=self.message_id,
        )
        return Imported(properties, self.first_in_transaction, self.last_in_transaction, line)


def _utc(moment: datetime | None) -> datetime | None:
    return None if moment is None else moment.astimezone(UTC)


def parse_import(payload: bytes) -> list[Imported]:
    """Each non-blank line as an import line; the first bad one fails the file."""
    batch = []
    for number, line in enumerate(payload.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            batch.append(ImportLine.model_validate(json.loads(line)).imported(number))
        except (ValueError, UnicodeDecodeError, RecursionError) as error:
            raise MqError(
                MqErrorCode.MQ_ERROR_INVALID_PARAMETER, f"line {number}: {_reason(error)}"
            ) from None
    if not batch:
        raise MqError(
            MqErrorCode.MQ_ERROR_INVALID_PARAMETER, "the file holds no message (one JSON object a line)"
        )
    return batch


def _reason(error: Exception) -> str:
    if isinstance(error, ValidationError):
        return "; ".join(
            f"{'.'.join(str(part) for part in item['loc']) or 'the line'}: {item['msg']}"
            for item in error.errors(include_url=False)
        )
    if isinstance(error, json.JSONDecodeError):
        return f"not JSON: {error.msg}"
    if isinstance(error, RecursionError):
        return "not JSON: nested too deep"
    return str(error)
