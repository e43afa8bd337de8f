"""Runs as their users follow them: read one, wait for it to settle, list its tool calls, cancel it."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field

from sursis.domain.access import Permission
from sursis.domain.agents.agent_ports import RunNotifier, RunWatcher
from sursis.domain.approvals.approval_votes import with_approval
from sursis.domain.clock import Clock, utcnow
from sursis.domain.errors import NotFound, Stale
from sursis.domain.ports import NoMetrics, ServiceMetrics, UnitOfWork, UnitOfWorkFactory
from sursis.domain.records import PendingCall, Principal, Run, ToolCallRecord
from sursis.domain.runs import run_lifecycle
from sursis.domain.states import PendingStatus, RunStatus


@dataclass(slots=True)
class RunView:
    run: Run
    pending: list[PendingCall]


RECHECK_SECONDS = 1.0
"""A long-poll reads its run at least this often, for a change whose notification was lost."""


def never_unreachable(exc: BaseException) -> bool:
    return False


@dataclass
class RunService:
    """Read, wait for and cancel runs. A run's end of life is `run_lifecycle`'s; this asks for it."""

    uow: UnitOfWorkFactory
    notifier: RunNotifier
    watcher: RunWatcher
    _: KW_ONLY
    clock: Clock = utcnow
    max_wait_seconds: float = 60.0
    metrics: ServiceMetrics = field(default_factory=NoMetrics)
    store_unreachable: Callable[[BaseException], bool] = never_unreachable

    async def get_run(self, principal: Principal, run_id: uuid.UUID) -> RunView:
        async with self.uow.reader() as uow:
            run = await _visible_run(uow, principal, run_id)
            pending = await uow.pending.for_run(run.id, PendingStatus.AWAITING) if run.awaiting_count else []
            return RunView(run=run, pending=await with_approval(uow, principal, pending, self.clock()))

    async def wait_for_run(
        self, principal: Principal, run_id: uuid.UUID, wait: float, *, queued_since: int | None = None
    ) -> RunView:
        """Long-poll: the run once it is settled, or as it is when `wait` seconds have passed
        (at most `max_wait_seconds`).

        `queued_since`: a `watcher.mark()` taken before the commit that queued the run. While no
        change of the run was heard since, it is still queued or running (nothing else settles it
        unheard for longer than a poll): the first read is skipped and the wait starts at once."""
        deadline = time.monotonic() + min(wait, self.max_wait_seconds)
        unheard_since = queued_since
        while True:
            with self.watcher.watch(run_id) as changed:
                view = None
                if unheard_since is None or self.watcher.changed_since(run_id, unheard_since):
                    view = await self.get_run(principal, run_id)
                    if view.run.status.settled:
                        return view
                unheard_since = None
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return view or await self.get_run(principal, run_id)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(changed.wait(), min(remaining, RECHECK_SECONDS))

    def mark(self) -> int:
        """A mark to take before a commit that queues a run, for `wait_after_commit(queued_since=)`."""
        return self.watcher.mark()

    async def wait_after_commit(
        self, principal: Principal, run_id: uuid.UUID, wait: float, *, queued_since: int | None = None
    ) -> RunView | None:
        """`wait_for_run` after a commit that queued the run (a message, a decision): what was asked
        is done, so the answer is never an error; None if the store cannot be read while waiting
        (busy pool, outage)."""
        try:
            return await self.wait_for_run(principal, run_id, wait, queued_since=queued_since)
        except Exception as exc:
            if not self.store_unreachable(exc):
                raise
            return None

    async def wait_after_queueing(
        self, principal: Principal, run: Run, wait: float, *, queued_since: int | None = None
    ) -> RunView:
        """`wait_after_commit` for a run just queued: the run as queued if it cannot be read."""
        view = await self.wait_after_commit(principal, run.id, wait, queued_since=queued_since)
        return view or RunView(run, [])

    async def list_tool_calls(self, principal: Principal, run_id: uuid.UUID) -> list[ToolCallRecord]:
        async with self.uow.reader() as uow:
            await _visible_run(uow, principal, run_id)
            return await uow.tool_calls.for_run(run_id)

    async def cancel_run(self, principal: Principal, run_id: uuid.UUID) -> RunView:
        """Cancel a run: awaiting calls become `cancelled` (the model is told on the next turn)."""
        now = self.clock()
        cancelled: list[PendingCall] = []
        async with self.uow() as uow:
            run = await _visible_run(uow, principal, run_id)
            if run.status.finished:
                raise Stale(f"the run is already {run.status.value}", extra={"run_status": run.status.value})
            if run.status is RunStatus.RUNNING:
                await run_lifecycle.request_cancel(uow, run, principal.id, now)
            else:
                ended = await run_lifecycle.cancel_idle(uow, run, principal.id, now)
                if ended is None:
                    raise Stale("the run changed while it was being cancelled")
                cancelled = ended
            await uow.commit()
        for call in cancelled:
            self.metrics.pending_resolved(call, PendingStatus.CANCELLED, now)
        if run.status is not RunStatus.RUNNING:
            self.metrics.run_status(RunStatus.CANCELLED)
        await self.notifier.run_changed(run_id)
        return await self.get_run(principal, run_id)


async def _visible_run(uow: UnitOfWork, principal: Principal, run_id: uuid.UUID) -> Run:
    """The run, if the principal may converse in its workspace; `NotFound` otherwise."""
    run = await uow.runs.get(run_id)
    if run is None or not principal.can_see(run.workspace):
        raise NotFound("run not found")
    principal.require(Permission.CONVERSE)
    return run
