"""The segment's lease: progress persisted with the lease renewed, and what losing it means."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from datetime import timedelta

from pydantic_ai.messages import ModelMessage, ModelResponse

from sursis.domain.errors import Error
from sursis.domain.records import Run, Usage
from sursis.infra.faults import crash_point
from sursis.infra.runner.base import RunnerParts, log
from sursis.infra.runner.events import EventPublisher
from sursis.infra.runner.failures import is_transient_database_error
from sursis.infra.runner.segment import Segment
from sursis.infra.runner.usage import usage_record

RELEASE_RETRY_SECONDS = (0.1, 0.2, 0.5, 1.0)
"""The waits between attempts to give a run back after a lost connection (the last one repeats)."""


class LeaseLost(Error):
    """Another worker owns the run now; stop without writing."""

    code = "lease_lost"


class CancelRequested(Error):
    """A cancel was requested: the segment stored what it held and ends the run as cancelled."""

    code = "cancel_requested"


class Interrupted(Error):
    """The worker is shutting down: the segment stopped at a persistence point."""

    code = "interrupted"


class LeaseKeeper:
    """Persistence points that renew the lease, and giving a run back at once after a lost connection."""

    def __init__(self, parts: RunnerParts, events: EventPublisher, lease: timedelta) -> None:
        self._uow, self._clock, self._notifier = parts.uow, parts.clock, parts.notifier
        self.events = events
        self._lease = lease

    async def release_after_blip(self, run: Run, owner: str) -> bool:
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

    async def persist(
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
            last_seq = await self.events.append(uow, run, messages, now, announced)
            await self.events.publish_messages(uow, run, messages, now, announced)
            await uow.commit()
        self.events.appended(announced, last_seq)
        if any(isinstance(m, ModelResponse) for m in messages):
            crash_point("model_response_persisted")
        if stopping.is_set() and not cancel:
            raise Interrupted()
        return cancel

    async def before_effect(self, segment: Segment) -> None:
        """Store the messages held back, before anything acts on them; a cancel stops here.

        The calls of one response run concurrently: the first stores the response, the
        others wait for it (and for its answer to a cancel) instead of storing it again.
        """
        held, run = segment.held, segment.run
        agent_run = held.agent_run
        if agent_run is None:
            return
        async with held.persisting:
            new = agent_run.new_messages()
            if len(new) > held.persisted:
                held.usage = run.usage.add(usage_record(agent_run.usage))
                held.cancel_seen = await self.persist(
                    run, segment.owner, new[held.persisted :], held.usage, segment.announced, segment.stopping
                )
                held.persisted = len(new)
        if held.cancel_seen:
            raise CancelRequested()
