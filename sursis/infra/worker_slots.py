"""A worker's slots: the segments its loops run, and the runs this process's transactions hand it.

A slot is busy while a loop runs a segment in it, and reserved from the moment a transaction asks
for it (`sursis/domain/hand_off.py`) until a loop takes the run it was handed (or the reservation
is given back). A loop claims from the queue only while a slot is neither; an empty claim
attempt holds none, so a transaction is not refused a slot because loops were merely looking.
A handed run may wait a moment for a loop (when a claim that raced with its reservation won): its
lease's heartbeat starts when it is handed, not when a loop takes it.

Idle loops are woken one at a time: by a hand-off, by the worker's dispatcher (one loop per
wake-up from the queue's notifications, or per poll interval), or by a loop that just claimed a
run (there may be more queued). A burst of queued runs is taken by as many loops as it needs,
and a notification costs one claim attempt, not one per idle loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import deque
from dataclasses import dataclass
from typing import Any

from sursis.domain.records import Run


@dataclass(frozen=True, slots=True)
class Handed:
    """A run leased to this worker by a transaction of this process, waiting for a loop."""

    run: Run
    start: Any
    """What the leasing transaction read for the segment (the worker's `StartRead`)."""
    heartbeat: asyncio.Task[None]


class Slots:
    def __init__(self, size: int) -> None:
        self.size = size
        self.busy = 0
        self.reserved = 0
        self.handed: deque[Handed] = deque()
        self.owed = False
        """A wake-up found no idle loop: the next loop to go idle looks at the queue first."""
        self.missed = False
        """A loop passed over the queue with every slot busy or reserved: the next slot freed sends
        an idle loop to look again."""
        self._idle: deque[asyncio.Future[None]] = deque()
        self._slot_freed = asyncio.Event()

    def reset(self) -> None:
        for item in self.handed:
            item.heartbeat.cancel()
        self.handed.clear()
        self.busy = self.reserved = 0
        self.owed = self.missed = False

    @property
    def full(self) -> bool:
        return self.busy + self.reserved >= self.size

    def reserve(self) -> bool:
        if self.full:
            return False
        self.reserved += 1
        return True

    def cancel(self) -> None:
        """A reservation given back: a loop that passed over the queue meanwhile looks again."""
        self.reserved -= 1
        self._freed()

    def hand(self, item: Handed) -> None:
        self.handed.append(item)
        self.wake_one()

    def take(self) -> Handed | None:
        """The next handed run, its slot now busy."""
        if not self.handed:
            return None
        self.reserved -= 1
        self.busy += 1
        return self.handed.popleft()

    def may_claim(self) -> bool:
        if self.full:
            self.missed = True  # not `owed`: this loop would wake itself at once, and spin
            return False
        return True

    def started(self) -> None:
        self.busy += 1

    def done(self) -> None:
        self.busy -= 1
        self._freed()

    def _freed(self) -> None:
        self._slot_freed.set()
        if self.missed:
            self.missed = False
            self.wake_one()

    def wake_one(self) -> None:
        while self._idle:
            waiting = self._idle.popleft()
            if not waiting.done():
                waiting.set_result(None)
                return
        self.owed = True

    def wake_all(self) -> None:
        while self._idle:
            waiting = self._idle.popleft()
            if not waiting.done():
                waiting.set_result(None)

    async def wait(self) -> None:
        """Until this loop is woken: a run handed to it, or its turn to look at the queue."""
        if self.handed:
            return
        if self.owed:
            self.owed = False
            return
        woken = asyncio.get_running_loop().create_future()
        self._idle.append(woken)
        try:
            await woken
        finally:
            with contextlib.suppress(ValueError):
                self._idle.remove(woken)

    async def idle(self, within: float) -> bool:
        """Until nothing runs or waits in any slot (False after `within` seconds)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while self.busy or self.reserved or self.handed:
            self._slot_freed.clear()
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._slot_freed.wait(), remaining)
        return True
