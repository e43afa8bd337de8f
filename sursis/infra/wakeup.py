"""How a background loop waits between its passes: until something may have given it work, not on a
clock.

The loops of a worker (reviews, webhook deliveries, the sweeper, the audit seal) used to read the
database every second or every few seconds, busy or idle. Each now waits on its `Wakeup`: until
something happens that may give it work (`LocalRunNotifier.watch_activity`: events committed, a
pending call created or resolved, a run queued, in this process or heard from another over LISTEN),
or a time it knows work falls due (`due_in`), or its poll at the latest. While the process hears the
other processes (`Hearing`: PostgreSQL with its LISTEN connection up) the poll is the long safety poll
(`idle_poll_seconds`): a lost notification delays work by one safety poll at most, never loses it.
Where it cannot hear them (SQLite, whose other processes send nothing; the LISTEN connection down) the
poll is the loop's own short one, as before. While things happen, a loop still makes at most one pass
per short poll, so a busy service does no more passes than it did with polling.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from sursis.infra.notifier import LocalRunNotifier


def _deaf() -> bool:
    return False


@dataclass(frozen=True)
class Hearing:
    """What the loops of a process may rely on: `notifier` stirs them, `hears_others` says whether
    changes made by other processes reach it now, `safety_poll` is their poll while they do."""

    notifier: LocalRunNotifier
    safety_poll: float
    hears_others: Callable[[], bool] = _deaf

    def poll(self, short: float) -> float:
        """The longest a loop with poll `short` may wait for a wake-up now."""
        return max(short, self.safety_poll) if self.hears_others() else short

    @contextlib.contextmanager
    def wakeup(self, poll: float) -> Iterator[Wakeup]:
        """A loop's wake-up for as long as the loop runs (registered before its first pass, so
        nothing that happens during a pass is missed)."""
        with self.notifier.watch_activity() as stirred:
            yield Wakeup(self, poll, stirred)


@dataclass
class Wakeup:
    """One loop's wait between passes (see the module's docstring)."""

    hearing: Hearing
    poll: float
    stirred: asyncio.Event
    _last_pass: float = field(default_factory=time.monotonic)

    async def wait(self, stopping: asyncio.Event, *, due_in: float | None = None) -> None:
        """Return when the next pass should start: at once if something happened during the last one,
        else at the first wake-up, at `due_in` seconds, or at the poll; never sooner than `poll` after
        the last pass began (nor while `stopping` is unset and the pass before was that recent)."""
        since = time.monotonic() - self._last_pass
        if since < self.poll:
            await _until(stopping, self.poll - since)
        timeout = self.hearing.poll(self.poll)
        if due_in is not None:
            timeout = min(timeout, max(0.0, due_in))
        if not self.stirred.is_set() and not stopping.is_set():
            await _first(stopping, self.stirred, timeout)
        self.stirred.clear()
        self._last_pass = time.monotonic()


async def _until(stopping: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stopping.wait(), seconds)


async def _first(stopping: asyncio.Event, stirred: asyncio.Event, seconds: float) -> None:
    """Wait for either event, at most `seconds`."""
    waiters = [asyncio.ensure_future(stopping.wait()), asyncio.ensure_future(stirred.wait())]
    try:
        await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
