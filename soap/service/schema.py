"""The SOAP API's contract as data: types and operations, read by the WSDL writer, the request
decoder and the response encoder alike, so that the three cannot disagree.

Element names are MSMQ's property names (PROPID_M_*, PROPID_Q_*, reference §5.11) in camel
case: `label`, `priority`, `correlationId`, `appSpecific`, `timeToBeReceived`, `class` ...
"""

from __future__ import annotations

import re
from dataclasses import dataclass

TARGET_NAMESPACE = "urn:msmq-gateway:soap:v1"
SERVICE_NAME = "MsmqGateway"


@dataclass(frozen=True, slots=True)
class Simple:
    """An XSD built-in type; integers carry their range."""

    xsd: str
    minimum: int | None = None
    maximum: int | None = None

    @property
    def is_integer(self) -> bool:
        return self.minimum is not None


@dataclass(frozen=True, slots=True)
class Enumeration:
    name: str
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Field:
    name: str
    type: Simple | Enumeration | Complex
    required: bool = False
    repeated: bool = False
    doc: str = ""
    attribute: str = ""
    """The Python name of the value (MessageProperties, QueueSettings); snake case by default."""

    @property
    def python_name(self) -> str:
        return self.attribute or re.sub(r"(?<!^)(?=[A-Z])", "_", self.name).lower()


@dataclass(frozen=True, slots=True)
class Complex:
    name: str
    fields: tuple[Field, ...]
    doc: str = ""


@dataclass(frozen=True, slots=True)
class Operation:
    name: str
    doc: str
    input: tuple[Field, ...]
    output: tuple[Field, ...]

    @property
    def response_name(self) -> str:
        return f"{self.name}Response"


STRING = Simple("string")
BOOLEAN = Simple("boolean")
BASE64 = Simple("base64Binary")
DATE_TIME = Simple("dateTime")
UNSIGNED_BYTE = Simple("unsignedByte", 0, 0xFF)
UNSIGNED_SHORT = Simple("unsignedShort", 0, 0xFFFF)
UNSIGNED_INT = Simple("unsignedInt", 0, 0xFFFFFFFF)
UNSIGNED_LONG = Simple("unsignedLong", 0, 0xFFFFFFFFFFFFFFFF)
SHORT = Simple("short", -0x8000, 0x7FFF)

DELIVERY = Enumeration("Delivery", ("express", "recoverable"))
LOOKUP_ACTION = Enumeration("LookupAction", ("current", "next", "previous", "first", "last"))
QUEUE_KIND = Enumeration("QueueKind", ("public", "private", "system"))

INFINITE_NOTE = "4294967295 = INFINITE"

# -- messages ---------------------------------------------------------------------------

_SENDABLE = (
    Field("body", BASE64, doc="PROPID_M_BODY"),
    Field("label", STRING, doc="PROPID_M_LABEL, at most 249 characters"),
    Field("bodyType", UNSIGNED_SHORT, doc="PROPID_M_BODY_TYPE (a VARTYPE, reference §5.7)"),
    Field("priority", UNSIGNED_BYTE, doc="PROPID_M_PRIORITY, 0 (lowest) to 7; default 3"),
    Field("class", UNSIGNED_SHORT, doc="PROPID_M_CLASS (reference §5.1)", attribute="message_class"),
    Field("correlationId", BASE64, doc="PROPID_M_CORRELATIONID, 20 bytes"),
    Field("appSpecific", UNSIGNED_INT, doc="PROPID_M_APPSPECIFIC"),
    Field("extension", BASE64, doc="PROPID_M_EXTENSION"),
    Field("responseQueue", STRING, doc="PROPID_M_RESP_QUEUE, a format name"),
    Field("adminQueue", STRING, doc="PROPID_M_ADMIN_QUEUE, a format name"),
    Field("acknowledge", UNSIGNED_BYTE, doc="PROPID_M_ACKNOWLEDGE flags (reference §5.2)"),
    Field("journal", UNSIGNED_BYTE, doc="PROPID_M_JOURNAL: 1 MQMSG_DEADLETTER, 2 MQMSG_JOURNAL"),
    Field("delivery", DELIVERY, doc="PROPID_M_DELIVERY; default recoverable"),
    Field("timeToBeReceived", UNSIGNED_INT, doc=f"PROPID_M_TIME_TO_BE_RECEIVED, seconds; {INFINITE_NOTE}"),
    Field("timeToReachQueue", UNSIGNED_INT, doc=f"PROPID_M_TIME_TO_REACH_QUEUE, seconds; {INFINITE_NOTE}"),
)
_MAY_BE_ABSENT = frozenset({"correlationId", "responseQueue", "adminQueue"})

