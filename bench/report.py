"""The table on stdout and the issue's targets as ratios of figures from the same run."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bench.auth_bench import auth_targets
from bench.metrics_bench import SCRAPED_E2E

Row = dict[str, Any]
COLUMNS = (
    ("store", 10),
    ("scenario", 34),
    ("concurrency", 6),
    ("messages", 8),
    ("per_s", 9),
    ("p50_ms", 7),
    ("p99_ms", 7),
    ("rss_mb", 7),
    ("gateway_cpu_s", 8),
    ("gateway_cpu_ms_per_msg", 9),
    ("client_cpu_s", 8),
    ("seconds", 7),
    ("ratio", 6),
)
HEADINGS = {
    "concurrency": "conc",
    "per_s": "msg/s",
    "gateway_cpu_s": "gw cpu",
    "gateway_cpu_ms_per_msg": "gw ms/msg",
    "client_cpu_s": "cl cpu",
    "seconds": "s",
}


def table(report: dict[str, Any]) -> str:
    lines = [
        f"msmq-gateway bench ({report['profile']}), {report['started']}, {report['machine']['cores']} cores, "
        f"{report['machine']['cpu']}, load {report['machine']['load_average_at_start'][0]:.1f}",
        "  ".join(HEADINGS.get(name, name).ljust(width) for name, width in COLUMNS),
    ]
    for row in report["rows"]:
        cells = [_cell(row.get(name)).ljust(width) for name, width in COLUMNS]
        if "claim_per_s" in row:
            cells[-1] = f"claims {row['claim_per_s']}/s"
        lines.append("  ".join(cells).rstrip())
    lines.append("")
    lines.append("targets (ratios from this run):")
    for target in report["targets"]:
        verdict = "met" if target["met"] else "NOT met"
        lines.append(f"  {target['store']:<10} {target['target']:<58} {target['value']:>9}  {verdict}")
    return "\n".join(lines)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:,.1f}" if value >= 100 else f"{value:g}"
    return str(value)


def _find(rows: list[Row], store: str, scenario: str, concurrency: Any = None) -> Row | None:
    for row in rows:
        if row["store"] == store and row["scenario"] == scenario:
            if concurrency is None or row["concurrency"] == concurrency:
                return row
    return None


def _ratio(numerator: Row | None, denominator: Row | None, key: str = "per_s") -> float | None:
    if numerator is None or denominator is None or not denominator.get(key):
        return None
    return round(float(numerator[key]) / float(denominator[key]), 2)


def targets(rows: list[Row]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []

    def add(store: str, target: str, value: float | None, met: bool) -> None:
        if value is not None:
            found.append({"store": store, "target": target, "value": value, "met": met})

    for row in rows:
        if row["scenario"].startswith("pipeline archive ") and "ratio" in row:
            target = f"{row['scenario']} / baseline adbc+pyarrow >= 0.5"
            add(row["store"], target, row["ratio"], row["ratio"] >= 0.5)
    peer = _find(rows, "rabbitmq", "end to end")
    for store in ("sqlite", "postgresql"):
        for suffix in ("", ", 2 workers"):
            srmp = _find(rows, store, "SRMP send recoverable" + suffix, 64)
            single = _ratio(srmp, _find(rows, store, "ceiling 1/commit"))
            name = f"SRMP recoverable c64{suffix}"
            add(store, f"{name} / ceiling 1 per commit >= 5", single, (single or 0) >= 5)
            batched = _ratio(srmp, _find(rows, store, "ceiling 100/commit"))
            add(store, f"{name} / ceiling 100 per commit >= 0.5", batched, (batched or 0) >= 0.5)
        for suffix in ("", ", 2 workers"):
            versus = _ratio(_find(rows, store, "end to end" + suffix), peer)
            add(store, f"end to end{suffix} / RabbitMQ end to end >= 1", versus, (versus or 0) >= 1)
            latency = next(
                (row for row in rows
                 if row["store"] == store and row["scenario"].startswith("latency")
                 and row["scenario"].endswith(suffix or "/s")),
                None,
            )  # fmt: skip
            if latency is not None:
                add(
                    store,
                    f"latency{suffix} p99 ms at 500 msg/s < 10 (PostgreSQL)",
                    latency["p99_ms"],
                    latency["p99_ms"] < 10 and not latency.get("skipped"),
                )
        for target, ratio in auth_targets(rows, store):
            add(store, target, ratio, (ratio or 0) >= 0.95)
        _metrics_targets(rows, store, add)
        depths = sorted(
            {int(row["scenario"].split()[1].replace(",", "")) for row in rows
             if row["store"] == store and row["scenario"].startswith("depth ")}
        )  # fmt: skip
        if len(depths) > 1:
            deepest, empty = f"depth {depths[-1]:,}", f"depth {depths[0]:,}"
            for action in ("send", "receive"):
                ratio = _ratio(
                    _find(rows, store, f"{deepest} {action}"), _find(rows, store, f"{empty} {action}")
                )
                add(
                    store, f"{action} at depth {depths[-1]:,} / at depth 0 >= 0.8", ratio, (ratio or 0) >= 0.8
                )
            rss = _ratio(
                _find(rows, store, f"{deepest} receive"), _find(rows, store, f"{empty} receive"), "rss_mb"
            )
            add(store, f"peak RSS at depth {depths[-1]:,} / at depth 0 (about 1)", rss, (rss or 9) <= 1.2)
    return found


def _metrics_targets(
    rows: list[Row], store: str, add: Callable[[str, str, float | None, bool], None]
) -> None:
    """bench/metrics_bench.py: the scrape's cost in the same run, and one scrape at 10,000 queues."""
    runs = [_find(rows, store, name) for name in ("end to end", "end to end (2)")]
    scraped = [_find(rows, store, f"{SCRAPED_E2E}{suffix}") for suffix in ("", " (2)")]
    if all(runs) and all(scraped):
        ratio = sum(row["per_s"] for row in scraped if row) / max(
            sum(row["per_s"] for row in runs if row), 1e-9
        )
        add(
            store,
            "end to end with /metrics every 1 s and a console / without >= 0.95",
            round(ratio, 3),
            ratio >= 0.95,
        )
    few = _find(rows, store, "/metrics scrape, before seeding")
    if few is not None:
        share = few["gateway_cpu_ms_per_scrape"] / 1000
        add(store, "/metrics every 1 s: share of one core the scrapes take < 0.05", share, share < 0.05)
    many = _find(rows, store, "/metrics scrape, 10,000 queues more")
    if many is not None:
        add(
            store,
            "/metrics scrape p99 ms with 10,000 queues more < 1000",
            many["p99_ms"],
            many["p99_ms"] < 1000,
        )


def markdown(report: dict[str, Any]) -> str:
    """The table as Markdown, for the README: `python -m bench.report bench/results/<run>.json`."""
    names = [name for name, _ in COLUMNS]
    lines = [
        "| " + " | ".join(HEADINGS.get(name, name) for name in names) + " |",
        "|" + "---|" * len(names),
    ]
    for row in report["rows"]:
        cells = [_cell(row.get(name)) for name in names]
        if "claim_per_s" in row:
            cells[-1] = f"claims {row['claim_per_s']:,.0f}/s"
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", "| store | target | value | |", "|---|---|---|---|"]
    for target in report["targets"]:
        verdict = "met" if target["met"] else "**not met**"
        lines.append(f"| {target['store']} | {target['target']} | {target['value']} | {verdict} |")
    return "\n".join(lines)


if __name__ == "__main__":
    import json
    import sys
    from pathlib import Path

    print(markdown(json.loads(Path(sys.argv[1]).read_text())))
