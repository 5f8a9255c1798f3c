"""Supervised background work: the TTBR sweeper, and releasing expired locks,
idle transactions and cursors. A failing pass is logged and retried, never fatal."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

from qm.manager import QueueManager

log = logging.getLogger(__name__)


async def supervise(name: str, one_pass: Callable[[], Awaitable[object]], interval_s: float) -> None:
    """Run `one_pass` every `interval_s` seconds until cancelled."""
    while True:
        await _logged(name, one_pass)
        await asyncio.sleep(interval_s)


async def supervise_on_demand(
    name: str, one_pass: Callable[[], Awaitable[object]], interval_s: float, work: asyncio.Event
) -> None:
    """Like `supervise`, but `work` being set starts the next pass at once."""
    while True:
        work.clear()
        await _logged(name, one_pass)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(work.wait(), interval_s)


async def _logged(name: str, one_pass: Callable[[], Awaitable[object]]) -> None:
    try:
        await one_pass()
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("%s pass failed; retrying", name)


async def release_pass(manager: QueueManager) -> None:
    report = await manager.release_expired()
    if report.locks_released or report.transactions_aborted:
        log.info(
            "released %d expired locks, aborted %d idle transactions",
            report.locks_released,
            report.transactions_aborted,
        )


async def sweep_pass(manager: QueueManager) -> None:
    expired = await manager.expire_due()
    if expired:
        log.info("expired %d messages past their time to be received", expired)


def background_tasks(
    manager: QueueManager, release_interval_s: float, sweep_interval_s: float
) -> list[asyncio.Task[None]]:
    return [
        asyncio.create_task(
            supervise("housekeeping", lambda: release_pass(manager), release_interval_s), name="housekeeping"
        ),
        asyncio.create_task(
            supervise("sweeper", lambda: sweep_pass(manager), sweep_interval_s), name="sweeper"
        ),
    ]
