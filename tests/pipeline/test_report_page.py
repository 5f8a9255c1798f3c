"""The report page as an operator opens it: headless Chromium at 1400 px, nothing fetched,
nothing wider than the window, the summary and warnings first, every queue on one scale."""

from __future__ import annotations

import json
import os
from pathlib import Path

from pipeline.report_html import render
from tests.browser import Chromium
from tests.pipeline.report_sample import QUEUES, sample_document

SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "images" / "pipeline-report.png"
WIDTH = 1400


def test_the_sample_document_warns_what_an_operator_must_see() -> None:
    document = sample_document()
    warnings = "\n".join(document["warnings"])
    assert "archive run archive-20261126T000000Z is still 'claimed'" in warnings
    assert "redrive batch c90ced0d87064a0d81ee9cb1aa220ade failed: the quota" in warnings
    assert "dead-letter spike in private$\\billing" in warnings
    assert document["summary"]["resolution"] == "hour" and document["summary"]["queues"] == len(QUEUES)
    json.dumps(document)  # the machine-readable twin is plain JSON


def test_the_page_fits_1400_pixels_and_fetches_nothing(chromium: Chromium, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    page.write_text(render(sample_document()), encoding="utf-8")
    chromium.driver.set_window_size(WIDTH, 1000)
    chromium.open(page.as_uri())
    chromium.wait_for_text("h1", "Message history")
    assert "dead-letter spike in private$\\billing" in chromium.wait_for_text(".warnings", "Warnings (")
    widths = chromium.driver.execute_script(
        "return [document.documentElement.scrollWidth, document.documentElement.clientWidth,"
        " document.querySelectorAll('.card').length, document.body.scrollHeight]"
    )
    scroll_width, client_width, cards, height = widths
    assert scroll_width <= client_width, f"the page is {scroll_width} px wide in a {client_width} px window"
    assert cards == len(QUEUES)
    assert chromium.hosts_requested() == set()
    chromium.driver.set_window_size(WIDTH, height + 120)
    chromium.screenshot(
        SCREENSHOT if os.environ.get("UPDATE_SCREENSHOTS") == "1" else tmp_path / "report.png"
    )
