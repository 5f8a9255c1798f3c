"""A browse page (`MessagePage`) streamed message by message.

Written at once, a page of large bodies was held serialised whole beside its copies (the
model, the text, the bytes), and the event loop wrote it in one step that nothing else could
interrupt. Streamed, one message's JSON is made at a time, and the loop serves other requests
between two. The bytes are those FastAPI wrote for the model: compact JSON in the model's order.

Only non-destructive answers are streamed: a receive batch's messages are gone from the queue
before its first byte is sent, and a client that hung up mid-stream would lose the rest.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator

from pydantic_core import to_json
from starlette.responses import StreamingResponse

from app.answer_bytes import ENVELOPE_BYTES
from app.message_schemas import message_fields
from qm.model import Message

_HEAD = b'{"messages":['


def page_response(
    found: list[Message], queue: str, more: bool, max_answer_bytes: int, decode: bool = False
) -> StreamingResponse:
    """The page of `found`, followed by `next_after` when `more`. The store chose `found` by its
    footprints, an upper bound of its JSON; only `decoded` views can weigh more, and the page
    then stops before the one that would pass `max_answer_bytes` (one message at least)."""
    return StreamingResponse(
        _page(deque(found), queue, more, max_answer_bytes - ENVELOPE_BYTES, decode),
        media_type="application/json",
    )


async def _page(
    found: deque[Message], queue: str, more: bool, room: int, decode: bool
) -> AsyncIterator[bytes]:
    last: int | None = None
    separator = _HEAD
    while found:
        message = found.popleft()  # not kept once written
        chunk = to_json(message_fields(message, queue, decode=decode))
        if last is not None and len(chunk) + 1 > room:
            more = True
            break
        room -= len(chunk) + 1
        yield separator
        yield chunk
        separator, last = b",", message.lookup_id
        del message, chunk
        await asyncio.sleep(0)  # let the loop serve others before the next message
    found.clear()
    next_after = str(last) if more and last is not None else None
    yield (_HEAD if last is None else b"") + b'],"next_after":' + to_json(next_after) + b"}"
