"""The worker: claims queued runs, holds their lease with a heartbeat, and sweeps overdue state."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import uuid
from datetime import timedelta

import structlog

from abeyance.domain.events import publish_pending_resolved, publish_run_status
from abeyance.domain.ports import UnitOfWorkFactory
from abeyance.domain.records import AuditEntry, PendingCall
from abeyance.domain.services import Clock
from abeyance.domain.states import PendingStatus, RunStatus
from abeyance.infra.notifier import LocalRunNotifier
from abeyance.infra.runner import AgentRunner
from abeyance.infra.webhook_delivery import WebhookDeliverer

log = structlog.get_logger("abeyance.worker")
SWEEPER = "system:sweeper"


def worker_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class Worker:
    def __init__(
        self,
        uow: UnitOfWorkFactory,
        runner: AgentRunner,
        notifier: LocalRunNotifier,
        *,
        clock: Clock,
        concurrency: int,
        poll_seconds: float,
        lease: timedelta,
        sweep_seconds: float,
        deliverer: WebhookDeliverer | None = None,
    ) -> None:
        self._uow = uow
        self._deliverer = deliverer
        self._runner = runner
        self._notifier = notifier
        self._clock = clock
        self._concurrency = concurrency
        self._poll = poll_seconds
        self._lease = lease
        self._sweep = sweep_seconds
        self.id = worker_id()
        self._stopping = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []

    def start(self) -> None:
        self._stopping.clear()
        self._tasks = [
            asyncio.create_task(self._loop(i), name=f"worker-{i}") for i in range(self._concurrency)
        ]
        self._tasks.append(asyncio.create_task(self._sweeper(), name="sweeper"))
        if self._deliverer is not None:
            self._tasks.append(asyncio.create_task(self._deliverer.run(self._stopping), name="webhooks"))

    async def stop(self, grace: float = 10.0) -> None:
        self._stopping.set()
        await self._notifier.run_queued(uuid.UUID(int=0))
        _, pending = await asyncio.wait(self._tasks, timeout=grace) if self._tasks else (set(), set())
        for task in pending:
            task.cancel()
        for task in pending:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []

    async def _loop(self, index: int) -> None:
        while not self._stopping.is_set():
            try:
                worked = await self.run_once()
            except Exception:
                log.exception("worker.loop_error", worker=self.id)
                worked = False
                await asyncio.sleep(self._poll)
            if not worked and not self._stopping.is_set():
                await self._notifier.wait_for_work(self._poll)

    async def run_once(self) -> bool:
        """Claim and run one segment; False when there was nothing to do."""
        now = self._clock()
        async with self._uow() as uow:
            run = await uow.runs.claim_next(self.id, now, now + self._lease)
            if run is not None:
                await publish_run_status(uow, run, RunStatus.RUNNING.value, now)
            await uow.commit()
        if run is None:
            return False
        heartbeat = asyncio.create_task(self._heartbeat(run.id))
        try:
            await self._runner.run_segment(run, self.id)
        finally:
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat
        return True

    async def _heartbeat(self, run_id: uuid.UUID) -> None:
        interval = self._lease.total_seconds() / 3
        while True:
            await asyncio.sleep(interval)
            now = self._clock()
            async with self._uow() as uow:
                renewed = await uow.runs.renew_lease(run_id, self.id, now + self._lease)
                await uow.commit()
            if not renewed:
                return

    async def _sweeper(self) -> None:
        while not self._stopping.is_set():
            try:
                await self.sweep()
            except Exception:
                log.exception("sweeper.error")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), self._sweep)

    async def sweep(self) -> int:
        """Expire overdue pending calls and requeue runs whose lease ran out. Safe to run anywhere."""
        now = self._clock()
        changed = 0
        async with self._uow() as uow:
            requeued = await uow.runs.requeue_expired_leases(now)
            overdue = await uow.pending.overdue(now, limit=100)
            expired: list[PendingCall] = []
            for call in overdue:
                if not await uow.pending.transition(
                    call.correlation_id,
                    PendingStatus.EXPIRED,
                    now,
                    resolved_by=SWEEPER,
                    reason="no decision before expires_at",
                    resolution={"decision": "expire"},
                ):
                    continue
                await uow.audit.append(
                    AuditEntry(
                        action="pending.expired",
                        actor=SWEEPER,
                        workspace=call.workspace,
                        conversation_id=call.conversation_id,
                        run_id=call.run_id,
                        correlation_id=call.correlation_id,
                        details={"tool_name": call.tool_name, "tool_call_id": call.tool_call_id},
                    ),
                    now,
                )
                if await uow.runs.resolve_one_awaiting(call.run_id, now):
                    requeued.append(call.run_id)
                expired.append(call)
                changed += 1
            # Events last: their per-conversation lock is the last lock this transaction takes.
            for call in expired:
                await publish_pending_resolved(uow, call, PendingStatus.EXPIRED.value, SWEEPER, now)
            for run_id in requeued:
                run = await uow.runs.get(run_id)
                if run is not None:
                    await publish_run_status(uow, run, RunStatus.QUEUED.value, now)
            await uow.commit()
        for run_id in requeued:
            log.info("sweeper.requeued", run_id=str(run_id))
            await self._notifier.run_queued(run_id)
        return changed + len(requeued)
