"""The sweeper: expires overdue pending calls, requeues runs whose lease ran out, and takes routes'
reminders and escalations when they fall due. Any number of workers may run it."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import structlog

from sursis.domain.approvals.pending_calls import EXPIRY_ACTOR, expire_overdue_call
from sursis.domain.clock import Clock
from sursis.domain.events.events import publish_pending_resolved, publish_run_status
from sursis.domain.notifications.escalation import advance_routes
from sursis.domain.ports import UnitOfWorkFactory
from sursis.domain.records import PendingCall
from sursis.domain.states import PendingStatus, RunStatus
from sursis.infra.notifier import LocalRunNotifier
from sursis.infra.telemetry import Telemetry
from sursis.infra.wakeup import Hearing

log = structlog.get_logger("sursis.worker")
SWEEP_BATCH = 25
"""Overdue calls one sweeper pass expires: each costs a few statements (the call, its run, an audit
row, events), so a pass stays well under a second and holds its row locks briefly
(docs/scaling.md); a full batch is followed by the next pass at once."""


@dataclass(frozen=True)
class Sweeper:
    """The worker's sweeper loop; `every` is its pass interval while things happen."""

    _uow: UnitOfWorkFactory
    _notifier: LocalRunNotifier
    _clock: Clock
    _telemetry: Telemetry
    _every: float
    _hearing: Hearing

    async def run(self, stopping: asyncio.Event) -> None:
        """Sweeps every `sweep_seconds` while things happen; idle, it sleeps until the first expiry,
        lease end or route step falls due (`next_due`), or a wake-up (`wakeup.py`)."""
        with self._hearing.wakeup(self._every) as wakeup:
            while not stopping.is_set():
                due_in = None
                try:
                    # A full batch means more may be overdue: the next pass starts at once.
                    if await self.sweep() >= SWEEP_BATCH:
                        continue
                    if not wakeup.stirred.is_set():
                        due_in = await self.next_due()
                except Exception:
                    log.exception("sweeper.error")
                await wakeup.wait(stopping, due_in=due_in)

    async def next_due(self) -> float | None:
        """Seconds until the sweeper has work with nothing else happening: the first awaiting call's
        expiry, running run's lease end or route's reminder (None: none is pending)."""
        async with self._uow.reader() as uow:
            dues = [
                await uow.pending.next_expiry(),
                await uow.runs.next_lease_expiry(),
                await uow.approvers.next_route_due(),
            ]
        first = min((due for due in dues if due is not None), default=None)
        return None if first is None else (first - self._clock()).total_seconds()

    async def sweep(self) -> int:
        """Expire at most SWEEP_BATCH overdue pending calls and requeue runs whose lease ran out, in
        one transaction. Safe to run anywhere."""
        now = self._clock()
        expired: list[tuple[PendingCall, PendingStatus]] = []
        async with self._uow() as uow:
            requeued = await uow.runs.requeue_expired_leases(now)
            overdue = await uow.pending.overdue(now, limit=SWEEP_BATCH)
            if overdue:
                with self._telemetry.tracer.start_as_current_span(
                    "sweeper.expire", attributes={"sursis.overdue": len(overdue)}
                ):
                    for call in overdue:
                        expiry = await expire_overdue_call(uow, call, now)
                        if expiry is not None:
                            expired.append((call, expiry.status))
                            if expiry.run_requeued:
                                requeued.append(call.run_id)
            advanced = await advance_routes(uow, now, SWEEP_BATCH)
            # Events last: their per-conversation lock is the last lock this transaction takes.
            for call, status in expired:
                await publish_pending_resolved(uow, call, status.value, EXPIRY_ACTOR, now)
            for run_id in requeued:
                queued = await uow.runs.get(run_id)
                if queued is not None:
                    await publish_run_status(uow, queued, RunStatus.QUEUED.value, now)
            await uow.commit()
        for call, status in expired:
            log.info(
                "pending.expired" if status is PendingStatus.EXPIRED else "pending.timed_out",
                correlation_id=str(call.correlation_id),
                run_id=str(call.run_id),
                tool_name=call.tool_name,
            )
            self._telemetry.metrics.pending_resolved(call, status, now)
        for run_id in requeued:
            log.info("sweeper.requeued", run_id=str(run_id))
            self._telemetry.metrics.run_status(RunStatus.QUEUED)
            await self._notifier.run_queued(run_id)
        for step in advanced:
            log.info(
                "pending.routed",
                correlation_id=str(step.call.correlation_id),
                reminded=step.step.remind,
                escalation_level=step.step.level,
            )
        return len(expired) + len(requeued) + len(advanced)
