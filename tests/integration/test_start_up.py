"""What the gateway does once at start-up, beyond opening its store."""

from __future__ import annotations

import gc
import ssl

import pytest

from app.main import create_app
from app.outbound.client import outbound_verification
from app.settings import Settings
from qm.clock import SettableClock

pytestmark = pytest.mark.anyio


async def test_start_up_puts_its_long_lived_objects_out_of_the_collectors_reach(
    settings: Settings, clock: SettableClock
) -> None:
    gc.unfreeze()
    assert gc.get_freeze_count() == 0
    application = create_app(settings, clock)
    async with application.router.lifespan_context(application):
        # the libraries' and the app's own objects: a full collection no longer walks them
        assert gc.get_freeze_count() > 10_000


async def test_a_second_app_in_the_process_freezes_nothing_more(
    settings: Settings, clock: SettableClock
) -> None:
    # The tests start hundreds of apps in one process: freezing at each start put the garbage
    # of every app before out of the collector's reach for good (a worker passed 1 GB).
    gc.unfreeze()
    first = create_app(settings, clock)
    async with first.router.lifespan_context(first):
        frozen = gc.get_freeze_count()
    second = create_app(settings, clock)
    async with second.router.lifespan_context(second):
        assert gc.get_freeze_count() <= frozen  # (frozen objects freed by reference counting leave it)


def test_outbound_https_is_verified_by_one_context_per_process() -> None:
    # Loading the CA bundle took about 30 ms at every app start (its SRMP client).
    default = outbound_verification("")
    assert default is outbound_verification("")
    assert default.verify_mode is ssl.CERT_REQUIRED and default.check_hostname
