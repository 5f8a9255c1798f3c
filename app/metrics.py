"""The gateway's Prometheus metrics (docs/operations.md).

Two sources. Queue, journal, dead-letter and outgoing-queue gauges are read from the store at
scrape time, so every worker process answers the same. Counters and histograms of what a
process did (requests, SRMP outcomes, group-commit batches, trigger invocations) are
prometheus-client metrics; with several workers (`serve --workers N`) prometheus-client's
multiprocess mode keeps them in files under PROMETHEUS_MULTIPROC_DIR, and a scrape answered
by any worker sums them over all of them.

Names: `msmqgw_` where windows_exporter writes `windows_msmq_` for the same MSMQ performance
counter, with the same label `name`, so that its dashboards need only the prefix changed.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

from qm.model import MessageClass
from qm.paths import QueueKind, QueuePath
from storage.observation import Observation, OutgoingTotals, SqlObservation

PREFIX = "msmqgw_"
MULTIPROCESS_DIRECTORY = "PROMETHEUS_MULTIPROC_DIR"
"""prometheus-client's own variable: set, the process metrics live in files there."""
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

LATENCY_BUCKETS_S = (0.005, 0.025, 0.1, 0.5, 2.5, 10.0)
"""Few buckets: each is a time series per route family, written on every request."""
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 1024)


class ProcessMetrics:
    """What this process did. In multiprocess mode the values are written to files that every
    worker's scrape reads; otherwise they live in `registry`."""

    def __init__(self) -> None:
        # No `_created` series: a sample per child that dashboards do not use, in every scrape.
        disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = CollectorRegistry(auto_describe=False)
        r = self.registry
        self.request_seconds = Histogram(
            PREFIX + "http_request_duration_seconds",
            "Time from request to the end of the answer, by route family",
            ["family"],
            buckets=LATENCY_BUCKETS_S,
            registry=r,
        )
        self.operations = Counter(
            PREFIX + "operations",
            "REST sends, receives and peeks by outcome",
            ["operation", "outcome"],
            registry=r,
        )
        self.srmp_requests = Counter(
            PREFIX + "srmp_requests",
            "SRMP POSTs by the status answered and what became of the message",
            ["status", "outcome"],
            registry=r,
        )
        self.srmp_timer_layout_mismatches = Counter(
            PREFIX + "srmp_timer_layout_mismatches",
            "SRMP messages whose timer deadlines had the other layout (MSMQGW_SRMP_TIMER_LAYOUT_MISMATCH)",
            registry=r,
        )
        self.stream_receipts_sent = Counter(
            PREFIX + "stream_receipts_sent",
            "Stream receipts this gateway sent back to the senders of transactional messages, by result",
            ["result"],
            registry=r,
        )
        self.remote_acknowledgments_dropped = Counter(
            PREFIX + "remote_acknowledgments_dropped",
            "Acknowledgments and final receipts for remote queues dropped where they were made, by "
            "kind and reason (not_allowed, source_limit, total_limit)",
            ["kind", "reason"],
            registry=r,
        )
        self.group_commit_batch = Histogram(
            PREFIX + "group_commit_batch_size",
            "Requests written by one group-commit transaction",
            ["operation"],
            buckets=BATCH_BUCKETS,
            registry=r,
        )
        self.trigger_invocations = Counter(
            PREFIX + "trigger_invocations", "Trigger actions run, by result", ["result"], registry=r
        )
        self.db_connections_in_use = Gauge(
            PREFIX + "db_pool_connections_in_use",
            "Database connections checked out of the pools, all processes together",
            multiprocess_mode="livesum",
            registry=r,
        )

    def stream_receipt(self, result: str) -> None:
        self.stream_receipts_sent.labels(result).inc()

    def dropped(self, kind: str, reason: str, count: int) -> None:
        self.remote_acknowledgments_dropped.labels(kind, reason).inc(count)

    def srmp(self, status: int, outcome: str) -> None:
        self.srmp_requests.labels(str(status), outcome).inc()


def multiprocess() -> bool:
    return bool(os.environ.get(MULTIPROCESS_DIRECTORY))


@contextmanager
def worker_metrics() -> Iterator[Path]:
    """For `serve --workers N`: the directory where the workers keep their metrics, set in the
    environment they inherit. The operator's PROMETHEUS_MULTIPROC_DIR if set (emptied of an
    earlier run's files, which would otherwise be added in), else a new one removed at exit."""
    given = os.environ.get(MULTIPROCESS_DIRECTORY)
    if given:
        directory = Path(given)
        directory.mkdir(parents=True, exist_ok=True)
        for stale in directory.glob("*.db"):
            stale.unlink()
        yield directory
        return
    directory = Path(tempfile.mkdtemp(prefix="msmq-gateway-metrics-"))
    os.environ[MULTIPROCESS_DIRECTORY] = str(directory)
    try:
        yield directory
    finally:
        del os.environ[MULTIPROCESS_DIRECTORY]
        shutil.rmtree(directory, ignore_errors=True)


def forget_process() -> None:
    """At a worker's clean exit: its share of the live gauges (pool use) leaves the sums. Its
    counters stay, as counters must."""
    if multiprocess():
        mark_process_dead(os.getpid())  # type: ignore[no-untyped-call]


