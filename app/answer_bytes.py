"""How many bytes a message takes in a JSON answer, known before its body is read.

MSMQGW_MAX_ANSWER_BYTES bounds an answer as it is sent, not the raw bodies in it. A body goes
as text (`body`) when it is valid UTF-8 and its JSON string is no longer than its base64 would
be, else as `body_base64`: JSON writes a control character in six bytes (`\\u0001`), so text
could otherwise take six times its bytes. A body thus never takes more than its base64 (4
bytes for 3), and a message's weight follows from its footprint alone: its body and extension
in base64, six bytes for each character of its texts (the most JSON writes for one), and a
bound on the rest of its fields.
"""

from __future__ import annotations

from qm.store import Budget, base64_size

_ESCAPED = bytes(range(0x20)) + b'"\\'
"""The bytes JSON writes escaped (UTF-8 above ASCII goes as it is)."""
_SIX_BYTES = bytes(sorted(set(range(0x20)) - set(b"\b\t\n\f\r")))
"""The escaped bytes without a two-byte escape: `\\u00XX`."""
MESSAGE_FIELDS_BYTES = 1024
"""Most bytes of a message's JSON besides its body, extension, queue and texts: the keys and
the fixed-width values (IDs, times, numbers, a lock tag), and the comma before it in a list."""
ENVELOPE_BYTES = 64
"""Most bytes around the messages of a page: `{"messages":[`, `],"next_after":"…"}`."""
TEXT_CHARACTER_BYTES = 6
"""Most bytes JSON writes for one character (`\\u0001`; UTF-8 takes at most four)."""


def json_text_size(body: bytes) -> int:
    """Bytes of `body`, valid UTF-8, as the inside of a JSON string."""
    escaped = len(body) - len(body.translate(None, _ESCAPED))
    if not escaped:
        return len(body)
    six = len(body) - len(body.translate(None, _SIX_BYTES))
    return len(body) + escaped + 4 * six


def body_text(body: bytes) -> str | None:
    """The body as text for `body`, or None: it goes as `body_base64` (not UTF-8, or its JSON
    text would be longer than its base64)."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text if json_text_size(body) <= base64_size(len(body)) else None


def answer_budget(max_answer_bytes: int, queue: str) -> Budget:
    """The budget of one answer listing messages of this queue (as URLs write it)."""
    per_message = MESSAGE_FIELDS_BYTES + TEXT_CHARACTER_BYTES * len(queue)
    return Budget(max_answer_bytes - ENVELOPE_BYTES, per_message, TEXT_CHARACTER_BYTES)
