"""What a SOAP API request asks for, as typed values (the decoder's output)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from qm.model import MessageProperties, QueueSettings


class LookupAction(enum.Enum):
    """Which message MQReceiveMessageByLookupId addresses (MQ_LOOKUP_*, reference §5.12)."""

    CURRENT = "current"
    NEXT = "next"
    PREVIOUS = "previous"
    FIRST = "first"
    LAST = "last"


@dataclass(frozen=True, slots=True)
class Send:
    queue: str
    properties: MessageProperties
    transaction: str | None = None
    operation = "Send"


@dataclass(frozen=True, slots=True)
class Receive:
    queue: str
    timeout_ms: int = 0
    transaction: str | None = None
    decode: bool = False
    operation = "Receive"


@dataclass(frozen=True, slots=True)
class Peek:
    queue: str
    timeout_ms: int = 0
    decode: bool = False
    operation = "Peek"


@dataclass(frozen=True, slots=True)
class ByLookupId:
    queue: str
    action: LookupAction
    lookup_id: int
    receive: bool
    transaction: str | None = None
    decode: bool = False

    @property
    def operation(self) -> str:
        return "ReceiveByLookupId" if self.receive else "PeekByLookupId"


@dataclass(frozen=True, slots=True)
class CreateQueue:
    path: str
    settings: QueueSettings
    operation = "CreateQueue"


@dataclass(frozen=True, slots=True)
class GetQueue:
    path: str
    operation = "GetQueue"


@dataclass(frozen=True, slots=True)
class DeleteQueue:
    path: str
    operation = "DeleteQueue"


@dataclass(frozen=True, slots=True)
class PurgeQueue:
    path: str
    operation = "PurgeQueue"


@dataclass(frozen=True, slots=True)
class ListQueues:
    operation = "ListQueues"


@dataclass(frozen=True, slots=True)
class BeginTransaction:
    operation = "BeginTransaction"


@dataclass(frozen=True, slots=True)
class EndTransaction:
    transaction: str
    commit: bool

    @property
    def operation(self) -> str:
        return "CommitTransaction" if self.commit else "AbortTransaction"


Call = (
    Send
    | Receive
    | Peek
    | ByLookupId
    | CreateQueue
    | GetQueue
    | DeleteQueue
    | PurgeQueue
    | ListQueues
    | BeginTransaction
    | EndTransaction
)
