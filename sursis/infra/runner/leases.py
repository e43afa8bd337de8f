"""The segment's lease: progress persisted with the lease renewed, and what losing it means."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
)

from sursis.domain.records import Run, Usage
from sursis.infra.faults import crash_point
from sursis.infra.runner.events import EventPublishing


class LeaseLost(Exception):
    """Another worker owns the run now; stop without writing."""


class CancelRequested(Exception):
    """A cancel was requested: the segment stored what it held and ends the run as cancelled."""


class Interrupted(Exception):
    """The worker is shutting down: the segment stopped at a persistence point."""


class Leases(EventPublishing):
    """Persistence points that renew the lease."""

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
