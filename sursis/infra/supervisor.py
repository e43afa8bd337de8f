"""The worker's loops under one supervisor.

A worker is a handful of loops: its claim loops (one per slot), the dispatcher that sends an idle
one to the queue, the sweeper, the webhook deliveries, the channels' deliveries and digests, the
retention loop and the reviewer. Each is a loop object with its own settings and its own wake-up
(`wakeup.py`); the supervisor starts them by name, restarts one that crashed or ended before the
worker stopped (after a pause, so a loop failing at once does not spin), stops them together within
a grace and reports each one's state (`report`).

Each loop's task tells sniffio it runs asyncio, in the task's own context
(`sniffio.current_async_library_cvar`), which the tasks it starts inherit: the agent runs of an
embedded `Service` happen there, on the host's loop, and anyio and pydantic-graph ask sniffio dozens
of times a turn. Undeclared, sniffio asks asyncio for the current task, a `getpid` system call each
on Python 3.11 (`sursis/app/loop_thread.py` declares the whole thread where Sursis owns the loop).
The host's own tasks and threads are left as they were.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import sniffio
import structlog

log = structlog.get_logger("sursis.worker")


class Loop(Protocol):
    """A loop the worker runs: returns once `stopping` is set."""

    async def run(self, stopping: asyncio.Event) -> None: ...


@dataclass(frozen=True, slots=True)
class LoopReport:
    name: str
    running: bool
    restarts: int
    last_error: str | None


@dataclass(slots=True)
class _Supervised:
    name: str
    loop: Loop
    task: asyncio.Task[None] | None = None
    restarts: int = 0
    last_error: str | None = None


class Supervisor:
    """Starts named loops, keeps each running until `stop`, and reports them."""

    def __init__(self, restart_pause: float = 1.0) -> None:
        self.stopping = asyncio.Event()
        self._pause = restart_pause
        self._loops: list[_Supervised] = []

    @property
    def started(self) -> bool:
        return bool(self._loops)

    def start(self, loops: Sequence[tuple[str, Loop]]) -> None:
        self.stopping.clear()
        self._loops = [_Supervised(name, loop) for name, loop in loops]
        for supervised in self._loops:
            supervised.task = asyncio.create_task(self._keep(supervised), name=supervised.name)

    async def stop(self, grace: float) -> int:
        """Set `stopping`, give the loops `grace` seconds to return, cancel the rest; how many had
        to be cancelled."""
        self.stopping.set()
        tasks = [s.task for s in self._loops if s.task is not None]
        if not tasks:
            self._loops = []
            return 0
        _, pending = await asyncio.wait(tasks, timeout=grace)
        for task in pending:
            task.cancel()
        for task in pending:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._loops = []
        return len(pending)

    def report(self) -> list[LoopReport]:
        return [
            LoopReport(s.name, s.task is not None and not s.task.done(), s.restarts, s.last_error)
            for s in self._loops
        ]

    async def _keep(self, supervised: _Supervised) -> None:
        sniffio.current_async_library_cvar.set("asyncio")  # this task's context and its children's
        while not self.stopping.is_set():
            try:
                await supervised.loop.run(self.stopping)
            except Exception as exc:
                supervised.last_error = f"{type(exc).__name__}: {exc}"[:200]
                log.exception("worker.loop_crashed", loop=supervised.name)
            else:
                if self.stopping.is_set():
                    return
                log.warning("worker.loop_ended", loop=supervised.name)
            supervised.restarts += 1
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.stopping.wait(), self._pause)
