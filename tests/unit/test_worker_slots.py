"""A worker's slots (`sursis/infra/worker_slots.py`): a loop that finds every slot taken sleeps until
one is freed, instead of looking again at once (which, with no await in between, would hold the
event loop and with it the transaction that holds the reservation)."""

from __future__ import annotations

import asyncio

import pytest

from sursis.infra.worker_slots import Slots


async def test_a_loop_that_finds_every_slot_reserved_sleeps_until_one_is_given_back() -> None:
    slots = Slots(1)
    assert slots.reserve()
    assert not slots.may_claim()
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(slots.wait(), 0.1)  # asleep, not back at once
    waiting = asyncio.ensure_future(slots.wait())
    await asyncio.sleep(0)
    slots.cancel()  # the reservation given back: the loop that passed over the queue looks again
    await asyncio.wait_for(waiting, 1)
    assert slots.may_claim()


async def test_a_wake_up_no_idle_loop_took_is_kept_for_the_next_loop_that_goes_idle() -> None:
    slots = Slots(2)
    slots.wake_one()  # nobody waiting
    await asyncio.wait_for(slots.wait(), 1)  # owed: back at once, once
    with pytest.raises(TimeoutError):
        await asyncio.wait_for(slots.wait(), 0.1)


async def test_a_claim_attempt_holds_no_slot_and_a_handed_run_keeps_its_reservation_until_taken() -> None:
    slots = Slots(1)
    assert slots.may_claim()  # looking at the queue takes nothing
    assert slots.reserve() and not slots.reserve()
    assert not await slots.idle(0.05)
    assert slots.take() is None  # nothing handed yet: the reservation stays
    slots.cancel()
    assert await slots.idle(0.05)
