"""Identifiers on the wire (reference §5.8): GUIDs, message IDs, correlation IDs, stream IDs.

A message ID is 20 bytes: the sending queue manager's GUID (Microsoft layout) and a 32-bit
little-endian sequence. SRMP writes it `uuid:<sequence>@<guid>`; the gateway stores it as
`{guid}\\sequence` (qm.rules.message_id_for); .NET prints `guid\\sequence` with a signed sequence.
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
import struct
import uuid
from dataclasses import dataclass

from qm.model import CORRELATION_ID_SIZE, GUID_NULL
from soap.errors import bad_request
from soap.namespaces import WHITESPACE

UINT32_MAX = 0xFFFFFFFF
UINT64_MAX = 0xFFFFFFFFFFFFFFFF
MESSAGE_ID_SIZE = 20

_GUID = r"[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}"
_GUID_TEXT = re.compile(_GUID)
_SRMP_MESSAGE_ID = re.compile(rf"uuid:(\d{{1,10}})@({_GUID})", re.ASCII)
_TEXT_MESSAGE_ID = re.compile(rf"(\{{{_GUID}\}}|{_GUID})\\(-?\d{{1,10}})", re.ASCII)
_STREAM_ID = re.compile(rf"([A-Za-z][A-Za-z0-9+.-]{{0,15}}):({_GUID})\\(\d{{1,20}})", re.ASCII)
_MAX_DIGITS = 20


def parse_guid(text: str) -> uuid.UUID:
    """The 36-character registry form, either case, no braces (reference §0.2)."""
    stripped = text.strip(WHITESPACE)
    if _GUID_TEXT.fullmatch(stripped) is None:
        raise bad_request(f"{stripped[:60]!r} is not a GUID")
    return _uuid(stripped)


@functools.lru_cache(maxsize=256)
def _uuid(guid: str) -> uuid.UUID:
    """A checked 36-character GUID as a UUID (immutable), remembered: the GUIDs of the sending
    queue managers recur in every message they send."""
    return uuid.UUID(guid)


def parse_decimal(text: str, what: str, maximum: int, minimum: int = 0) -> int:
    """An unsigned decimal number in `[minimum, maximum]`; nothing but ASCII digits."""
    stripped = text.strip(WHITESPACE)
    if not (len(stripped) <= _MAX_DIGITS and stripped.isascii() and stripped.isdigit()):
        raise bad_request(f"{what} is {stripped[:30]!r}, not a decimal number")
    value = int(stripped)
    if not minimum <= value <= maximum:
        raise bad_request(f"{what} is {value}; it must be between {minimum} and {maximum}")
    return value


@dataclass(frozen=True, slots=True)
class MessageId:
    """PROPID_M_MSGID: the sending queue manager's GUID and a 32-bit sequence."""

    guid: uuid.UUID
    sequence: int

    def __post_init__(self) -> None:
        if not 0 <= self.sequence <= UINT32_MAX:
            raise ValueError(f"a message ID sequence is 32-bit, not {self.sequence}")

    @classmethod
    def from_srmp(cls, text: str) -> MessageId:
        """`uuid:7001@5b0c7e1a-...`."""
        stripped = text.strip(WHITESPACE)
        match = _SRMP_MESSAGE_ID.fullmatch(stripped)
        if match is None:
            raise bad_request(f"{stripped[:80]!r} is not an SRMP message ID (uuid:<n>@<guid>)")
        digits, guid = match.groups()
        return cls(_uuid(guid), parse_decimal(digits, "the message ID sequence", UINT32_MAX))

    @classmethod
    def from_text(cls, text: str) -> MessageId:
        """`{guid}\\n` (the gateway's form) or `guid\\n` (.NET's, where n may be negative)."""
        match = _TEXT_MESSAGE_ID.fullmatch(text.strip(WHITESPACE))
        if match is None:
            raise ValueError(f"{text[:80]!r} is not a message ID ({{guid}}\\n)")
        sequence = int(match.group(2))
        if not -(2**31) <= sequence <= UINT32_MAX:
            raise ValueError(f"{text!r}: the sequence is not 32-bit")
        return cls(uuid.UUID(match.group(1).strip("{}")), sequence & UINT32_MAX)

    @classmethod
    def from_bytes(cls, data: bytes) -> MessageId:
        if len(data) != MESSAGE_ID_SIZE:
            raise ValueError(f"a message ID has {MESSAGE_ID_SIZE} bytes, not {len(data)}")
        return cls(uuid.UUID(bytes_le=data[:16]), struct.unpack("<I", data[16:])[0])

    def to_bytes(self) -> bytes:
        return self.guid.bytes_le + struct.pack("<I", self.sequence)

    @property
    def srmp(self) -> str:
        return f"uuid:{self.sequence}@{self.guid}"

    @property
    def text(self) -> str:
        """The gateway's stored form `{guid}\\sequence` (same as qm.rules.message_id_for)."""
        return f"{{{self.guid}}}\\{self.sequence}"

    @property
    def dotnet_text(self) -> str:
        """System.Messaging's `guid\\sequence`, the sequence printed as a signed 32-bit number."""
        signed = struct.unpack("<i", struct.pack("<I", self.sequence))[0]
        return f"{self.guid}\\{signed}"


DEFAULT_MESSAGE_ID = MessageId(GUID_NULL, 1)
"""What a message without `<Msmq>` gets, whatever its `<id>` says (reference §1.5.1)."""


@dataclass(frozen=True, slots=True)
class StreamId:
    """`uid:<sender QM GUID>\\<uint64>`: one stream from a sender QM to a destination queue."""

    sender_qm: uuid.UUID
    sequence: int
    """(TimeStamp << 32) | Ordinal."""
    scheme: str = "uid"
    """Windows writes `uid:`, [CE] `uri:`; any scheme is accepted and kept."""

    def __post_init__(self) -> None:
        if not 0 <= self.sequence <= UINT64_MAX:
            raise ValueError(f"a stream sequence ID is 64-bit, not {self.sequence}")

    @classmethod
    def parse(cls, text: str) -> StreamId:
        stripped = text.strip(WHITESPACE)
        match = _STREAM_ID.fullmatch(stripped)
        if match is None:
            raise bad_request(f"{stripped[:100]!r} is not a stream ID (uid:<guid>\\<number>)")
        sequence = parse_decimal(match.group(3), "the stream sequence ID", UINT64_MAX)
        return cls(_uuid(match.group(2)), sequence, match.group(1))

    @property
    def text(self) -> str:
        return f"{self.scheme}:{self.sender_qm}\\{self.sequence}"

    @property
    def timestamp(self) -> int:
        """High 32 bits: when the sender created the sequence (seconds since 1970)."""
        return self.sequence >> 32

    @property
    def ordinal(self) -> int:
        return self.sequence & UINT32_MAX


def parse_correlation(text: str) -> bytes:
    """`<Correlation>`: base64 of exactly 20 bytes (reference §1.5.8; vector m13)."""
    stripped = text.strip(WHITESPACE)
    try:
        data = base64.b64decode(stripped, validate=True)
    except (binascii.Error, ValueError):
        raise bad_request(f"Correlation {stripped[:40]!r} is not base64") from None
    if len(data) != CORRELATION_ID_SIZE:
        raise bad_request(f"Correlation decodes to {len(data)} bytes, not {CORRELATION_ID_SIZE}")
    return data


def format_correlation(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")
