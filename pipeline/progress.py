"""Progress lines (stage, rows, seconds) on stderr; the one-line summary goes to stdout."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from pipeline.errors import InjectedFailure

ARCHIVE_STEPS = ("claim", "extract", "write", "verify", "stage-ids", "delete")
"""Where `--fail-after` can crash an archive run; `delete` fails inside the delete transaction."""
REDRIVE_STEPS = ("select", "manifest", "stage")
"""`stage` fails after the first chunk of staging rows, before the batch is marked `staged`."""
REPORT_STEPS = ("read", "aggregate")


class Progress:
    """Reports each stage of a job, and crashes the job after a named stage when asked to."""

    def __init__(self, job: str, fail_after: str | None = None, quiet: bool = False) -> None:
        self.job = job
        self.fail_after = fail_after
        self.quiet = quiet
        self._started = time.monotonic()

    def stage(self, name: str, detail: str = "") -> None:
        if not self.quiet:
            elapsed = time.monotonic() - self._started
            suffix = f": {detail}" if detail else ""
            print(f"{self.job}: [{elapsed:7.1f} s] {name}{suffix}", file=sys.stderr, flush=True)
        self.checkpoint(name)

    def ticker(self, name: str, every_s: float = 5.0) -> Callable[[int], None]:
        """A callback for a long stage: `name: N rows so far`, at most every `every_s`."""
        last = [time.monotonic()]

        def tick(rows: int) -> None:
            if time.monotonic() - last[0] >= every_s:
                last[0] = time.monotonic()
                self.stage(f"{name}", f"{rows} rows so far")

        return tick

    def checkpoint(self, name: str) -> None:
        """`--fail-after NAME` raises here: the tests' way to crash a job at each step."""
        if self.fail_after == name:
            raise InjectedFailure(f"{self.job}: injected failure after {name}")

    def elapsed(self) -> float:
        return time.monotonic() - self._started
