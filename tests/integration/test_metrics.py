"""GET /metrics: queue gauges read from the store agree with the REST API; what the process did
is counted by outcome; the text parses as Prometheus reads it. On both stores."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator

import httpx
import pytest
from fastapi import FastAPI
from prometheus_client.parser import text_string_to_metric_families

from app.settings import Settings
from tests.compat.vectors import load
from tests.integration.support import json_of
from tests.srmp_messages import new_stream_id, stream_request

pytestmark = pytest.mark.anyio

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture
def settings(settings: Settings) -> Settings:
    # The SRMP vectors are addressed to gw01.example.net.
    return settings.model_copy(
        update={"local_host_names": "localhost,gw01.example.net", "srmp_outbound_hosts": "remote.example"}
    )


async def scrape(client: httpx.AsyncClient) -> Samples:
    response = await client.get("/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    samples: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: Samples, metric: str, /, **labels: str) -> float:
    return samples.get((metric, frozenset(labels.items())), 0.0)


async def test_queue_and_journal_gauges_agree_with_the_rest_api(client: httpx.AsyncClient) -> None:
    await client.post("/api/queues", json={"path": "private$/orders", "journal": True})
    await client.post("/api/queues", json={"path": "invoices"})
    for body in ("one", "two", "three!"):
        assert (
            await client.post("/api/queues/private$/orders/messages", json={"body": body})
        ).status_code == 201
    assert (await client.post("/api/queues/private$/orders/receive")).status_code == 200

    samples = await scrape(client)
    queues = {queue["path"]: queue for queue in json_of(await client.get("/api/queues"))}
    orders, journal = queues["private$/orders"], queues["private$/orders;journal"]
    name = "private$\\orders"
    assert value(samples, "msmqgw_messages_in_queue", name=name) == orders["message_count"] == 2
    assert value(samples, "msmqgw_bytes_in_queue", name=name) == orders["byte_count"] > 0
    assert value(samples, "msmqgw_messages_in_journal_queue", name=name) == journal["message_count"] == 1
    assert value(samples, "msmqgw_bytes_in_journal_queue", name=name) == journal["byte_count"] > 0
    assert ("msmqgw_messages_in_queue", frozenset({("name", "invoices")})) in samples
    assert ("msmqgw_messages_in_queue", frozenset({("name", "system$;deadletter")})) in samples
    # Journals are reported with their queue, never as queues of their own.
    names = {dict(labels)["name"] for metric, labels in samples if metric == "msmqgw_messages_in_queue"}
    assert "private$\\orders;journal" not in names and "system$;journal" in names
    # Every connection the requests took went back to the pool before the scrape was written.
    assert value(samples, "msmqgw_db_pool_connections_in_use") == 0
    assert value(samples, "msmqgw_db_pool_size") == 20


async def test_dead_letters_are_counted_by_class(client: httpx.AsyncClient) -> None:
    await client.post("/api/queues", json={"path": "private$/doomed"})
    sent = {"body": "x", "journal": 1}  # MQMSG_DEADLETTER
    assert (await client.post("/api/queues/private$/doomed/messages", json=sent)).status_code == 201
    assert (await client.delete("/api/queues/private$/doomed")).status_code in (200, 204)

    samples = await scrape(client)
    dead = json_of(await client.get("/api/queues/system$;deadletter"))["message_count"]
    assert dead == 1
    assert (
        value(samples, "msmqgw_dead_letters", queue="system$;deadletter", **{"class": "NACK_Q_DELETED"}) == 1
    )


async def test_outgoing_queues_agree_with_the_rest_api(app: FastAPI, client: httpx.AsyncClient) -> None:
    # No delivery attempt may change the numbers between the two reads: the sender stops first.
    sender = next(task for task in app.state.operations.tasks if task.get_name() == "outgoing queues")
    sender.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await sender
    remote = "DIRECT=HTTP://remote.example/msmq/private$/far"
    for body in ("first", "second"):
        sent = await client.post(f"/api/queues/{remote}/messages", json={"body": body})
        assert sent.status_code == 201, sent.text
    (outgoing,) = json_of(await client.get("/api/outgoing-queues"))["outgoing_queues"]
    paused = json_of(await client.post(f"/api/outgoing-queues/{outgoing['id']}/pause"))

    samples = await scrape(client)
    name = outgoing["format_name"]
    assert value(samples, "msmqgw_outgoing_messages", name=name) == outgoing["message_count"] == 2
    assert value(samples, "msmqgw_outgoing_bytes", name=name) == outgoing["byte_count"] > 0
    assert value(samples, "msmqgw_outgoing_retries", name=name) == outgoing["attempts"] == 0
    assert value(samples, "msmqgw_outgoing_delivered_total", name=name) == outgoing["delivered_count"] == 0
    assert value(samples, "msmqgw_outgoing_oldest_message_age_seconds", name=name) >= 0
    assert value(samples, "msmqgw_outgoing_state", name=name, state=paused["state"]) == 1
    assert value(samples, "msmqgw_outgoing_state", name=name, state=outgoing["state"]) == 0
    # An outgoing queue is not a queue of this computer: it is not among the MSMQ Queue gauges.
    assert not any(
        dict(labels).get("name") == name for metric, labels in samples if metric == "msmqgw_messages_in_queue"
    )


async def test_sends_receives_and_peeks_are_counted_by_outcome(client: httpx.AsyncClient) -> None:
    await client.post("/api/queues", json={"path": "private$/counted"})
    before = await scrape(client)
    await client.post("/api/queues/private$/counted/messages", json={"body": "a"})
    await client.post("/api/queues/private$/missing/messages", json={"body": "a"})
    await client.get("/api/queues/private$/counted/peek")
    await client.post("/api/queues/private$/counted/receive")
    await client.post("/api/queues/private$/counted/receive")  # empty: 204

    after = await scrape(client)

    def added(operation: str, outcome: str) -> float:
        name = "msmqgw_operations_total"
        labels = {"operation": operation, "outcome": outcome}
        return value(after, name, **labels) - value(before, name, **labels)

    assert added("send", "done") == 1
    assert added("send", "refused") == 1
    assert added("peek", "done") == 1
    assert added("receive", "done") == 1
    assert added("receive", "no_message") == 1
    histogram = "msmqgw_http_request_duration_seconds_count"
    assert value(after, histogram, family="send") - value(before, histogram, family="send") == 2
    assert value(after, "msmqgw_group_commit_batch_size_count", operation="send") >= 1


async def test_srmp_requests_are_counted_by_status_and_outcome(client: httpx.AsyncClient) -> None:
    await client.post("/api/queues", json={"path": "private$/orders"})
    vector = load("01-express-basic")
    headers = {"content-type": vector.content_type or ""}
    for _ in range(2):  # the second is a duplicate of the first
        answer = await client.post("/msmq/private$/orders", content=vector.request.body, headers=headers)
        assert answer.status_code == 200
    garbage = await client.post(
        "/msmq/private$/orders", content=b"not soap", headers={"content-type": "text/xml"}
    )
    assert garbage.status_code == 400

    samples = await scrape(client)
    statistics = json_of(await client.get("/api/srmp/statistics"))
    assert (
        value(samples, "msmqgw_srmp_requests_total", status="200", outcome="stored")
        == statistics["stored"]
        == 1
    )
    assert (
        value(samples, "msmqgw_srmp_requests_total", status="200", outcome="duplicate")
        == statistics["duplicates"]
        == 1
    )
    assert (
        value(samples, "msmqgw_srmp_requests_total", status="400", outcome="refused")
        == statistics["refused"]
        == 1
    )
    assert value(samples, "msmqgw_http_request_duration_seconds_count", family="srmp") == 3


async def test_srmp_retries_and_timer_layout_mismatches_are_counted(client: httpx.AsyncClient) -> None:
    await client.post("/api/queues", json={"path": "private$/orders", "quota_kb": 0})
    await client.post("/api/queues", json={"path": "private$/orders_tx", "transactional": True})
    vector = load("01-express-basic")
    full = await client.post(
        "/msmq/private$/orders",
        content=vector.request.body,
        headers={"content-type": vector.content_type or ""},
    )
    assert full.status_code == 503  # the queue's quota: the sender retries later
    # <expiresAt> (read as the TTRQ deadline) later than <TTrq> (the TTBR deadline): the other layout
    content_type, body = stream_request(
        "http://localhost/msmq/private$/orders_tx",
        new_stream_id(),
        1,
        expires_after_s=7200,
        ttrq_after_s=3600,
    )
    swapped = await client.post(
        "/msmq/private$/orders_tx", content=body, headers={"content-type": content_type}
    )
    assert swapped.status_code == 200

    samples = await scrape(client)
    statistics = json_of(await client.get("/api/srmp/statistics"))
    retried = value(samples, "msmqgw_srmp_requests_total", status="503", outcome="retry_later")
    assert retried == statistics["retry_later"] == 1
    mismatches = value(samples, "msmqgw_srmp_timer_layout_mismatches_total")
    assert mismatches == statistics["timer_layout_mismatches"] == 1
    for outcome, counter in (("stored", "stored"), ("duplicate", "duplicates")):
        assert (
            value(samples, "msmqgw_srmp_requests_total", status="200", outcome=outcome) == statistics[counter]
        )


async def test_the_request_id_is_taken_when_sane_and_made_otherwise(client: httpx.AsyncClient) -> None:
    given = await client.get("/livez", headers={"x-request-id": "abc-123"})
    assert given.headers["x-request-id"] == "abc-123"
    made = await client.get("/livez")
    other = await client.get("/livez")
    assert (
        len(made.headers["x-request-id"]) == 32
        and made.headers["x-request-id"] != other.headers["x-request-id"]
    )
    for hostile in ("x" * 129, "two words", "line\tbreak"):
        answer = await client.get("/livez", headers={"x-request-id": hostile})
        assert answer.headers["x-request-id"] != hostile and len(answer.headers["x-request-id"]) == 32
    fast = await client.post("/api/queues/private$/missing/receive", headers={"x-request-id": "fast-1"})
    assert fast.headers["x-request-id"] == "fast-1"  # the fast REST path too
    srmp = await client.post("/msmq/private$/x", content=b"", headers={"x-request-id": "srmp-1"})
    assert srmp.headers["x-request-id"] == "srmp-1"


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def request_lines() -> Iterator[Lines]:
    handler = Lines()
    logger = logging.getLogger("msmq_gateway.requests")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_json_request_logs_name_method_route_status_duration_and_id(
    settings: Settings, request_lines: Lines
) -> None:
    import json

    from app.main import create_app

    application: FastAPI = create_app(settings.model_copy(update={"request_log": "json"}))
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            await http.get("/api/queues/private$/missing", headers={"x-request-id": "log-1"})
    (line,) = [json.loads(text) for text in request_lines.lines]
    assert line["request_id"] == "log-1"
    assert line["method"] == "GET"
    assert line["route"] == "/api/queues/{path:path}"
    assert line["status"] == 404
    assert line["duration_ms"] >= 0


@pytest.mark.parametrize("database_url", ["sqlite"], indirect=True)
async def test_metrics_can_move_to_a_port_of_their_own(settings: Settings) -> None:
    from app.main import create_app
    from tests.gateway_process import free_port

    port = free_port()
    application: FastAPI = create_app(settings.model_copy(update={"metrics_port": port}))
    async with application.router.lifespan_context(application):
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as api:
            assert (await api.get("/metrics")).status_code == 404
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as scraper:
            scraped = await scraper.get("/metrics")
            assert scraped.status_code == 200
            assert 'msmqgw_messages_in_queue{name="system$;deadletter"} 0' in scraped.text
            assert (await scraper.get("/api/queues")).status_code == 404
            assert (await scraper.post("/metrics")).status_code == 405
            too_large = await scraper.get("/metrics", headers={"x-padding": "x" * 10_000})
            assert too_large.status_code == 431
