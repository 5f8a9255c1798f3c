"""A report document as `pipeline report` makes it, for two busy days of eight queues (hourly),
built without Spark: for the page's layout test and the screenshot in docs/pipeline.md."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

from pipeline import report_context

QUEUES = ("orders", "billing", "shipping", "invoices", "returns", "audit", "mail", "payments")
CLASSES = (("NACK_RECEIVE_TIMEOUT", "0xC002"), ("NACK_Q_EXCEED_QUOTA", "0x8003"), ("NACK_Q_PURGED", "0xC001"))
COUNTS = ("arrivals", "receives", "expiries", "dead_letters")
QUOTA_FAILURE = (
    "the quota of private$/billing is reached: 12 of 60 re-sent; the others stay in the dead-letter "
    "queues: fix this and run the redrive again"
)
Row = dict[str, Any]


def sample_document() -> dict[str, Any]:
    chance = random.Random(22)
    start = datetime(2026, 11, 25, tzinfo=UTC)
    hours = [start + timedelta(hours=offset) for offset in range(48)]
    timeline: list[Row] = []
    daily: dict[tuple[str, str], Row] = {}
    per_class: dict[tuple[str, str, str], int] = {}
    for index, name in enumerate(QUEUES):
        queue = f"private$\\{name}"
        for hour in hours:
            busy = 200 + 150 * (8 <= hour.hour <= 18) - index * 20
            arrivals = max(0, int(chance.gauss(busy, busy / 8)))
            dead = chance.randint(0, 3) + (60 if name == "billing" and hour == hours[-1] else 0)
            period = hour.strftime("%Y-%m-%d %H:00")
            row = {
                "queue": queue,
                "period": period,
                "arrivals": arrivals,
                "receives": max(0, arrivals - dead - 3),
            }
            row |= {"expiries": min(dead, chance.randint(0, 2)), "dead_letters": dead}
            timeline.append(row)
            day = daily.setdefault((queue, hour.strftime("%Y-%m-%d")), dict.fromkeys(COUNTS, 0))
            for count in COUNTS:
                day[count] += row[count]
            for number, (class_name, class_hex) in enumerate(CLASSES):
                share = dead if number == (1 if name == "billing" else 0) else chance.randint(0, 1)
                key = (period, class_name, class_hex)
                per_class[key] = per_class.get(key, 0) + share
    tables: dict[str, list[Row]] = {
        "daily": [{"queue": queue, "day": day, **values} for (queue, day), values in sorted(daily.items())],
        "timeline": timeline,
        "dead_letter_classes_over_time": [
            {"period": period, "class_name": name, "class_hex": code, "dead_letters": count}
            for (period, name, code), count in sorted(per_class.items())
            if count
        ],
        "latency": [_latency(index, name) for index, name in enumerate(QUEUES)],
        "top_dead_letter_sources": [
            {"value": "5f2c8a4e-8d1b-4c55-9d7a-0e4b3b1f9a21", "dead_letters": 1_204},
            {"value": "a1e0c0de-0000-4000-8000-00000000beef", "dead_letters": 96},
        ],
        "top_dead_letter_labels": [
            {"value": "invoice #", "dead_letters": 1_100},
            {"value": "order # for customer #", "dead_letters": 200},
        ],
    }
    operations = report_context.Operations(
        archive_runs=[
            _run("archive-20261124T000000Z", "deleted", 153_020, "2026-11-24T02:16:40Z"),
            _run("archive-20261126T000000Z", "claimed", None, None),
        ],
        redrive_batches=[
            _batch("7f89db67e06f457396fe75abab5d3971", "applied", 412, 412, None),
            _batch("c90ced0d87064a0d81ee9cb1aa220ade", "failed", 60, 12, QUOTA_FAILURE),
        ],
        redriven_per_day=[{"day": "2026-11-26", "redriven": 424}],
        now_us=int(datetime(2026, 11, 27, 6, tzinfo=UTC).timestamp() * 1_000_000),
    )
    first, last = hours[0], hours[-1] + timedelta(minutes=59)
    summary = report_context.summary(tables, {"live": 61_204, "archive": 153_020}, first, last, "hour")
    summary["generated"] = "2026-11-27T06:00:00Z"
    return {
        "summary": summary,
        "warnings": report_context.warnings(tables, operations),
        **tables,
        **operations.tables(),
    }


def _latency(index: int, name: str) -> Row:
    found: Row = {"queue": f"private$\\{name}"}
    for prefix, values in (
        ("sent_to_arrived_ms", (2.1 + index, 8.4 + index, 41.0)),
        ("arrived_to_received_ms", (120.0 * (index + 1), 900.5, 15_300.0)),
        ("ttbr_left_at_receive_s", (3_480.0, 3_590.0, 3_599.0)),
    ):
        found |= {
            f"{prefix}_{label}": value for label, value in zip(("p50", "p90", "p99"), values, strict=True)
        }
    return found


def _run(run_id: str, status: str, rows: int | None, finished: str | None) -> Row:
    day = run_id[8:12] + "-" + run_id[12:14] + "-" + run_id[14:16]
    started = f"{day}T02:15:00Z"
    return {"run_id": run_id, "status": status, "cutoff": "30 days before", "rows": rows} | {
        "started": started,
        "finished": finished,
        "_started_us": int(datetime.fromisoformat(started).timestamp() * 1_000_000),
    }


def _batch(batch_id: str, status: str, staged: int, resent: int, error: str | None) -> Row:
    return {"batch_id": batch_id, "status": status, "staged": staged, "resent": resent, "skipped": 0} | {
        "error": error,
        "staged_at": "2026-11-26T16:40:00Z",
        "_staged_us": int(datetime(2026, 11, 26, 16, 40, tzinfo=UTC).timestamp() * 1_000_000),
    }
