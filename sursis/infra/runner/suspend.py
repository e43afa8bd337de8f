"""Suspending a run: its deferred tool calls become pending calls, announced and audited."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from pydantic_ai.messages import ModelMessage
from pydantic_ai.tools import DeferredToolRequests

from sursis.domain.policy_decisions import PolicyDecision
from sursis.domain.ports import UnitOfWork
from sursis.domain.records import PendingCall, Run, Usage
from sursis.domain.runs import run_lifecycle
from sursis.domain.runs.run_lifecycle import ToolEvents
from sursis.domain.sanitize import pending_args_hash
from sursis.domain.states import PendingStatus, RunStatus
from sursis.domain.tools import Executor, PendingKind, ToolApprovalRequest
from sursis.infra.agents.nested import deferred_targets
from sursis.infra.db.held import GuardFailed
from sursis.infra.runner.base import ACTOR, RunnerParts, log
from sursis.infra.runner.events import EventPublisher
from sursis.infra.runner.finish import Finisher
from sursis.infra.runner.leases import LeaseLost
from sursis.infra.telemetry import current_trace_context


class Suspender:
    """A segment that ends with deferred tool calls leaves the run suspended on them."""

    def __init__(
        self,
        parts: RunnerParts,
        events: EventPublisher,
        finisher: Finisher,
        timeouts: Mapping[PendingKind, timedelta],
    ) -> None:
        self._uow, self._clock, self._definitions = parts.uow, parts.clock, parts.definitions
        self.events = events
        self.finisher = finisher
        self._timeouts = timeouts

    async def _requester(self, run: Run) -> str | None:
        """The key that caused this segment's calls: the one that posted the message or created the
        event (`started_by`) or, once a person answered a call of this run (an elicitation, a client
        call), the latest key that answered: the model acted on its answer. The first segment (claims
        count from 1) reads nothing."""
        if run.segment <= 1:
            return run.started_by
        async with self._uow.reader() as uow:
            answered = await uow.pending.for_run(run.id, PendingStatus.ANSWERED)
        latest = max(answered, key=lambda call: call.resolved_at or call.created_at, default=None)
        if latest is None or not latest.resolved_by:
            return run.started_by
        return latest.resolved_by

    async def suspend(
        self,
        run: Run,
        owner: str,
        messages: Sequence[ModelMessage],
        output: DeferredToolRequests,
        usage: Usage,
        announced: set[str],
    ) -> RunStatus:
        now = self._clock()
        calls = self._pending_calls(run, output, now, await self._requester(run))
        tool_events = self.events.tool_events(run, messages, announced)
        try:
            async with self._uow() as uow:
                suspended = await run_lifecycle.suspend(
                    uow,
                    run,
                    owner,
                    calls,
                    usage,
                    now,
                    actor=ACTOR,
                    tool_events=tool_events,
                    trace_context=current_trace_context(),
                    unless_cancel_requested=True,
                )
                if not suspended:
                    return await self._not_suspended(
                        uow, run, owner, messages, calls, usage, now, announced, tool_events
                    )
                last_seq = await self.events.append(uow, run, messages, now, announced)
                await uow.commit()
        except GuardFailed:
            # On PostgreSQL the suspension was held to the commit, which found the lease gone or a
            # cancel requested and wrote nothing: the same question again, in a transaction of its own.
            async with self._uow() as uow:
                return await self._not_suspended(
                    uow, run, owner, messages, calls, usage, now, announced, tool_events
                )
        for call in calls:
            log.info(
                "pending.requested",
                correlation_id=str(call.correlation_id),
                tool_call_id=call.tool_call_id,
                tool_name=call.tool_name,
                kind=call.kind.value,
                expires_at=call.expires_at.isoformat(),
            )
        return self.finisher.ended(
            announced, last_seq, RunStatus.SUSPENDED, pending=len(calls), usage=usage.to_json()
        )

    def _pending_calls(
        self, run: Run, output: DeferredToolRequests, now: datetime, requester: str | None
    ) -> list[PendingCall]:
        """The pending calls the segment's deferred tool calls become (nested agents' included)."""
        calls: list[PendingCall] = []
        for target in deferred_targets(run.agent, output):
            owner_definition = self._definitions.get(target.agent)
            spec = owner_definition.spec(target.tool_name) if owner_definition else None
            kind = target.kind
            args = target.args
            request = ToolApprovalRequest.for_call(spec, target.tool_name, target.agent, target.shown_args())
            calls.append(
                PendingCall(
                    correlation_id=request.correlation_id,
                    conversation_id=run.conversation_id,
                    run_id=run.id,
                    workspace=run.workspace,
                    segment=run.segment,
                    tool_call_id=target.tool_call_id,
                    tool_name=target.tool_name,
                    agent=target.agent,
                    executor=spec.executor if spec else Executor.SERVER,
                    kind=kind,
                    args=args,
                    args_summary=request.args_summary,
                    args_hash=pending_args_hash(target.tool_name, args, target.validated_args),
                    validated_args=target.validated_args,
                    effect_description=request.effect_description,
                    status=PendingStatus.AWAITING,
                    created_at=now,
                    expires_at=now
                    + _wait_for(
                        target.policy,
                        spec.timeout_for(kind, self._timeouts) if spec else self._timeouts[kind],
                    ),
                    agent_path=target.agent_path,
                    category=spec.category if spec else None,
                    policy=target.policy,
                    requested_by=requester,
                )
            )
        return calls

    async def _not_suspended(
        self,
        uow: UnitOfWork,
        run: Run,
        owner: str,
        messages: Sequence[ModelMessage],
        calls: Sequence[PendingCall],
        usage: Usage,
        now: datetime,
        announced: set[str],
        tool_events: ToolEvents,
    ) -> RunStatus:
        """The suspension was refused: the run is cancelled if a cancel was requested and the lease
        is still `owner`'s, else the lease was lost (`LeaseLost`)."""
        if not await uow.runs.cancel_requested(run.id):
            raise LeaseLost()
        # Cancelled after the last persistence point: nobody is asked. The calls stay
        # unanswered in the log and the next message tells the model they were not performed.
        details = {"calls_not_requested": len(calls)}
        last_seq = await self.finisher.end_cancelled(
            uow, run, owner, messages, usage, now, announced, tool_events, details
        )
        if last_seq is False:
            raise LeaseLost()
        await uow.commit()
        return self.finisher.ended(announced, last_seq, RunStatus.CANCELLED, usage=usage.to_json(), **details)


def _wait_for(policy: PolicyDecision | None, declared: timedelta) -> timedelta:
    """How long a call may wait: its route's timeout when the policy names one, else the tool's."""
    if policy is not None and policy.route is not None and policy.route.timeout is not None:
        return policy.route.timeout
    return declared
