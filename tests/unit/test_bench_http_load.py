"""The bench's HTTP client reads what the gateway answers on one keep-alive connection:
bodies with a Content-Length and streamed ones (browse pages, exports: chunked). A streamed
answer read as an empty body left its chunks for the next request's status line (the
end-to-end scenario's console poll failed with `invalid literal for int()`)."""

from __future__ import annotations

import asyncio

import pytest

from bench.http_load import Connection, request_bytes

pytestmark = pytest.mark.anyio

ANSWERS = [
    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
    b'7\r\n{"a": 1\r\na;ext=1\r\n, "b": 22}\r\n0\r\n\r\n',
    b"HTTP/1.1 201 Created\r\ncontent-length: 5\r\n\r\nhello",
    b"HTTP/1.1 204 No Content\r\n\r\n",
]


async def test_chunked_and_sized_answers_follow_each_other_on_one_connection() -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for response in ANSWERS:
            await reader.readuntil(b"\r\n\r\n")
            writer.write(response)
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    connection = await Connection.open(port)
    try:
        answered = [await connection.exchange(request_bytes("GET", "/")) for _ in ANSWERS]
    finally:
        await connection.close()
        server.close()
        await server.wait_closed()
    assert answered == [(200, b'{"a": 1, "b": 22}'), (201, b"hello"), (204, b"")]
