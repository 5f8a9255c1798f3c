"""The whole app through httpx's ASGITransport, its lifespan started, on each store."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from fastapi import FastAPI

from app.main import create_app
from app.settings import Settings
from qm.clock import SettableClock
from tests.integration.support import MAX_BODY_BYTES, MAX_WAIT_MS


@pytest.fixture
def settings(database_url: str) -> Settings:
    return Settings(
        database_url=database_url,
        max_body_bytes=MAX_BODY_BYTES,
        max_wait_ms=MAX_WAIT_MS,
        # Background passes would race the settable clock; tests release locks and
        # expire messages explicitly.
        housekeeping_interval_s=3600,
        sweep_interval_s=3600,
        # A waiting receive must be woken by the send itself, not found by a poll.
        wake_poll_interval_s=3600,
        # No background SRMP sending: the tests that need it run real gateway processes.
        srmp_send_interval_s=3600,
        # No background reads either (test_triggers_api.py turns the service on).
        triggers_enabled=False,
    )


@pytest.fixture
async def app(settings: Settings, clock: SettableClock) -> AsyncIterator[FastAPI]:
    """The application with its lifespan running (ASGITransport does not run it)."""
    application = create_app(settings, clock)
    async with application.router.lifespan_context(application):
        yield application


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
        yield http
