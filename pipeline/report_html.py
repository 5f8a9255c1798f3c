"""The report as one self-contained HTML page: inline CSS and SVG, no scripts, no fetches."""

from __future__ import annotations

from collections import defaultdict
from html import escape
from typing import Any

Tables = dict[str, list[dict[str, Any]]]
SERIES = (("arrivals", "#3b6ea5"), ("receives", "#5a9e5a"), ("dead_letters", "#c0504d"))
STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 2em; }
table { border-collapse: collapse; font-size: .9em; }
td, th { border: 1px solid #ccc; padding: .25em .6em; text-align: right; }
td:first-child, th:first-child { text-align: left; }
.legend span { display: inline-block; margin-right: 1.5em; }
.swatch { display: inline-block; width: .9em; height: .9em; margin-right: .3em; vertical-align: middle; }
"""


def render(tables: Tables) -> str:
    sections = [
        "<h1>Message history report</h1>",
        _legend(),
        *(_queue_chart(queue, days) for queue, days in _by_queue(tables["daily"]).items()),
        "<h2>Per queue and day</h2>",
        _table(tables["daily"]),
        "<h2>Dead letters by class</h2>",
        _table(tables["dead_letters_by_class"]),
        "<h2>Latency percentiles</h2>",
        _table(tables["latency"]),
        "<h2>Top dead-letter sources (machine GUID)</h2>",
        _table(tables["top_dead_letter_sources"]),
        "<h2>Top dead-letter labels</h2>",
        _table(tables["top_dead_letter_labels"]),
    ]
    body = "\n".join(sections)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>Message history report</title><style>{STYLE}</style></head>\n"
        f"<body>\n{body}\n</body></html>\n"
    )


def _by_queue(daily: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in daily:
        grouped[str(row["queue"])].append(row)
    return dict(grouped)


def _legend() -> str:
    items = "".join(
        f'<span><i class="swatch" style="background:{color}"></i>{name.replace("_", " ")}</span>'
        for name, color in SERIES
    )
    return f'<p class="legend">{items}</p>'


def _queue_chart(queue: str, days: list[dict[str, Any]]) -> str:
    """Grouped bars per day: arrivals, receives, dead letters."""
    width, height, gap = 18, 160, 14
    top = max([int(day[name]) for day in days for name, _ in SERIES] + [1])
    bars: list[str] = []
    x = 40
    for day in days:
        for name, color in SERIES:
            value = int(day[name])
            bar = round(value / top * (height - 20))
            bars.append(
                f'<rect x="{x}" y="{height - bar}" width="{width}" height="{bar}" fill="{color}">'
                f"<title>{escape(str(day['day']))} {name}: {value}</title></rect>"
            )
            x += width
        bars.append(
            f'<text x="{x - width * 2}" y="{height + 14}" font-size="10" text-anchor="middle">'
            f"{escape(str(day['day']))}</text>"
        )
        x += gap
    axis = (
        f'<text x="0" y="12" font-size="10">{top}</text>'
        f'<line x1="38" y1="{height}" x2="{x}" y2="{height}" stroke="#888"/>'
    )
    size = f'width="{x + 20}" height="{height + 24}"'
    svg = f'<svg xmlns="http://www.w3.org/2000/svg" {size}>{axis}{"".join(bars)}</svg>'
    return f"<h2>{escape(queue)}</h2>\n{svg}"


def _table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "<p>None.</p>"
    header = "".join(f"<th>{escape(name)}</th>" for name in rows[0])
    body = "".join(
        "<tr>" + "".join(f"<td>{_cell(value)}</td>" for value in row.values()) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{header}</tr></thead><tbody>{body}</tbody></table>"


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.1f}"
    return escape(str(value))