OUTGOING_MESSAGE = Complex(
    "OutgoingMessage", _SENDABLE, "A message to send; every property is optional, as in MQSendMessage."
)
HEADER = Complex(
    "Header",
    (Field("key", STRING, True), Field("value", STRING, doc="Absent for a header without a value")),
    "One header of a recognised envelope.",
)
DECODED_BODY = Complex(
    "DecodedBody",
    (
        Field("format", STRING, True, doc="text, xml, json, nrbf, variant or binary (docs/bodies.md)"),
        Field("type", STRING, doc="What was recognised: VT name, NRBF root class, XML root element"),
        Field("encoding", STRING, doc="The text encoding read"),
        Field("value", STRING, doc="The decoded value as JSON text (as REST's decoded.value)"),
        Field("text", STRING, doc="The body as text, where it is text"),
        Field("envelope", STRING, doc="nservicebus or soap, when headers were recognised"),
        Field("header", HEADER, repeated=True, doc="The envelope's headers"),
        Field("reason", STRING, doc="Why the format is binary"),
        Field("warning", STRING, repeated=True, doc="What could not be read beside the body"),
    ),
    "A body as the gateway reads it: only when the call asks with <decode>true</decode>.",
)
MESSAGE = Complex(
    "Message",
    (
        Field("lookupId", UNSIGNED_LONG, True, doc="PROPID_M_LOOKUPID"),
        Field("messageId", STRING, True, doc="PROPID_M_MSGID as {GUID}\\sequence"),
        Field("queue", STRING, True, doc="The queue it was read from"),
        *(
            Field(field.name, field.type, field.name not in _MAY_BE_ABSENT, doc=field.doc)
            for field in _SENDABLE
        ),
        Field("bodySize", UNSIGNED_INT, True, doc="PROPID_M_BODY_SIZE"),
        Field("sentTime", DATE_TIME, True, doc="PROPID_M_SENTTIME"),
        Field("arrivedTime", DATE_TIME, True, doc="PROPID_M_ARRIVEDTIME"),
        Field("sourceMachine", STRING, True, doc="PROPID_M_SRC_MACHINE_ID"),
        Field("firstInTransaction", BOOLEAN, True, doc="PROPID_M_FIRST_IN_XACT"),
        Field("lastInTransaction", BOOLEAN, True, doc="PROPID_M_LAST_IN_XACT"),
        Field("abortCount", UNSIGNED_INT, True, doc="PROPID_M_ABORT_COUNT"),
        Field("destinationQueue", STRING, doc="For dead-letter and journal copies: where it was sent"),
        Field("decoded", DECODED_BODY, doc="The body decoded; only when the call asked with <decode>"),
    ),
    "A message read from a queue; timeToBeReceived is what remains of it.",
)

# -- queues and transactions ------------------------------------------------------------

QUEUE_SETTINGS = (
    Field("label", STRING, doc="PROPID_Q_LABEL, at most 124 characters"),
    Field("transactional", BOOLEAN, doc="PROPID_Q_TRANSACTION; fixed at creation"),
    Field("quota", UNSIGNED_INT, doc=f"PROPID_Q_QUOTA, kilobytes; {INFINITE_NOTE}", attribute="quota_kb"),
    Field("journal", BOOLEAN, doc="PROPID_Q_JOURNAL: copy received messages to the journal"),
    Field(
        "journalQuota",
        UNSIGNED_INT,
        doc=f"PROPID_Q_JOURNAL_QUOTA, kilobytes; {INFINITE_NOTE}",
        attribute="journal_quota_kb",
    ),
    Field("basePriority", SHORT, doc="PROPID_Q_BASEPRIORITY"),
)
QUEUE = Complex(
    "Queue",
    (
        Field("path", STRING, True, doc="As the API takes it, e.g. private$/orders"),
        Field("pathname", STRING, True, doc="PROPID_Q_PATHNAME, e.g. private$\\orders"),
        Field("kind", QUEUE_KIND, True),
        Field("isJournal", BOOLEAN, True),
        *(Field(field.name, field.type, True, doc=field.doc) for field in QUEUE_SETTINGS),
        Field("createTime", DATE_TIME, True, doc="PROPID_Q_CREATE_TIME"),
        Field("modifyTime", DATE_TIME, True, doc="PROPID_Q_MODIFY_TIME"),
        Field("messageCount", UNSIGNED_INT, True),
        Field("byteCount", UNSIGNED_LONG, True),
    ),
)
TRANSACTION = Complex(
    "Transaction",
    (
        Field("id", STRING, True),
        Field("createdAt", DATE_TIME, True),
        Field("expiresAt", DATE_TIME, True, doc="Idle transactions abort then; every use extends it"),
    ),
)
MQ_ERROR = Complex(
    "MqError",
    (
        Field("name", STRING, True, doc="e.g. MQ_ERROR_QUEUE_NOT_FOUND"),
        Field("code", STRING, True, doc="The HRESULT in hex, e.g. 0xC00E0003"),
        Field("description", STRING, True),
    ),
    "The detail of every fault: MSMQ's error name and code.",
)
COMPLEX_TYPES = (OUTGOING_MESSAGE, HEADER, DECODED_BODY, MESSAGE, QUEUE, TRANSACTION, MQ_ERROR)
ENUMERATIONS = (DELIVERY, LOOKUP_ACTION, QUEUE_KIND)

