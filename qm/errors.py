"""MQ_ERROR codes (reference §6.2) and the one exception the queue manager raises."""

from __future__ import annotations

import enum


class MqErrorCode(enum.Enum):
    """The MSMQ HRESULTs the gateway reproduces; the value is the 32-bit code."""

    MQ_ERROR = 0xC00E0001
    MQ_ERROR_PROPERTY = 0xC00E0002
    MQ_ERROR_QUEUE_NOT_FOUND = 0xC00E0003
    MQ_ERROR_QUEUE_EXISTS = 0xC00E0005
    MQ_ERROR_INVALID_PARAMETER = 0xC00E0006
    MQ_ERROR_INVALID_HANDLE = 0xC00E0007
    MQ_ERROR_OPERATION_CANCELLED = 0xC00E0008
    MQ_ERROR_SERVICE_NOT_AVAILABLE = 0xC00E000B
    MQ_ERROR_ILLEGAL_QUEUE_PATHNAME = 0xC00E0014
    MQ_ERROR_ILLEGAL_PROPERTY_VALUE = 0xC00E0018
    MQ_ERROR_IO_TIMEOUT = 0xC00E001B
    MQ_ERROR_ILLEGAL_CURSOR_ACTION = 0xC00E001C
    MQ_ERROR_MESSAGE_ALREADY_RECEIVED = 0xC00E001D
    MQ_ERROR_ILLEGAL_FORMATNAME = 0xC00E001E
    MQ_ERROR_UNSUPPORTED_FORMATNAME_OPERATION = 0xC00E0020
    MQ_ERROR_ACCESS_DENIED = 0xC00E0025
    MQ_ERROR_INSUFFICIENT_RESOURCES = 0xC00E0027
    MQ_ERROR_MESSAGE_STORAGE_FAILED = 0xC00E002A
    MQ_ERROR_ILLEGAL_PROPERTY_SIZE = 0xC00E003B
    MQ_ERROR_INSUFFICIENT_PROPERTIES = 0xC00E003F
    MQ_ERROR_TRANSACTION_USAGE = 0xC00E0050
    MQ_ERROR_TRANSACTION_SEQUENCE = 0xC00E0051
    MQ_ERROR_LABEL_TOO_LONG = 0xC00E005D
    MQ_ERROR_ILLEGAL_OPERATION = 0xC00E0064
    MQ_ERROR_UNSUPPORTED_OPERATION = 0xC00E006A
    MQ_ERROR_MESSAGE_NOT_FOUND = 0xC00E0088
    MQ_ERROR_BAD_XML_FORMAT = 0xC00E0092
    MQ_ERROR_MESSAGE_LOCKED_UNDER_TRANSACTION = 0xC00E009C

    @property
    def hex(self) -> str:
        return f"0x{self.value:08X}"


class MqError(Exception):
    """A queue-manager failure carrying its MQ_ERROR code and a human explanation."""

    def __init__(self, code: MqErrorCode, detail: str) -> None:
        super().__init__(f"{code.name} ({code.hex}): {detail}")
        self.code = code
        self.detail = detail


class QuotaExceeded(MqError):
    """Reference §7.3 statuses 1 and 2: the queue's quota, or the machine's (or throttled)."""

    def __init__(self, detail: str, machine: bool, dead_lettered: bool = False) -> None:
        super().__init__(MqErrorCode.MQ_ERROR_INSUFFICIENT_RESOURCES, detail)
        self.machine = machine
        self.dead_lettered = dead_lettered
        """The refused message went to the dead-letter queue (it asked to, and it fitted)."""
