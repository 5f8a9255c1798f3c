"""The report as one self-contained page (inline CSS and SVG, no scripts, nothing fetched),
read top-down in a minute: the summary and the warnings first, then every queue drawn small
on one scale (so queues compare at a glance), dead letters by class over time, latency,
redrives and archive runs. Numbers are written out, never only in tooltips."""

from __future__ import annotations

from collections import defaultdict
from html import escape
from typing import Any

Document = dict[str, Any]
Rows = list[dict[str, Any]]
SERIES = (("arrivals", "#3b6ea5"), ("receives", "#5a9e5a"), ("dead_letters", "#c0504d"))
CLASS_COLOURS = ("#c0504d", "#e8a33d", "#8064a2", "#4bacc6", "#9bbb59", "#7f7f7f", "#d16ba5", "#2c7fb8")
CARD_W, CARD_H = 300, 80
STYLE = """
* { box-sizing: border-box; }
body { font-family: system-ui, sans-serif; margin: 0 auto; padding: 16px 20px; max-width: 1400px;
  color: #222; }
h1 { font-size: 1.4em; margin: 0 0 .2em; } h2 { font-size: 1.05em; margin: 1.4em 0 .5em; }
.meta { color: #555; font-size: .9em; margin: 0 0 .8em; }
.tiles { display: flex; gap: 12px; flex-wrap: wrap; }
.tile { border: 1px solid #ddd; border-radius: 6px; padding: 8px 14px; min-width: 150px; }
.tile b { display: block; font-size: 1.6em; font-variant-numeric: tabular-nums; }
.tile span { color: #555; font-size: .85em; }
.warnings { border: 2px solid #c0504d; background: #fdf1f0; border-radius: 6px; padding: 8px 14px;
  margin-top: 14px; }
.warnings h2 { margin: 0 0 .3em; color: #a33; } .warnings ul { margin: 0; padding-left: 1.2em; }
.ok { border: 1px solid #5a9e5a; background: #f1f8f1; border-radius: 6px; padding: 6px 14px;
  margin-top: 14px; }
.grid { display: grid; grid-template-columns: repeat(4, minmax(0, 1fr)); gap: 10px; }
.card { border: 1px solid #e3e3e3; border-radius: 6px; padding: 6px 8px; min-width: 0; }
.card h3 { font-size: .85em; margin: 0; overflow-wrap: anywhere; }
.card p { font-size: .78em; margin: 2px 0 4px; color: #444; font-variant-numeric: tabular-nums; }
.legend { font-size: .85em; } .legend span { margin-right: 1.2em; white-space: nowrap; }
.swatch { display: inline-block; width: .8em; height: .8em; margin-right: .3em; vertical-align: middle; }
.columns { display: grid; grid-template-columns: 1fr 1fr; gap: 20px; }
table { border-collapse: collapse; font-size: .85em; width: 100%; }
td, th { border-bottom: 1px solid #e3e3e3; padding: 3px 8px; text-align: right;
  font-variant-numeric: tabular-nums; }
td:first-child, th:first-child { text-align: left; overflow-wrap: anywhere; }
th { background: #f6f6f6; }
svg { display: block; max-width: 100%; }
"""


def render(document: Document) -> str:
    summary = document["summary"]
    per = summary["resolution"]
    sections = [
        _header(summary),
        _warnings(document["warnings"]),
        f"<h2>Every queue per {per}, on one scale</h2>",
        _legend([(name.replace("_", " "), colour) for name, colour in SERIES]),
        _small_multiples(document["timeline"]),
        f"<h2>Dead letters by class, every queue, per {per}</h2>",
        _classes_over_time(document["dead_letter_classes_over_time"]),
        "<h2>Latency per queue (p50 / p90 / p99)</h2>",
        _latency(document["latency"]),
        '<div class="columns"><div>',
        "<h2>Redrives</h2>",
        _table(
            document["redrive_batches"], ("batch_id", "status", "staged", "resent", "skipped", "staged_at")
        ),
        _table(document["redriven_per_day"], ("day", "redriven")),
        "</div><div>",
        "<h2>Archive runs</h2>",
        _table(document["archive_runs"], ("run_id", "status", "cutoff", "rows", "finished")),
        "</div></div>",
        '<div class="columns"><div>',
        "<h2>Top dead-letter sources (sending machine)</h2>",
        _table(document["top_dead_letter_sources"], ("value", "dead_letters")),
        "</div><div>",
        "<h2>Top dead-letter labels (numbers shown as #)</h2>",
        _table(document["top_dead_letter_labels"], ("value", "dead_letters")),
        "</div></div>",
        "<h2>Totals per queue</h2>",
        _table(_per_queue(document["daily"]), ("queue", "arrivals", "receives", "expiries", "dead_letters")),
    ]
    body = "\n".join(sections)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>Message history report</title><style>{STYLE}</style></head>\n"
        f"<body>\n{body}\n</body></html>\n"
    )


