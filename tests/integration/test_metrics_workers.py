"""`serve --workers 2`: whichever worker answers a scrape, the queue gauges are what the REST
API says and the counters are the sums over both workers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.gateway_process import GatewayProcess

pytestmark = pytest.mark.slow

SENDS = 24
RECEIVES = 7
SCRAPES = 6


@pytest.fixture
def workers(database_url: str, tmp_path: Path) -> Iterator[GatewayProcess]:
    server = GatewayProcess(database_url, {}, tmp_path / "gateway.log", workers=2)
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def fresh(server: GatewayProcess) -> httpx.Client:
    """A connection per request: the kernel hands each to either worker."""
    return httpx.Client(
        base_url=server.base_url, timeout=30, limits=httpx.Limits(max_keepalive_connections=0)
    )


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_two_workers_agree_with_the_rest_api(workers: GatewayProcess) -> None:
    with fresh(workers) as http:
        assert http.post("/api/queues", json={"path": "private$/shared"}).status_code == 201
        for number in range(SENDS):
            sent = http.post("/api/queues/private$/shared/messages", json={"body": f"message {number}"})
            assert sent.status_code == 201
        for _ in range(RECEIVES):
            assert http.post("/api/queues/private$/shared/receive").status_code == 200
        queue = http.get("/api/queues/private$/shared").json()
        scrapes = [samples(http.get("/metrics").text) for _ in range(SCRAPES)]

    assert queue["message_count"] == SENDS - RECEIVES
    name = frozenset({("name", "private$\\shared")})
    for scraped in scrapes:
        assert scraped[("msmqgw_messages_in_queue", name)] == queue["message_count"]
        assert scraped[("msmqgw_bytes_in_queue", name)] == queue["byte_count"]
        sends = frozenset({("operation", "send"), ("outcome", "done")})
        receives = frozenset({("operation", "receive"), ("outcome", "done")})
        assert scraped[("msmqgw_operations_total", sends)] == SENDS
        assert scraped[("msmqgw_operations_total", receives)] == RECEIVES
