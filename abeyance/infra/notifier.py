"""In-process wake-ups for workers and long-polls. Everything also works by polling the database."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections import defaultdict
from collections.abc import Iterator


class LocalRunNotifier:
    """Signals inside one process. Waiters always re-check the database after waking."""

    def __init__(self) -> None:
        self._work = asyncio.Event()
        self._runs: dict[uuid.UUID, set[asyncio.Event]] = defaultdict(set)

    async def run_queued(self, run_id: uuid.UUID) -> None:
        self._work.set()
        await self.run_changed(run_id)

    async def run_changed(self, run_id: uuid.UUID) -> None:
        for event in self._runs.get(run_id, ()):
            event.set()

    def wake_all(self) -> None:
        self._work.set()

    def start(self) -> None:
        """Nothing to start in one process."""

    async def stop(self) -> None:
        """Nothing to stop in one process."""

    async def wait_for_work(self, seconds: float) -> None:
        try:
            await asyncio.wait_for(self._work.wait(), seconds)
        except TimeoutError:
            return
        finally:
            self._work.clear()

    @contextlib.contextmanager
    def watch(self, run_id: uuid.UUID) -> Iterator[asyncio.Event]:
        """An event set whenever the run changes; register it before reading, then wait on it."""
        event = asyncio.Event()
        self._runs[run_id].add(event)
        try:
            yield event
        finally:
            waiters = self._runs.get(run_id)
            if waiters is not None:
                waiters.discard(event)
                if not waiters:
                    del self._runs[run_id]
