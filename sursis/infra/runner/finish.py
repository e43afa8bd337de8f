"""The end of a run: completed, failed or cancelled, written in one transaction."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal

from opentelemetry.trace import Span
from pydantic_ai.exceptions import UsageLimitExceeded
from pydantic_ai.messages import ModelMessage

from sursis.domain.ports import UnitOfWork
from sursis.domain.records import AuditEntry, Run, RunError, Usage
from sursis.domain.runs import run_lifecycle
from sursis.domain.runs.run_lifecycle import ToolEvents
from sursis.domain.states import RunStatus
from sursis.infra.agents import approved_args
from sursis.infra.agents.agent_deps import DepsFactoryFailed, OpenedDeps
from sursis.infra.db.held import GuardFailed
from sursis.infra.runner.base import ACTOR, RunnerParts, log
from sursis.infra.runner.events import EventPublisher
from sursis.infra.runner.failures import run_failure
from sursis.infra.runner.leases import CancelRequested, LeaseLost
from sursis.infra.runner.segment import Segment


class Finisher:
    """A run's end: its last messages, the final status, the audit row, the closing events; and
    why a segment ends a run (a cancel, the step limit, an error, a refusal)."""

    def __init__(self, parts: RunnerParts, events: EventPublisher, step_limit: int) -> None:
        self._uow, self._clock, self._metrics = parts.uow, parts.clock, parts.metrics
        self.events = events
        self._step_limit = step_limit

    async def step_limit_reached(
        self,
        run: Run,
        owner: str,
        messages: Sequence[ModelMessage],
        usage: Usage,
        announced: set[str] | None = None,
    ) -> RunStatus:
        return await self.finish(
            run,
            owner,
            messages,
            RunStatus.FAILED,
            usage,
            announced=announced,
            error=RunError(
                "step_limit",
                f"the agent made {self._step_limit} model requests in this run without finishing; "
                "the conversation stays usable",
            ),
        )

    async def finish(
        self,
        run: Run,
        owner: str,
        messages: Sequence[ModelMessage],
        status: RunStatus,
        usage: Usage,
        *,
        output: str | None = None,
        error: RunError | None = None,
        announced: set[str] | None = None,
        findings: Sequence[AuditEntry] = (),
    ) -> RunStatus:
        """End the run; `findings` are audit rows written in the same transaction (what a refusal
        found, e.g. `integrity.args_mismatch`)."""
        now = self._clock()
        tool_events = self.events.tool_events(run, messages, announced)
        completing = status is RunStatus.COMPLETED

        try:
            async with self._uow() as uow:
                for finding in findings:
                    await uow.audit.append(finding, now)
                last_seq = await self._end(
                    uow,
                    run,
                    owner,
                    messages,
                    status,
                    usage,
                    now,
                    output=output,
                    error=error,
                    announced=announced,
                    tool_events=tool_events,
                    unless_cancel_requested=completing,
                )
                if last_seq is False and completing and await uow.runs.cancel_requested(run.id):
                    # A cancel that came after the last persistence point still wins; the answer
                    # stays in the log.
                    status, output = RunStatus.CANCELLED, None
                    last_seq = await self.end_cancelled(
                        uow, run, owner, messages, usage, now, announced, tool_events
                    )
                if last_seq is False:
                    raise LeaseLost()
                await uow.commit()
        except GuardFailed:
            # On PostgreSQL the end was held to the commit, which found the lease gone (or, for a
            # completion, a cancel requested) and wrote nothing: asked again in a transaction.
            async with self._uow() as uow:
                if not (completing and await uow.runs.cancel_requested(run.id)):
                    raise LeaseLost() from None
                status, output = RunStatus.CANCELLED, None
                last_seq = await self.end_cancelled(
                    uow, run, owner, messages, usage, now, announced, tool_events
                )
                if last_seq is False:
                    raise LeaseLost() from None
                await uow.commit()
        return self.ended(
            announced, last_seq, status, error=error.code if error else None, usage=usage.to_json()
        )

    def ended(
        self, announced: set[str] | None, last_seq: int | None, status: RunStatus, **logged: Any
    ) -> RunStatus:
        """After the end's commit: the stored messages counted as announced, the status counted and
        logged (`run.<status>`, with `logged`)."""
        self.events.appended(announced, last_seq)
        self._metrics.run_status(status)
        log.info(f"run.{status.value}", **logged)
        return status

    async def end_cancelled(
        self,
        uow: UnitOfWork,
        run: Run,
        owner: str,
        messages: Sequence[ModelMessage],
        usage: Usage,
        now: datetime,
        announced: set[str] | None,
        tool_events: ToolEvents,
        details: dict[str, Any] | None = None,
    ) -> int | Literal[False] | None:
        """The end written as cancelled in the caller's transaction (see `_end`): a cancel requested
        after the last persistence point wins over a completion or a suspension."""
        return await self._end(
            uow,
            run,
            owner,
            messages,
            RunStatus.CANCELLED,
            usage,
            now,
            announced=announced,
            details=details,
            tool_events=tool_events,
        )

    async def _end(
        self,
        uow: UnitOfWork,
        run: Run,
        owner: str,
        messages: Sequence[ModelMessage],
        status: RunStatus,
        usage: Usage,
        now: datetime,
        *,
        output: str | None = None,
        error: RunError | None = None,
        announced: set[str] | None = None,
        details: dict[str, Any] | None = None,
        tool_events: ToolEvents | None = None,
        unless_cancel_requested: bool = False,
    ) -> int | Literal[False] | None:
        """Write the run's end in the caller's transaction: the final status, the audit row, the
        conversation freed, its last messages and the closing events.

        Returns the log's new last seq (None: no message stored; see `appended`), or False, having
        written nothing, when the lease is no longer `owner`'s (or, with `unless_cancel_requested`,
        a cancel was requested).
        """
        if tool_events is None:
            tool_events = self.events.tool_events(run, messages, announced)
        match status:
            case RunStatus.COMPLETED:
                ended = await run_lifecycle.complete(
                    uow,
                    run,
                    owner,
                    usage,
                    output,
                    now,
                    actor=ACTOR,
                    tool_events=tool_events,
                    unless_cancel_requested=unless_cancel_requested,
                )
            case RunStatus.FAILED if error is not None:
                ended = await run_lifecycle.fail(
                    uow, run, owner, usage, error, now, actor=ACTOR, tool_events=tool_events
                )
            case RunStatus.CANCELLED:
                ended = await run_lifecycle.cancel(
                    uow, run, owner, usage, now, actor=ACTOR, tool_events=tool_events, details=details
                )
            case _:
                raise ValueError(f"a segment does not end a run as {status.value} (error: {error})")
        if not ended:
            return False
        return await self.events.append(uow, run, messages, now, announced)

    async def deps_failed(self, run: Run, owner: str, span: Span, exc: DepsFactoryFailed) -> RunStatus:
        """The run failed: the agent's deps factory failed to open its deps."""
        # The factory's error text may hold a URL with its credentials: masked in the trace
        # as in the log line (whose fields and traceback the log configuration masks).
        span.add_event("exception", {"exception.type": type(exc).__name__, **exc.masked()})
        log.error("run.deps_failed", error=str(exc), exc_info=exc.__cause__)
        error = RunError("deps_failed", f"{exc.summary}; details are in the service logs")
        return await self.finish(run, owner, [], RunStatus.FAILED, run.usage, error=error)

    async def stopped(self, segment: Segment, exc: CancelRequested | UsageLimitExceeded) -> RunStatus:
        """The run's end when its agent stopped on a cancel or on the step limit."""
        run, owner, held = segment.run, segment.owner, segment.held
        if isinstance(exc, CancelRequested):
            return await self.finish(run, owner, [], RunStatus.CANCELLED, held.usage)
        return await self.step_limit_reached(run, owner, held.unsaved(), held.usage, segment.announced)

    async def failed(self, segment: Segment, exc: Exception, opened: OpenedDeps | None) -> RunStatus:
        """The run failed on an error of its agent (or of a tool that the tool wrapper let through)."""
        segment.span.record_exception(exc)
        failure = run_failure(exc)
        if approved_args.refusal(exc) is None:  # a refusal was logged where it was made
            log.exception("run.segment_error", error=failure.message)
        if opened is not None:
            opened.failure = exc
        held = segment.held
        return await self.finish(
            segment.run,
            segment.owner,
            held.unsaved(),
            RunStatus.FAILED,
            held.usage,
            error=failure,
            announced=segment.announced,
        )

    async def refuse_forged(
        self,
        run: Run,
        owner: str,
        forged: list[approved_args.Mismatch],
    ) -> RunStatus:
        """Fail the run on approved calls whose arguments changed, with a finding for each."""
        for found in forged:
            approved_args.logged(found)
        findings = [f.audit_entry(run.workspace, run.conversation_id, run.id) for f in forged]
        error = approved_args.run_error(forged)
        return await self.finish(run, owner, [], RunStatus.FAILED, run.usage, error=error, findings=findings)