def _number(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return escape(str(value))


def _header(summary: dict[str, Any]) -> str:
    totals = summary["totals"]
    period = (
        f"{_day_time(summary['first'])} to {_day_time(summary['last'])}"
        if summary["first"]
        else "no messages"
    )
    meta = (
        f"{period}, per {summary['resolution']} · {summary['queues']:,} queues · "
        f"{summary['live_rows']:,} rows live in the store, {summary['archived_rows']:,} archived · "
        f"generated {_day_time(summary['generated'])} UTC"
    )
    tiles = "".join(
        f'<div class="tile"><b>{totals[name]:,}</b><span>{label}</span></div>'
        for name, label in (
            ("arrivals", "arrivals"),
            ("receives", "receives (journaled queues)"),
            ("expiries", "expiries"),
            ("dead_letters", "dead letters"),
        )
    )
    return f'<h1>Message history</h1>\n<p class="meta">{escape(meta)}</p>\n<div class="tiles">{tiles}</div>'


def _day_time(iso: str | None) -> str:
    return "" if iso is None else iso.replace("T", " ")[:16]


def _warnings(found: list[str]) -> str:
    if not found:
        calm = "No warnings: no stale archive runs or redrive batches, no staging left, no spike."
        return f'<p class="ok">{calm}</p>'
    items = "".join(f"<li>{escape(text)}</li>" for text in found)
    return f'<div class="warnings"><h2>Warnings ({len(found)})</h2><ul>{items}</ul></div>'


def _legend(entries: list[tuple[str, str]]) -> str:
    items = "".join(
        f'<span><i class="swatch" style="background:{colour}"></i>{escape(name)}</span>'
        for name, colour in entries
    )
    return f'<p class="legend">{items}</p>'


def _small_multiples(timeline: Rows) -> str:
    """One card per queue, the same periods and the same y scale on every card."""
    if not timeline:
        return "<p>No messages.</p>"
    periods = sorted({str(row["period"]) for row in timeline})
    top = max([int(row[name]) for row in timeline for name, _ in SERIES] + [1])
    by_queue: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    for row in timeline:
        by_queue[str(row["queue"])][str(row["period"])] = row
    cards = []
    for queue, points in sorted(
        by_queue.items(), key=lambda item: -sum(int(r["dead_letters"]) for r in item[1].values())
    ):
        totals = {name: sum(int(row[name]) for row in points.values()) for name, _ in SERIES}
        numbers = " · ".join(f"{name.replace('_', ' ')} {totals[name]:,}" for name, _ in SERIES)
        cards.append(
            f'<div class="card"><h3>{escape(queue)}</h3><p>{numbers}</p>'
            f"{_sparkline(points, periods, top)}</div>"
        )
    axis = f'<p class="meta">Scale: 0 to {top:,} per card · {escape(periods[0])} to {escape(periods[-1])}</p>'
    return f'{axis}<div class="grid">{"".join(cards)}</div>'


def _sparkline(points: dict[str, dict[str, Any]], periods: list[str], top: int) -> str:
    step = CARD_W / max(len(periods), 1)
    shapes = []
    for name, colour in SERIES:
        values = [int(points.get(period, {}).get(name, 0)) for period in periods]
        if name == "dead_letters":  # bars: a few dead letters must show, not vanish in a line
            for index, value in enumerate(values):
                if value:
                    height = max(1.5, value / top * (CARD_H - 4))
                    x = index * step + step * 0.2
                    shapes.append(
                        f'<rect x="{x:.1f}" y="{CARD_H - height:.1f}" width="{max(step * 0.6, 1):.1f}" '
                        f'height="{height:.1f}" fill="{colour}" opacity=".8"/>'
                    )
            continue
        coordinates = " ".join(
            f"{index * step + step / 2:.1f},{CARD_H - value / top * (CARD_H - 4):.1f}"
            for index, value in enumerate(values)
        )
        # arrivals wide and pale underneath: receives, close to them on a healthy queue, stay visible
        look = 'stroke-width="4" opacity=".45"' if name == "arrivals" else 'stroke-width="1.5"'
        shapes.append(f'<polyline points="{coordinates}" fill="none" stroke="{colour}" {look}/>')
    frame = f'<line x1="0" y1="{CARD_H}" x2="{CARD_W}" y2="{CARD_H}" stroke="#bbb"/>'
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {CARD_W} {CARD_H + 1}" '
        f'width="100%" height="{CARD_H + 1}" preserveAspectRatio="none">{frame}{"".join(shapes)}</svg>'
    )


