"""The worker: claims queued runs, holds their lease with a heartbeat, and sweeps overdue state; its
loops (claims, dispatcher, sweeper, deliveries, and those the wiring adds) run under one
`Supervisor`."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import uuid
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta

import structlog
from sqlalchemy import exc as sa_exc

from sursis.domain.clock import Clock
from sursis.domain.encryption import EncryptedValueUnreadable, EncryptionKeyUnavailable, UnsealedValue
from sursis.domain.events.events import publish_run_status
from sursis.domain.hand_off import SegmentStartRead, SlotLease
from sursis.domain.ports import HeldConditionFailed, UnitOfWork, UnitOfWorkFactory
from sursis.domain.records import AuditEntry, Run
from sursis.domain.states import RunStatus
from sursis.infra.faults import crash_point
from sursis.infra.notifier import LocalRunNotifier
from sursis.infra.runner import ACTOR, AgentRunner
from sursis.infra.runner.failures import is_transient_database_error
from sursis.infra.runner.segment import SegmentStart
from sursis.infra.supervisor import Loop, LoopReport, Supervisor
from sursis.infra.sweeper import Sweeper
from sursis.infra.telemetry import Telemetry, current_trace_context, trace_id_of
from sursis.infra.wakeup import Hearing
from sursis.infra.webhook_delivery import WebhookDeliverer
from sursis.infra.worker_slots import Handed, Slots

log = structlog.get_logger("sursis.worker")
StartRead = tuple[SegmentStart | None, EncryptionKeyUnavailable | EncryptedValueUnreadable | None]
"""What a segment starts from as the leasing transaction read it (see `Worker.read_start`)."""


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
        max_segment_attempts: int = 5,
        telemetry: Telemetry | None = None,
        deliverer: WebhookDeliverer | None = None,
        loops: Sequence[Loop] = (),
        hearing: Hearing | None = None,
    ) -> None:
        self._uow = uow
        self._hearing = hearing or Hearing(notifier, poll_seconds)
        self._telemetry = telemetry or Telemetry.disabled()
        self._sweeper = Sweeper(uow, notifier, clock, self._telemetry, sweep_seconds, self._hearing)
        self._deliverer = deliverer
        self._loops = tuple(loops)
        self._runner = runner
        self._notifier = notifier
        self._clock = clock
        self._concurrency = concurrency
        self._poll = poll_seconds
        self._lease = lease
        self._max_attempts = max_segment_attempts
        self.id = worker_id()
        self._supervisor = Supervisor(restart_pause=poll_seconds)
        self._stopping = self._supervisor.stopping
        self._running: set[uuid.UUID] = set()
        self._claim_unsure = False
        """A claim failed on a lost connection: its commit may have happened all the same."""
        self._slots = Slots(concurrency)
        """Busy and reserved slots, runs handed over (`sursis/domain/hand_off.py`)."""

    def start(self) -> None:
        self._slots.reset()
        loops: list[tuple[str, Loop]] = [(f"claims-{i}", _Claims(self)) for i in range(self._concurrency)]
        loops += [("dispatcher", _Dispatcher(self)), ("sweeper", self._sweeper)]
        if self._deliverer is not None:
            loops.append(("webhooks", self._deliverer))
        loops += [(f"{type(loop).__name__}-{i}", loop) for i, loop in enumerate(self._loops)]
        self._supervisor.start(loops)

    def loops(self) -> list[LoopReport]:
        """Each loop of this worker: running, restarts, its last error."""
        return self._supervisor.report()

    async def stop(self, grace: float = 10.0) -> None:
        """Stop claiming; let running segments reach their next persistence point; release leases."""
        if not self._supervisor.started:
            return
        self._stopping.set()
        self._notifier.wake_all()
        self._slots.wake_all()
        restarts = sum(loop.restarts for loop in self._supervisor.report())
        forced = await self._supervisor.stop(grace)
        self._slots.reset()  # runs handed and not started: leased to this worker, released below
        async with self._uow() as uow:
            released = await uow.runs.release_all(self.id, self._clock())
            await uow.commit()
        log.info("worker.stopped", worker=self.id, released=released, forced=forced, restarts=restarts)

    async def _claims(self) -> None:
        while not self._stopping.is_set():
            try:
                await self.run_once()
            except Exception as exc:
                if is_transient_database_error(exc):
                    # An outage: one line per attempt, no traceback; claims resume when it ends.
                    log.warning("worker.database_unavailable", worker=self.id, error_class=type(exc).__name__)
                else:
                    log.exception("worker.loop_error", worker=self.id)
                await asyncio.sleep(self._poll)
            # To the queue again only when woken (`worker_slots.py`): a wake-up no idle loop took
            # waits for the first loop that goes idle.
            if not self._stopping.is_set():
                await self._slots.wait()

    async def _dispatch(self) -> None:
        """Each wake-up from the queue (or each poll interval without one: the safety poll while the
        process hears the others, `wakeup.py`) sends one idle loop to it."""
        while not self._stopping.is_set():
            await self._notifier.wait_for_work(self._hearing.poll(self._poll))
            self._slots.wake_one()

    # The claim hand-off: `RunHandOff` for the services of this process.

    def reserve(self) -> SlotLease | None:
        if not self._supervisor.started or self._stopping.is_set() or not self._slots.reserve():
            return None
        return SlotLease(self.id, self._clock() + self._lease)

    def cancel(self, lease: SlotLease) -> None:
        self._slots.cancel()

    def log_position(self, conversation_id: uuid.UUID) -> int:
        return self._runner.log_position(conversation_id) or 0

    def log_positions(self) -> dict[uuid.UUID, int]:
        return self._runner.log_positions()

    async def read_start(self, uow: UnitOfWork, run: Run) -> StartRead:
        return await self._read_start(uow, run)

    async def record_start(self, uow: UnitOfWork, run: Run, now: datetime) -> None:
        crash_point("run_leased")
        uow.events.handed(run.id)
        await uow.audit.append(self._segment_audit(run), now)
        await publish_run_status(uow, run, RunStatus.RUNNING.value, now)

    def hand(self, lease: SlotLease, run: Run, start: SegmentStartRead | None) -> None:
        crash_point("run_handed_off")
        if run.trace_context is None:  # the row got the request's, as `runs.add` writes it
            run = replace(run, trace_context=current_trace_context())
        read: StartRead = start if isinstance(start, tuple) else (None, None)
        # The lease is kept from now on, even if the run waits a moment for a loop.
        self._slots.hand(Handed(run, read, asyncio.create_task(self._heartbeat(run.id))))

    async def run_once(self) -> bool:
        """Claim and run one segment; False when there was nothing to do."""
        if self._stopping.is_set():
            return False
        handed = self._slots.take()
        if handed is not None:
            return await self._run_handed(handed)
        if not self._slots.may_claim():
            return False  # every slot runs a segment or waits for its hand-off
        return await self._claim_and_run()

    async def wait_idle(self, within: float) -> bool:
        """Until no slot of this worker runs or waits for a segment (False after `within` seconds)."""
        return await self._slots.idle(within)

    async def _run_handed(self, handed: Handed) -> bool:
        """A run a transaction of this process leased to this worker (a slot was reserved then)."""
        run = handed.run
        start, unreadable = handed.start
        self._running.add(run.id)
        try:
            crash_point("handed_run_started")
            if unreadable is not None:
                handed.heartbeat.cancel()
                await self._runner.fail_unreadable(run, self.id, unreadable)
                return True
            await self._drive(run, start, handed.heartbeat)
            return True
        finally:
            self._running.discard(run.id)
            self._slots.done()

    async def _claim_and_run(self) -> bool:
        if self._claim_unsure:
            await self._release_unsure_claims()
        now = self._clock()
        start: SegmentStart | None = None
        unreadable: EncryptionKeyUnavailable | EncryptedValueUnreadable | None = None
        claimed: uuid.UUID | None = None
        try:
            try:
                async with self._uow() as uow:
                    run = await uow.runs.claim_next(
                        self.id, now, now + self._lease, log_from=self._runner.log_positions()
                    )
                    if run is not None:
                        claimed = run.id
                        self._running.add(claimed)
                        self._slots.started()
                        self._slots.wake_one()  # more may be queued: the next idle loop looks
                    exhausted = run is not None and run.claims > self._max_attempts
                    if run is not None and not exhausted:
                        await uow.audit.append(self._segment_audit(run), now)
                        await publish_run_status(uow, run, RunStatus.RUNNING.value, now)
                        start, unreadable = await self._read_start(uow, run)
                    await uow.commit()
            except Exception as exc:
                if is_transient_database_error(exc):
                    self._claim_unsure = True
                raise
            if run is None:
                return False
            if unreadable is not None:
                # Another attempt would meet the same key: the run fails now, visibly, with the code.
                await self._runner.fail_unreadable(run, self.id, unreadable)
                return True
            if exhausted:
                # Every earlier claim since the last persistence point ended without progress (a
                # crash, an error outside the segment's own handling): stop re-queuing the run.
                await self._runner.give_up(run, self.id, self._max_attempts)
                return True
            await self._drive(run, start)
            return True
        finally:
            if claimed is not None:
                self._running.discard(claimed)
                self._slots.done()

    async def _drive(
        self, run: Run, start: SegmentStart | None, heartbeat: asyncio.Task[None] | None = None
    ) -> None:
        """One segment of a run this worker holds the lease of, with the lease's heartbeat."""
        self._telemetry.metrics.run_status(RunStatus.RUNNING)
        heartbeat = heartbeat or asyncio.create_task(self._heartbeat(run.id))
        try:
            with structlog.contextvars.bound_contextvars(worker=self.id):
                await self._runner.run_segment(run, self.id, self._stopping, start)
        finally:
            heartbeat.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await heartbeat

    async def _release_unsure_claims(self) -> None:
        """After a claim whose commit went unanswered: give back any run this worker holds but
        runs no segment of, instead of leaving it to its lease (raises while the database is away)."""
        async with self._uow() as uow:
            keep = sorted({*self._running, *(h.run.id for h in self._slots.handed)})
            released = await uow.runs.release_all(self.id, self._clock(), keep=keep)
            await uow.commit()
        self._claim_unsure = False
        if released:
            log.info("worker.unsure_claims_released", worker=self.id, released=released)
            self._notifier.wake_all()

    async def _read_start(
        self, uow: UnitOfWork, run: Run
    ) -> tuple[SegmentStart | None, EncryptionKeyUnavailable | EncryptedValueUnreadable | None]:
        """What the segment starts from, read in the claim's transaction rather than one of its own.

        A log it cannot read (a row that does not decode) must not undo the claim: the claim still
        commits and the segment reads again, so the failure counts against the run's attempts
        and a run that can never start is failed, not claimed forever. A log that does not open (a
        key missing from the keyring, or altered bytes) fails the run at once (second value).
        """
        try:
            return await self._runner.read_segment(uow, run), None
        except (sa_exc.SQLAlchemyError, HeldConditionFailed):
            raise  # the transaction's own failures (a held claim that did not hold) are its caller's
        except (EncryptionKeyUnavailable, EncryptedValueUnreadable) as exc:
            log.error("worker.segment_start_unreadable", run_id=str(run.id), code=exc.code, error=exc.message)
            if isinstance(exc, UnsealedValue) and not exc.recorded:
                exc.recorded = True  # written here, in the claim's transaction
                finding = exc.finding(run.workspace, run.conversation_id, run.id)
                await uow.audit.append(finding, self._clock())
            return None, exc
        except Exception as exc:
            log.warning("worker.segment_start_unreadable", run_id=str(run.id), error_class=type(exc).__name__)
            return None, None

    def _segment_audit(self, run: Run) -> AuditEntry:
        # Written in the claim transaction, before the segment's span exists: the row gets the
        # trace the segment is about to continue.
        return AuditEntry(
            action="run.started" if run.segment == 1 else "run.resumed",
            actor=ACTOR,
            workspace=run.workspace,
            conversation_id=run.conversation_id,
            run_id=run.id,
            details={"segment": run.segment, "worker": self.id},
            trace_id=trace_id_of(run.trace_context),
        )

    async def _heartbeat(self, run_id: uuid.UUID) -> None:
        """Renew the lease every third of it until the segment ends or another worker owns the run.

        A failed renewal (the database briefly unreachable) is logged and retried at the next beat:
        ending here would let a long segment lose its lease to a blip.
        """
        interval = self._lease.total_seconds() / 3
        while True:
            await asyncio.sleep(interval)
            now = self._clock()
            try:
                async with self._uow() as uow:
                    renewed = await uow.runs.renew_lease(run_id, self.id, now + self._lease)
                    await uow.commit()
            except Exception as exc:
                log.warning(
                    "worker.heartbeat_failed",
                    run_id=str(run_id),
                    error_class=type(exc).__name__,
                    error=str(exc)[:200],
                )
                continue
            if not renewed:
                return

    async def sweep(self) -> int:
        """One sweeper pass now (`Sweeper.sweep`)."""
        return await self._sweeper.sweep()


class _Claims:
    """One claim loop: a slot's turn at the queue (`Worker._claims`)."""

    def __init__(self, worker: Worker) -> None:
        self._worker = worker

    async def run(self, stopping: asyncio.Event) -> None:
        await self._worker._claims()


class _Dispatcher:
    """The loop that sends an idle claim loop to the queue at each wake-up (`Worker._dispatch`)."""

    def __init__(self, worker: Worker) -> None:
        self._worker = worker

    async def run(self, stopping: asyncio.Event) -> None:
        await self._worker._dispatch()
