"""What the gateway does once at start-up, beyond opening its store."""

from __future__ import annotations

import gc

import pytest

from app.main import create_app
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