def _classes_over_time(rows: Rows) -> str:
    """Stacked bars: one per period, a colour per class; the totals per class in the legend."""
    if not rows:
        return "<p>No dead letters.</p>"
    names = sorted({f"{row['class_name']} ({row['class_hex']})" for row in rows})
    colours = {name: CLASS_COLOURS[index % len(CLASS_COLOURS)] for index, name in enumerate(names)}
    per_period: dict[str, dict[str, int]] = defaultdict(dict)
    totals: dict[str, int] = defaultdict(int)
    for row in rows:
        name = f"{row['class_name']} ({row['class_hex']})"
        per_period[str(row["period"])][name] = int(row["dead_letters"])
        totals[name] += int(row["dead_letters"])
    periods = sorted(per_period)
    top = max(sum(values.values()) for values in per_period.values())
    width, height = 1340, 160
    step = width / len(periods)
    shapes = []
    for index, period in enumerate(periods):
        y = float(height)
        for name in names:
            value = per_period[period].get(name, 0)
            if value:
                bar = value / top * (height - 10)
                y -= bar
                shapes.append(
                    f'<rect x="{index * step + step * 0.1:.1f}" y="{y:.1f}" width="{max(step * 0.8, 1):.1f}" '
                    f'height="{bar:.1f}" fill="{colours[name]}">'
                    f"<title>{escape(period)} {escape(name)}: {value:,}</title></rect>"
                )
    labels = (
        f'<text x="0" y="{height + 14}" font-size="11">{escape(periods[0])}</text>'
        f'<text x="{width}" y="{height + 14}" font-size="11" text-anchor="end">{escape(periods[-1])}</text>'
        f'<text x="2" y="10" font-size="11">{top:,}</text>'
    )
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height + 18}" width="100%" '
        f'height="{height + 18}">{"".join(shapes)}{labels}</svg>'
    )
    legend = _legend([(f"{name}: {totals[name]:,}", colours[name]) for name in names])
    return legend + svg


def _latency(rows: Rows) -> str:
    if not rows:
        return "<p>None.</p>"
    groups = (
        ("sent → arrived (ms)", "sent_to_arrived_ms"),
        ("arrived → received (ms)", "arrived_to_received_ms"),
        ("TTBR left at receive (s)", "ttbr_left_at_receive_s"),
    )
    header = "<tr><th>queue</th>" + "".join(f"<th>{escape(label)}</th>" for label, _ in groups) + "</tr>"
    body = "".join(
        f"<tr><td>{escape(str(row['queue']))}</td>"
        + "".join(
            "<td>" + " / ".join(_number(row.get(f"{prefix}_{p}")) for p in ("p50", "p90", "p99")) + "</td>"
            for _, prefix in groups
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><thead>{header}</thead><tbody>{body}</tbody></table>"


def _per_queue(daily: Rows) -> Rows:
    totals: dict[str, dict[str, Any]] = {}
    for row in daily:
        found = totals.setdefault(
            str(row["queue"]),
            {"queue": row["queue"], "arrivals": 0, "receives": 0, "expiries": 0, "dead_letters": 0},
        )
        for name in ("arrivals", "receives", "expiries", "dead_letters"):
            found[name] += int(row[name])
    return sorted(totals.values(), key=lambda row: (-row["dead_letters"], str(row["queue"])))


def _table(rows: Rows, columns: tuple[str, ...]) -> str:
    if not rows:
        return "<p>None.</p>"
    header = "".join(f"<th>{escape(name.replace('_', ' '))}</th>" for name in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{_number(row.get(name))}</td>" for name in columns) + "</tr>" for row in rows
    )
    return f"<table><thead><tr>{header}</tr></thead><tbody>{body}</tbody></table>"
