"""A response's head and body leave in one socket write (app/http_protocol.py)."""

from __future__ import annotations

import asyncio

import pytest

from app.http_protocol import JOINED_AT_MOST, HeldHeadTransport

pytestmark = pytest.mark.anyio

HEAD = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\n"


class RecordingTransport(asyncio.Transport):
    """Stands for the socket: records each write as one system call would carry it."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        assert not self.closed, "written after close"
        self.writes.append(bytes(data))

    def close(self) -> None:
        self.closed = True

    def is_closing(self) -> bool:
        return self.closed


def _held_head() -> tuple[HeldHeadTransport, RecordingTransport]:
    socket = RecordingTransport()
    return HeldHeadTransport(socket, asyncio.get_running_loop()), socket


async def _next_step() -> None:
    await asyncio.sleep(0)  # one turn of the loop: what call_soon scheduled has run


async def test_a_head_and_a_body_written_in_one_step_leave_in_one_write() -> None:
    transport, socket = _held_head()
    transport.write(HEAD)
    transport.write(b"hello")
    assert socket.writes == [HEAD + b"hello"]
    await _next_step()
    assert socket.writes == [HEAD + b"hello"]


async def test_a_head_whose_body_comes_later_leaves_at_the_end_of_the_step() -> None:
    transport, socket = _held_head()
    transport.write(HEAD)
    assert socket.writes == []
    await _next_step()
    assert socket.writes == [HEAD]
    transport.write(b"hello")
    await _next_step()
    assert socket.writes == [HEAD, b"hello"]


async def test_close_sends_what_is_held_first() -> None:
    transport, socket = _held_head()
    transport.write(HEAD)
    transport.close()
    assert socket.writes == [HEAD] and socket.closed


async def test_abort_drops_what_is_held() -> None:
    socket = RecordingTransport()
    aborted: list[bool] = []
    socket.abort = lambda: aborted.append(True)  # type: ignore[method-assign]
    transport = HeldHeadTransport(socket, asyncio.get_running_loop())
    transport.write(HEAD)
    transport.abort()
    await _next_step()
    assert socket.writes == [] and aborted == [True]


async def test_a_large_body_is_not_copied_onto_the_head() -> None:
    transport, socket = _held_head()
    body = b"x" * JOINED_AT_MOST
    transport.write(HEAD)
    transport.write(body)
    assert socket.writes == [HEAD, body]


async def test_consecutive_answers_on_one_connection_keep_their_order() -> None:
    transport, socket = _held_head()
    for body in (b"first", b"again"):
        transport.write(HEAD)
        transport.write(body)
    transport.write(HEAD)
    await _next_step()
    assert b"".join(socket.writes) == HEAD + b"first" + HEAD + b"again" + HEAD
    assert len(socket.writes) == 3
