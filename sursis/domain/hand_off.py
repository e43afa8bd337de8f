"""The claim hand-off: the transaction that queues a run leases it to a free worker slot of the same
process, so the run needs no claim transaction of its own and no wake-up.

The message's transaction (a new run) or the decision's (a resumed one) writes the run already
`running`, its lease held by the worker of this process, with the `run.started` / `run.resumed`
audit row and the `running` event a claim would have written, and reads what the segment starts
from. After the commit the slot runs the segment. Nothing else changes: the lease is an ordinary
lease, so a process killed between the commit and the segment leaves a run whose lease runs out
and which the sweeper re-queues, as after a crash in the middle of a segment.

A process hands off only while its worker loops run and one of them is free; otherwise the run is
queued for any worker, as before (an API process without a worker never hands off).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Protocol

from sursis.domain.ports import UnitOfWork
from sursis.domain.records import Run
from sursis.domain.states import RunStatus


@dataclass(frozen=True, slots=True)
class SlotLease:
    """A worker slot reserved for one run: who holds the lease and until when."""

    owner: str
    until: datetime


class SegmentStartRead(Protocol):
    """What a handed-off segment starts from, read in the leasing transaction (opaque here)."""


class RunHandOff(Protocol):
    """A process's free worker slots, as the transactions that queue runs see them."""

    def reserve(self) -> SlotLease | None:
        """A free slot of this process's worker, reserved; None when none is free (or no loop runs)."""
        ...

    def cancel(self, lease: SlotLease) -> None:
        """The reservation was not used (the transaction did not lease a run): the slot is free again."""
        ...

    def log_position(self, conversation_id: uuid.UUID) -> int:
        """How far this process has read the conversation's log (0: it keeps none of it): the
        statement that claims the conversation or leases its run may read the rest, for the
        segment's start (`ConversationRepository.claim_active_run`, `RunRepository.lease`)."""
        ...

    def log_positions(self) -> dict[uuid.UUID, int]:
        """`log_position` of every conversation this process keeps the log of, for a read that
        learns the conversation as it reads (`PendingCallRepository.seen_for_decision`)."""
        ...

    async def read_start(self, uow: UnitOfWork, run: Run) -> SegmentStartRead:
        """In the caller's transaction, before it holds any write back: what the segment of the
        leased `run` starts from (its log, the calls it resumes with and their outcomes)."""
        ...

    async def record_start(self, uow: UnitOfWork, run: Run, now: datetime) -> None:
        """In the caller's transaction, after the run's own writes: the audit row and the `running`
        event a claim writes."""
        ...

    def hand(self, lease: SlotLease, run: Run, start: SegmentStartRead | None) -> None:
        """After the commit: the reserved slot runs the segment."""
        ...


def leased(run: Run, lease: SlotLease, now: datetime) -> Run:
    """`run` as a claim would leave it: running, its lease held, its next segment counted."""
    return replace(
        run,
        status=RunStatus.RUNNING,
        lease_owner=lease.owner,
        lease_expires_at=lease.until,
        segment=run.segment + 1,
        claims=run.claims + 1,
        updated_at=now,
    )
