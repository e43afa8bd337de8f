"""A loop's wake-up (`sursis/infra/wakeup.py`): what happens during a pass is never missed, a busy
loop passes no more often than its poll, and a loop that hears the others sleeps until the safety
poll, or sooner when work falls due."""

from __future__ import annotations

import asyncio
import time

from sursis.infra.notifier import LocalRunNotifier
from sursis.infra.wakeup import Hearing


async def _timed_wait(
    hearing: Hearing, poll: float, *, stir_during_pass: bool, due_in: float | None = None
) -> float:
    stopping = asyncio.Event()
    with hearing.wakeup(poll) as wakeup:
        if stir_during_pass:
            hearing.notifier.pending_changed({"ws"})  # something happened while the loop worked
        started = time.monotonic()
        await wakeup.wait(stopping, due_in=due_in)
        return time.monotonic() - started


async def test_what_happens_during_a_pass_starts_the_next_after_the_poll_not_the_safety_poll() -> None:
    hearing = Hearing(LocalRunNotifier(), safety_poll=30.0, hears_others=lambda: True)
    waited = await _timed_wait(hearing, 0.2, stir_during_pass=True)
    assert 0.15 <= waited < 5.0, waited


async def test_a_loop_that_hears_the_others_sleeps_past_its_own_poll() -> None:
    hearing = Hearing(LocalRunNotifier(), safety_poll=1.0, hears_others=lambda: True)
    waited = await _timed_wait(hearing, 0.1, stir_during_pass=False)
    assert 0.9 <= waited < 5.0, waited


async def test_a_loop_that_cannot_hear_the_others_keeps_its_own_poll() -> None:
    hearing = Hearing(LocalRunNotifier(), safety_poll=30.0, hears_others=lambda: False)
    waited = await _timed_wait(hearing, 0.3, stir_during_pass=False)
    assert 0.25 <= waited < 5.0, waited


async def test_work_that_falls_due_wakes_a_sleeping_loop() -> None:
    hearing = Hearing(LocalRunNotifier(), safety_poll=30.0, hears_others=lambda: True)
    waited = await _timed_wait(hearing, 0.1, stir_during_pass=False, due_in=0.5)
    assert 0.4 <= waited < 5.0, waited


async def test_a_wake_up_from_another_process_ends_the_sleep() -> None:
    notifier = LocalRunNotifier()
    hearing = Hearing(notifier, safety_poll=30.0, hears_others=lambda: True)
    stopping = asyncio.Event()
    with hearing.wakeup(0.05) as wakeup:
        await asyncio.sleep(0.1)
        asyncio.get_running_loop().call_later(0.3, notifier.conversations_changed, set())
        started = time.monotonic()
        await wakeup.wait(stopping)
        assert 0.25 <= time.monotonic() - started < 5.0