# -- operations -------------------------------------------------------------------------

_QUEUE_ARGUMENT = Field("queue", STRING, True, doc="Path name or format name of a local queue")
_PATH_ARGUMENT = Field("path", STRING, True, doc="Path name, e.g. private$/orders")
_TIMEOUT = Field("timeout", UNSIGNED_INT, doc="Milliseconds to wait; 0 (default) = do not wait")
_TRANSACTION_ARGUMENT = Field("transaction", STRING, doc="ID from BeginTransaction, or `single`")
_DECODE = Field("decode", BOOLEAN, doc="true: the message's <decoded> body too (costs CPU); default false")
_LOOKUP_ARGUMENTS = (
    _QUEUE_ARGUMENT,
    Field("lookupId", UNSIGNED_LONG, doc="Required for current, next and previous; 0 or absent otherwise"),
    Field("action", LOOKUP_ACTION, doc="Default current (MQ_LOOKUP_*_CURRENT)"),
)
_MESSAGE_OR_NOTHING = (Field("message", MESSAGE, doc="Absent when none came within the timeout"),)
_ONE_MESSAGE = (Field("message", MESSAGE, True),)
_ONE_QUEUE = (Field("queue", QUEUE, True),)

OPERATIONS = (
    Operation(
        "Send",
        "MQSendMessage: store a message; answered once it is on stable storage.",
        (_QUEUE_ARGUMENT, Field("message", OUTGOING_MESSAGE, True), _TRANSACTION_ARGUMENT),
        (
            Field("lookupId", UNSIGNED_LONG, True),
            Field("messageId", STRING, True),
            Field("queue", STRING, True),
            Field("priority", UNSIGNED_BYTE, True),
        ),
    ),
    Operation(
        "Receive",
        "MQReceiveMessage, MQ_ACTION_RECEIVE: remove the first message, waiting up to the timeout.",
        (_QUEUE_ARGUMENT, _TIMEOUT, _TRANSACTION_ARGUMENT, _DECODE),
        _MESSAGE_OR_NOTHING,
    ),
    Operation(
        "Peek",
        "MQReceiveMessage, MQ_ACTION_PEEK_CURRENT: the first message, left in place.",
        (_QUEUE_ARGUMENT, _TIMEOUT, _DECODE),
        _MESSAGE_OR_NOTHING,
    ),
    Operation(
        "ReceiveByLookupId",
        "MQReceiveMessageByLookupId, MQ_LOOKUP_RECEIVE_*: never waits; MQ_ERROR_MESSAGE_NOT_FOUND.",
        (*_LOOKUP_ARGUMENTS, _TRANSACTION_ARGUMENT, _DECODE),
        _ONE_MESSAGE,
    ),
    Operation(
        "PeekByLookupId",
        "MQReceiveMessageByLookupId, MQ_LOOKUP_PEEK_*: never waits; MQ_ERROR_MESSAGE_NOT_FOUND.",
        (*_LOOKUP_ARGUMENTS, _DECODE),
        _ONE_MESSAGE,
    ),
    Operation(
        "CreateQueue",
        "MQCreateQueue (its journal queue comes with it).",
        (_PATH_ARGUMENT, *QUEUE_SETTINGS),
        _ONE_QUEUE,
    ),
    Operation(
        "GetQueue", "MQGetQueueProperties, with message count and bytes.", (_PATH_ARGUMENT,), _ONE_QUEUE
    ),
    Operation(
        "ListQueues",
        "Every queue: private, public, journals and system queues.",
        (),
        (Field("queue", QUEUE, repeated=True),),
    ),
    Operation(
        "DeleteQueue",
        "MQDeleteQueue: the queue, its journal and their messages.",
        (_PATH_ARGUMENT,),
        (Field("messagesDropped", UNSIGNED_INT, True),),
    ),
    Operation(
        "PurgeQueue",
        "MQPurgeQueue: remove every available message.",
        (_PATH_ARGUMENT,),
        (Field("purged", UNSIGNED_INT, True),),
    ),
    Operation(
        "BeginTransaction",
        "MQBeginTransaction: an internal transaction across queues.",
        (),
        (Field("transaction", TRANSACTION, True),),
    ),
    Operation(
        "CommitTransaction",
        "Commit: sends appear, receives are final.",
        (Field("transaction", STRING, True),),
        (),
    ),
    Operation(
        "AbortTransaction",
        "Abort: sends vanish, receives go back.",
        (Field("transaction", STRING, True),),
        (),
    ),
)
OPERATIONS_BY_NAME = {operation.name: operation for operation in OPERATIONS}
