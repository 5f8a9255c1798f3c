"""One answer carries at most MSMQGW_MAX_ANSWER_BYTES of messages: browse pages and
receive batches stop there (browse gives `next_after` to go on; a batch leaves the rest in
the queue), so a client cannot make the gateway hold and send gigabytes in one answer."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from app.main import create_app
from app.settings import Settings
from qm.clock import SettableClock
from tests.integration.support import create_queue, json_of, message_count

pytestmark = pytest.mark.anyio

QUEUE = "private$/big"
BODY = 1000
BUDGET = 10240
"""Four messages of 1000-byte bodies fit, a fifth does not: the cap weighs each at about 2.4 KB
(the body in base64 and a bound on its fields, app.answer_bytes)."""


@pytest.fixture
async def small_answers(settings: Settings, clock: SettableClock) -> AsyncIterator[httpx.AsyncClient]:
    application = create_app(settings.model_copy(update={"max_answer_bytes": BUDGET}), clock)
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            yield client


async def fill(client: httpx.AsyncClient, count: int) -> None:
    await create_queue(client, QUEUE)
    for number in range(count):
        body = f"{number:04d}".encode() + b"x" * (BODY - 4)
        sent = await client.post(f"/api/queues/{QUEUE}/messages", content=body)
        assert sent.status_code == 201, sent.text


async def test_a_browse_page_stops_at_the_byte_budget_and_paging_goes_on(
    small_answers: httpx.AsyncClient,
) -> None:
    await fill(small_answers, 10)
    seen: list[str] = []
    after: str | None = "0"
    pages = 0
    while after is not None:
        answer = await small_answers.get(
            f"/api/queues/{QUEUE}/messages", params={"after": after, "limit": 100}
        )
        page = json_of(answer)
        assert 1 <= len(page["messages"]) <= 4 and len(answer.content) <= BUDGET
        seen += [message["body"][:4] for message in page["messages"]]
        after, pages = page["next_after"], pages + 1
    assert seen == [f"{number:04d}" for number in range(10)]
    assert pages == 3


async def test_a_receive_batch_stops_at_the_byte_budget_and_leaves_the_rest(
    small_answers: httpx.AsyncClient,
) -> None:
    await fill(small_answers, 10)
    batch = json_of(await small_answers.post(f"/api/queues/{QUEUE}/receive", params={"max_messages": 100}))
    assert [message["body"][:4] for message in batch["messages"]] == ["0000", "0001", "0002", "0003"]
    assert await message_count(small_answers, QUEUE) == 6


async def test_one_message_larger_than_the_budget_is_still_served(
    settings: Settings, clock: SettableClock
) -> None:
    application = create_app(settings.model_copy(update={"max_answer_bytes": 10}), clock)
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
            await fill(client, 3)
            page = json_of(await client.get(f"/api/queues/{QUEUE}/messages"))
            assert len(page["messages"]) == 1 and page["next_after"] == page["messages"][0]["lookup_id"]
            batch = json_of(await client.post(f"/api/queues/{QUEUE}/receive", params={"max_messages": 5}))
            assert len(batch["messages"]) == 1
            assert await message_count(client, QUEUE) == 2
