"""MSMQGW_MAX_ANSWER_BYTES holds for an answer as it is sent, not for the raw bodies in it: a
text body that JSON escapes (control characters take six bytes each) goes as base64 instead,
and the properties (label, extension, format names) count too. A browse page is streamed
message by message, byte for byte what it was when it was written at once."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from app.main import create_app
from app.settings import Settings
from qm.clock import SettableClock
from tests.integration.support import create_queue, json_of, message_count

pytestmark = pytest.mark.anyio

QUEUE = "private$/escapes"
BUDGET = 8192
CONTROL = "\x01" * 600
"""Valid UTF-8 that JSON writes as `\\u0001`: 3,600 bytes as text, 800 as base64."""


@pytest.fixture
async def small_answers(settings: Settings, clock: SettableClock) -> AsyncIterator[httpx.AsyncClient]:
    application = create_app(settings.model_copy(update={"max_answer_bytes": BUDGET}), clock)
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            yield client


async def fill(client: httpx.AsyncClient, count: int, **message: Any) -> None:
    await create_queue(client, QUEUE)
    for number in range(count):
        sent = await client.post(f"/api/queues/{QUEUE}/messages", json={"label": f"m{number:03d}"} | message)
        assert sent.status_code == 201, sent.text


async def browse_all(client: httpx.AsyncClient) -> list[httpx.Response]:
    answers: list[httpx.Response] = []
    after: str | None = "0"
    while after is not None:
        answer = await client.get(f"/api/queues/{QUEUE}/messages", params={"after": after, "limit": 1000})
        answers.append(answer)
        after = json_of(answer)["next_after"]
    return answers


def labels(answers: list[httpx.Response]) -> list[str]:
    return [message["label"] for answer in answers for message in answer.json()["messages"]]


async def test_a_browse_page_of_escaped_text_stays_within_the_cap(small_answers: httpx.AsyncClient) -> None:
    await fill(small_answers, 20, body=CONTROL)
    answers = await browse_all(small_answers)
    assert max(len(answer.content) for answer in answers) <= BUDGET
    assert labels(answers) == [f"m{number:03d}" for number in range(20)]


async def test_a_receive_batch_of_escaped_text_stays_within_the_cap(small_answers: httpx.AsyncClient) -> None:
    await fill(small_answers, 20, body=CONTROL)
    answer = await small_answers.post(f"/api/queues/{QUEUE}/receive", params={"max_messages": 100})
    taken = json_of(answer)["messages"]
    assert len(answer.content) <= BUDGET
    assert len(taken) + await message_count(small_answers, QUEUE) == 20


async def test_properties_count_against_the_cap(small_answers: httpx.AsyncClient) -> None:
    """One-byte bodies, but a 249-character label of `"` (two bytes each in JSON) and a
    1,000-byte extension: the page is cut by what it weighs, not by its bodies."""
    extension = base64.b64encode(bytes(range(250)) * 4).decode()
    await create_queue(small_answers, QUEUE)
    for _ in range(20):
        sent = await small_answers.post(
            f"/api/queues/{QUEUE}/messages",
            json={"body": "x", "label": '"' * 249, "extension_base64": extension},
        )
        assert sent.status_code == 201, sent.text
    answers = await browse_all(small_answers)
    assert max(len(answer.content) for answer in answers) <= BUDGET
    assert sum(len(answer.json()["messages"]) for answer in answers) == 20
    batch = await small_answers.post(f"/api/queues/{QUEUE}/receive", params={"max_messages": 100})
    assert len(json_of(batch)["messages"]) < 20 and len(batch.content) <= BUDGET


async def test_text_goes_as_text_unless_its_json_is_longer_than_its_base64(
    small_answers: httpx.AsyncClient,
) -> None:
    texts = ["plain", 'two\nlines\tand "quotes"', "é ☃ 😀", "\x01", "a\x01b", "\x01" + "x" * 20]
    await create_queue(small_answers, QUEUE)
    for text in texts:
        sent = await small_answers.post(f"/api/queues/{QUEUE}/messages", json={"body": text})
        assert sent.status_code == 201, sent.text
    found = json_of(await small_answers.get(f"/api/queues/{QUEUE}/messages"))["messages"]
    for text, message in zip(texts, found, strict=True):
        as_text = len(json.dumps(text, ensure_ascii=False).encode()) - 2
        as_base64 = len(base64.b64encode(text.encode()))
        if as_text <= as_base64:
            assert (message["body"], message["body_base64"]) == (text, None)
        else:
            assert message["body"] is None
            assert base64.b64decode(message["body_base64"]) == text.encode()
    assert [message["body"] is None for message in found] == [False, False, False, True, True, False]
    peeked = json_of(await small_answers.get(f"/api/queues/{QUEUE}/peek"))
    assert peeked["body"] == "plain"


async def test_a_browse_answer_is_compact_json_as_before(small_answers: httpx.AsyncClient) -> None:
    """The streamed page is what FastAPI wrote for the page model: compact JSON, UTF-8 text
    unescaped, the envelope's fields in order."""
    await fill(small_answers, 3, body="é\n☃")
    for decode in ("false", "true"):
        answer = await small_answers.get(f"/api/queues/{QUEUE}/messages", params={"decode": decode})
        page = json_of(answer)
        assert list(page) == ["messages", "next_after"]
        compact = json.dumps(page, ensure_ascii=False, separators=(",", ":")).encode()
        assert answer.content == compact
        assert ("decoded" in page["messages"][0]) == (decode == "true")


async def test_decoded_views_are_weighed_as_they_are_written(small_answers: httpx.AsyncClient) -> None:
    """A decoded view is not known before the body is read: the page stops before the message
    whose JSON, view included, would take it past the cap."""
    await fill(small_answers, 7, body="x" * 1000)
    answers: list[httpx.Response] = []
    after: str | None = "0"
    while after is not None:
        answer = await small_answers.get(
            f"/api/queues/{QUEUE}/messages", params={"after": after, "limit": 1000, "decode": "true"}
        )
        answers.append(answer)
        after = json_of(answer)["next_after"]
    assert max(len(answer.content) for answer in answers) <= BUDGET
    assert labels(answers) == [f"m{number:03d}" for number in range(7)]
    assert all(
        message["decoded"]["value"] == "x" * 1000
        for answer in answers
        for message in answer.json()["messages"]
    )
