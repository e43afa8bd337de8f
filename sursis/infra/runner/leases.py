"""The segment's lease: progress persisted with the lease renewed, and what losing it means."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence

from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
)

from sursis.domain.records import Run, Usage
from sursis.infra.faults import crash_point
from sursis.infra.runner.base import log
from sursis.infra.runner.events import EventPublishing
from sursis.infra.runner.failures import is_transient_database_error

RELEASE_RETRY_SECONDS = (0.1, 0.2, 0.5, 1.0)
"""The waits between attempts to give a run back after a lost connection (the last one repeats)."""


class LeaseLost(Exception):
    """Another worker owns the run now; stop without writing."""


class CancelRequested(Exception):
    """A cancel was requested: the segment stored what it held and ends the run as cancelled."""


class Interrupted(Exception):
    """The worker is shutting down: the segment stopped at a persistence point."""


class Leases(EventPublishing):
    """Persistence points that renew the lease, and giving a run back at once after a lost connection."""

    async def _release_after_blip(self, run: Run, owner: str) -> bool:
        """Give the run back to the queue as soon as the database answers again.

        A segment that lost its connection kept nothing of its failed transaction; waiting for its
        lease to run out would stall the run for the whole lease after a blip of a second. So it is
        released (`status = 'queued'` if this worker still owns it and it is still running: a lost
        connection may have hidden a commit that ended the run) and announced, and the next claim
        continues from the log. Attempts go on, more slowly, until the lease would have run out
        anyway; True if the run was given back.
        """
        deadline = time.monotonic() + self._lease.total_seconds()
        attempt = 0
        while True:
            try:
                async with self._uow() as uow:
                    released = await uow.runs.release(run.id, owner, self._clock())
                    await uow.commit()
            except Exception as exc:
                if not is_transient_database_error(exc):
                    raise
                wait = RELEASE_RETRY_SECONDS[min(attempt, len(RELEASE_RETRY_SECONDS) - 1)]
                attempt += 1
                if time.monotonic() + wait >= deadline:
                    log.warning("run.release_gave_up", attempts=attempt)
                    return False
                await asyncio.sleep(wait)
                continue
            log.info("run.released_after_lost_connection", released=released, attempts=attempt + 1)
            if released:
                with contextlib.suppress(Exception):
                    await self._notifier.run_queued(run.id)
            return released

    async def _persist(
        self,
        run: Run,
        owner: str,
        messages: Sequence[ModelMessage],
        usage: Usage,
        announced: set[str],
        stopping: asyncio.Event,
    ) -> bool:
        """Append new messages and renew the lease in one transaction; True if a cancel was requested."""
        now = self._clock()
        async with self._uow() as uow:
            if not await uow.runs.record_progress(run.id, owner, usage, now, now + self._lease):
                raise LeaseLost()
            cancel = await uow.runs.cancel_requested(run.id)
            last_seq = await self._append(uow, run, messages, now, announced)
            await self._publish_messages(uow, run, messages, now, announced)
            await uow.commit()
        self._appended(announced, last_seq)
        if any(isinstance(m, ModelResponse) for m in messages):
            crash_point("model_response_persisted")
        if stopping.is_set() and not cancel:
            raise Interrupted()
        return cancel
