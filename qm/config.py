"""Queue-manager limits and timeouts, filled from the service settings."""

from __future__ import annotations

from dataclasses import dataclass

from qm.model import INFINITE

DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class ManagerConfig:
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    initial_quota_kb: int = INFINITE
    """Machine quota written the first time the store is opened; later changed over the API."""
    transaction_timeout_s: float = 60.0
    cursor_idle_timeout_s: float = 300.0
    default_lock_timeout_s: float = 30.0
    max_lock_timeout_s: float = 3600.0
