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


async def test_a_change_of_unknown_size_from_another_process_wakes_every_taker() -> None:
    wakeups = LocalWakeUps(poll_interval=60)
    takers = [wakeups.watch(QUEUE, takes=True) for _ in range(3)]
    wakeups.signal_from_elsewhere(QUEUE, None)
    assert [await _woken(w) for w in takers] == [True, True, True]


async def test_a_change_from_another_process_wakes_as_many_takers_as_it_counts() -> None:
    wakeups = LocalWakeUps(poll_interval=60)
    takers = [wakeups.watch(QUEUE, takes=True) for _ in range(3)]
    peeker = wakeups.watch(QUEUE)
    wakeups.signal_from_elsewhere(QUEUE, 0)
    assert await _woken(peeker)
    wakeups.signal_from_elsewhere(QUEUE, 2)
    assert [await _woken(w) for w in takers] == [True, True, False]


class Announced:
    """What a LocalWakeUps hands on for other processes: (queue, messages unclaimed here)."""

    def __init__(self) -> None:
        self.pairs: list[tuple[int, int]] = []

    def __call__(self, queue_id: int, messages: int) -> None:
        self.pairs.append((queue_id, messages))


async def test_messages_that_woke_no_taker_here_are_announced_and_every_queue_signalled_is() -> None:
    announced = Announced()
    wakeups = LocalWakeUps(poll_interval=60, unclaimed=announced)
    wakeups.watch(QUEUE, takes=True)
    wakeups.signal([QUEUE, QUEUE, QUEUE, OTHER])
    assert announced.pairs == [(QUEUE, 2), (OTHER, 1)]
    announced.pairs.clear()
    wakeups.watch(OTHER, takes=True)
    wakeups.signal([OTHER])
    assert announced.pairs == [(OTHER, 0)]  # claimed here, but the queue changed all the same


async def test_a_wake_up_handed_on_with_no_taker_left_here_is_announced() -> None:
    announced = Announced()
    wakeups = LocalWakeUps(poll_interval=60, unclaimed=announced)
    gone = wakeups.watch(QUEUE, takes=True)
    wakeups.signal([QUEUE])
    assert announced.pairs == [(QUEUE, 0)]
    gone.close()  # woken, but it never acted on it: nobody here is left to take the message
    assert announced.pairs == [(QUEUE, 0), (QUEUE, 1)]


async def test_a_wake_up_handed_to_a_taker_here_is_not_announced() -> None:
    announced = Announced()
    wakeups = LocalWakeUps(poll_interval=60, unclaimed=announced)
    wakeups.watch(QUEUE, takes=True)
    wakeups.pass_on(QUEUE)
    assert announced.pairs == []


async def test_changes_from_other_processes_are_never_announced_again() -> None:
    announced = Announced()
    wakeups = LocalWakeUps(poll_interval=60, unclaimed=announced)
    wakeups.signal_from_elsewhere(QUEUE, 3)
    wakeups.signal_from_elsewhere(OTHER, None)
    assert announced.pairs == []


async def test_closed_watches_are_forgotten() -> None:
    wakeups = LocalWakeUps(poll_interval=60)
    for _ in range(1000):
        wakeups.watch(QUEUE, takes=True).close()
    late = wakeups.watch(QUEUE, takes=True)
    wakeups.signal([QUEUE])
    assert await _woken(late)


def test_a_notification_carries_a_count_per_queue_and_tolerates_other_forms() -> None:
    assert parse_payload("7:3,8:0,9") == [(7, 3), (8, 0), (9, None)]
    assert parse_payload("12:1,x,:4,5:y,") == [(12, 1)]
    assert parse_payload("3:99999999") == [(3, 10_000)]
