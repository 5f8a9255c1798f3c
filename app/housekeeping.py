"""Supervised background work: releasing expired locks, transactions and cursors."""

from __future__ import annotations

import asyncio
import logging

from qm.manager import QueueManager

log = logging.getLogger(__name__)


async def run_housekeeping(manager: QueueManager, interval_s: float) -> None:
    """Run until cancelled; a failing pass is logged and retried, never fatal."""
    while True:
        try:
            report = await manager.release_expired()
            if report.locks_released or report.transactions_aborted:
                log.info(
                    "released %d expired locks, aborted %d idle transactions",
                    report.locks_released,
                    report.transactions_aborted,
                )
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("housekeeping pass failed; retrying")
        await asyncio.sleep(interval_s)