async def exposition(process: ProcessMetrics, observation: SqlObservation, pool_size: int) -> bytes:
    """The scrape: the store's gauges, then the process metrics (all workers' in multiprocess
    mode, whose files are read in a thread: they are files)."""
    observed = await observation.observe()
    store_part = render_store(observed, time.time(), pool_size)
    if multiprocess():
        return store_part + await asyncio.to_thread(_all_processes)
    return store_part + generate_latest(process.registry)


def _all_processes() -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
    return generate_latest(registry)


def render_store(observed: Observation, now_s: float, pool_size: int) -> bytes:
    """The store's gauges in the text format, written directly: with 10,000 queues that is
    40,000 samples, and prometheus-client's generic writer costs several times as much."""
    lines: list[str] = []
    names = [(_label(QueuePath(row.kind, row.name).pathname), row) for row in observed.queues]
    for metric, text, field in _QUEUE_GAUGES:
        _family(lines, metric, text)
        lines.extend(f'{metric}{{name="{name}"}} {getattr(row, field)}' for name, row in names)
    _dead_letters(lines, observed)
    _outgoing(lines, observed, now_s)
    _family(lines, PREFIX + "stream_receipts_owed", "Streams whose receipt is due to their sender")
    lines.append(f"{PREFIX}stream_receipts_owed {observed.receipts_owed}")
    _family(lines, PREFIX + "db_pool_size", "Connections each process's database pool keeps")
    lines.append(f"{PREFIX}db_pool_size {pool_size}")
    lines.append("")
    return "\n".join(lines).encode()


_QUEUE_GAUGES = (
    (PREFIX + "messages_in_queue", "Messages in the queue (MSMQ Queue\\Messages in Queue)", "messages"),
    (PREFIX + "bytes_in_queue", "Body bytes in the queue (MSMQ Queue\\Bytes in Queue)", "bytes"),
    (
        PREFIX + "messages_in_journal_queue",
        "Messages in the queue's journal (MSMQ Queue\\Messages in Journal Queue)",
        "journal_messages",
    ),
    (
        PREFIX + "bytes_in_journal_queue",
        "Body bytes in the queue's journal (MSMQ Queue\\Bytes in Journal Queue)",
        "journal_bytes",
    ),
)


def _dead_letters(lines: list[str], observed: Observation) -> None:
    metric = PREFIX + "dead_letters"
    _family(lines, metric, "Messages in the dead-letter queues, by queue and message class")
    for row in observed.dead_letters:
        queue = f"system$;{row.queue.value}"
        lines.append(f'{metric}{{queue="{queue}",class="{_class_name(row.message_class)}"}} {row.messages}')


def _outgoing(lines: list[str], observed: Observation, now_s: float) -> None:
    rows = [(_label(QueuePath(QueueKind.OUTGOING, row.name).pathname), row) for row in observed.outgoing]
    _family(lines, PREFIX + "outgoing_messages", "Messages waiting in the outgoing queue")
    lines.extend(f'{PREFIX}outgoing_messages{{name="{name}"}} {row.messages}' for name, row in rows)
    _family(lines, PREFIX + "outgoing_bytes", "Body bytes waiting in the outgoing queue")
    lines.extend(f'{PREFIX}outgoing_bytes{{name="{name}"}} {row.bytes}' for name, row in rows)
    _family(lines, PREFIX + "outgoing_retries", "Failed attempts to deliver since the last delivery")
    lines.extend(f'{PREFIX}outgoing_retries{{name="{name}"}} {row.attempts}' for name, row in rows)
    _family(lines, PREFIX + "outgoing_oldest_message_age_seconds", "Age of the oldest message waiting")
    for name, row in rows:
        age = 0.0 if row.oldest_arrived_us is None else max(0.0, now_s - row.oldest_arrived_us / 1e6)
        lines.append(f'{PREFIX}outgoing_oldest_message_age_seconds{{name="{name}"}} {age:.3f}')
    delivered = PREFIX + "outgoing_delivered_total"
    lines.append(f"# HELP {delivered} Messages the destination took since the outgoing queue was created")
    lines.append(f"# TYPE {delivered} counter")
    lines.extend(f'{delivered}{{name="{name}"}} {row.delivered}' for name, row in rows)
    _family(
        lines, PREFIX + "outgoing_state", "1 for the outgoing queue's state (as GET /api/outgoing-queues)"
    )
    for name, row in rows:
        lines.extend(
            f'{PREFIX}outgoing_state{{name="{name}",state="{state}"}} {int(state == _state(row))}'
            for state in OUTGOING_STATES
        )


OUTGOING_STATES = ("connected", "idle", "paused", "waiting-to-connect")


def _state(row: OutgoingTotals) -> str:
    """qm.outbound.OutgoingQueue.state's rule on the totals read."""
    if row.paused:
        return "paused"
    if row.attempts:
        return "waiting-to-connect"
    return "connected" if row.messages else "idle"


def _family(lines: list[str], metric: str, text: str) -> None:
    lines.append(f"# HELP {metric} {_help(text)}")
    lines.append(f"# TYPE {metric} gauge")


def _class_name(value: int) -> str:
    try:
        return MessageClass(value).name
    except ValueError:
        return f"0x{value:04X}"


def _help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _label(value: str) -> str:
    """A label value as the text format escapes it (queue names are the senders' to choose)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
