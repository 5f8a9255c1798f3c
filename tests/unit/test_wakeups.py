"""In-process wake-ups: one taker per message, every other watcher on every change, and a
wake-up a taker did not act on handed to the next (qm.wakeups)."""

from __future__ import annotations

import asyncio

import pytest

from qm.wakeups import Watch
from storage.pg_wakeups import parse_payload
from storage.wakeups import LocalWakeUps

pytestmark = pytest.mark.anyio

QUEUE = 7
OTHER = 8


async def _woken(watch: Watch) -> bool:
    """Whether the watch has been woken: a wait of no time returns at once either way."""
    return await watch.wait(0)


async def test_one_message_wakes_the_oldest_taker_and_every_other_watcher() -> None:
    wakeups = LocalWakeUps(poll_interval=60)
    first, second = wakeups.watch(QUEUE, takes=True), wakeups.watch(QUEUE, takes=True)
    peeker = wakeups.watch(QUEUE)
    elsewhere = wakeups.watch(OTHER, takes=True)
    wakeups.signal([QUEUE])
    assert [await _woken(w) for w in (first, second, peeker, elsewhere)] == [True, False, True, False]


async def test_each_message_wakes_one_more_taker() -> None:
    wakeups = LocalWakeUps(poll_interval=60)
    takers = [wakeups.watch(QUEUE, takes=True) for _ in range(4)]
    wakeups.signal([QUEUE, OTHER, QUEUE, QUEUE])
    assert [await _woken(w) for w in takers] == [True, True, True, False]


async def test_a_taker_closed_without_acting_on_its_wake_up_passes_it_on() -> None:
    wakeups = LocalWakeUps(poll_interval=60)
    gone, next_in_line = wakeups.watch(QUEUE, takes=True), wakeups.watch(QUEUE, takes=True)
    wakeups.signal([QUEUE])
    gone.close()  # woken, but its owner stopped before waiting (it found a message already)
    assert await _woken(next_in_line)


async def test_a_taker_that_waited_for_its_wake_up_keeps_it() -> None:
    wakeups = LocalWakeUps(poll_interval=60)
    acted, next_in_line = wakeups.watch(QUEUE, takes=True), wakeups.watch(QUEUE, takes=True)
    wakeups.signal([QUEUE])
    assert await acted.wait(60)
    acted.close()
    assert not await _woken(next_in_line)


async def test_a_woken_taker_cancelled_before_it_runs_hands_the_wake_up_on() -> None:
    wakeups = LocalWakeUps(poll_interval=60)
    first, second = wakeups.watch(QUEUE, takes=True), wakeups.watch(QUEUE, takes=True)
    waiting = asyncio.ensure_future(first.wait(60))
    await asyncio.sleep(0)  # one turn of the loop: it waits
    wakeups.signal([QUEUE])
    waiting.cancel()  # in the same turn: it never sees its wake-up
    with pytest.raises(asyncio.CancelledError):
        await waiting
    first.close()
    assert await _woken(second)


async def test_a_change_from_another_process_wakes_every_taker() -> None:
    wakeups = LocalWakeUps(poll_interval=60)
    takers = [wakeups.watch(QUEUE, takes=True) for _ in range(3)]
    wakeups.signal_all([QUEUE])
    assert [await _woken(w) for w in takers] == [True, True, True]


async def test_closed_watches_are_forgotten() -> None:
    wakeups = LocalWakeUps(poll_interval=60)
    for _ in range(1000):
        wakeups.watch(QUEUE, takes=True).close()
    late = wakeups.watch(QUEUE, takes=True)
    wakeups.signal([QUEUE])
    assert await _woken(late)


def test_a_notification_carries_a_count_per_queue_and_tolerates_other_forms() -> None:
    assert parse_payload("7:3,9") == ([7, 7, 7], [9])
    assert parse_payload("12:1,x,:4,5:y,") == ([12], [])
    assert parse_payload("3:99999999") == ([3] * 10_000, [])
