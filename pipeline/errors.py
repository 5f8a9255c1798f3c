"""The pipeline's one error: a clear message, exit status 2, and nothing changed."""

from __future__ import annotations


class PipelineError(Exception):
    """Bad input or an unusable store or archive, found before any change (or rolled back)."""


class InjectedFailure(RuntimeError):
    """Raised by `--fail-after STEP`: how the tests crash a job at each step."""
