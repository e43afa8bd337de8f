"""The agent loop driver: one claimed run, one segment of pydantic-ai, persisted as it goes."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack, suppress
from dataclasses import dataclass
from typing import Any

import structlog
from opentelemetry.trace import Span, Status, StatusCode
from pydantic_ai import Agent, AgentRun
from pydantic_ai.exceptions import (
    UsageLimitExceeded,
)
from pydantic_ai.messages import (
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
)
from pydantic_ai.tools import DeferredToolRequests, ToolDenied
from pydantic_ai.usage import UsageLimits
from pydantic_core import to_json

from sursis.domain.ports import UnitOfWork
from sursis.domain.records import JsonText, PendingCall, Run, RunError, ToolCallRecord
from sursis.domain.states import RunStatus
from sursis.infra.agents import approved_args
from sursis.infra.agents.agent_deps import DepsFactoryFailed, OpenedDeps, RunInfo
from sursis.infra.agents.run_deps import RunDeps, current_run_deps
from sursis.infra.db.held import GuardFailed
from sursis.infra.faults import crash_point
from sursis.infra.runner.base import log
from sursis.infra.runner.events import Announced
from sursis.infra.runner.failures import is_transient_database_error, run_failure
from sursis.infra.runner.leases import CancelRequested, Interrupted, LeaseLost, Leases
from sursis.infra.runner.resume import (
    NotReady,
    deferred_results,
    policy_denial,
    unanswered_tool_calls,
)
from sursis.infra.runner.stream import Streaming
from sursis.infra.runner.suspend import Suspending
from sursis.infra.runner.usage import usage_record
from sursis.infra.telemetry import context_from, segment_attributes


def is_final_answer(message: ModelMessage) -> bool:
    """A response that calls no tool: nothing runs after it, so the end of the run stores it.

    Messages are persisted before anything acts on them (a tool's effect must find its call in
    the log: `RunDeps.before_effect` stores them as a tool is about to run), and otherwise with
    the suspension or the end of the run, in its transaction. A crash before then loses them, and
    the run is claimed again and asks the model again, as after a crash during the request.
    """
    return isinstance(message, ModelResponse) and not any(isinstance(p, ToolCallPart) for p in message.parts)


@dataclass(frozen=True, slots=True)
class SegmentStart:
    """What a segment starts from: the log as the model is shown it, and the state of the calls
    its last response left unanswered."""

    last_seq: int
    started: bool
    """The run's prompt is in the log already (a resumed or retried run)."""
    history: list[ModelMessage]
    tail: list[ToolCallPart]
    """The last response's calls that have no result in the log."""
    pending: list[PendingCall]
    recorded: dict[str, ToolCallRecord]
    """The stored outcomes of `tail`'s calls that already ran, by tool call id."""
    producer: Run | None
    """The earlier run whose response left `tail`, if it was not this run."""


class AgentRunner(Suspending, Leases, Streaming):
    """Runs one segment of a claimed run and leaves the run suspended, completed, failed or cancelled."""

    async def run_segment(
        self,
        run: Run,
        owner: str,
        stopping: asyncio.Event | None = None,
        start: SegmentStart | None = None,
    ) -> RunStatus | None:
        """One segment, in a `run.segment` span that continues the trace stored on the run.

        The first segment continues the trace of the request that queued the run; a resumed one
        continues the segment that suspended it, so the whole run is one trace. `start` is what
        `read_segment` read in the claim's transaction; without it the segment reads it itself.
        """
        with (
            structlog.contextvars.bound_contextvars(
                run_id=str(run.id), conversation_id=str(run.conversation_id), segment=run.segment
            ),
            self._telemetry.tracer.start_as_current_span(
                "run.segment",
                context=context_from(run.trace_context),
                attributes=segment_attributes(run) if self._telemetry.records_spans else None,
            ) as span,
        ):
            try:
                status = await self._run_segment(run, owner, span, stopping or asyncio.Event(), start)
            except LeaseLost:
                span.set_attribute("sursis.run.lease_lost", True)
                log.warning("run.lease_lost")
                return None
            except NotReady as exc:
                log.error("run.queued_while_awaiting", error=str(exc))
                with suppress(GuardFailed):  # a lost lease: nothing to put back
                    async with self._uow() as uow:
                        await uow.runs.finish(
                            run.id, owner, RunStatus.SUSPENDED, self._clock(), awaiting_count=exc.awaiting
                        )
                        await uow.commit()
                return RunStatus.SUSPENDED
            except Interrupted:
                async with self._uow() as uow:
                    await uow.runs.release(run.id, owner, self._clock())
                    await uow.commit()
                log.info("run.released_for_shutdown")
                await self._notifier.run_queued(run.id)
                return None
            except Exception as exc:
                if not is_transient_database_error(exc):
                    raise
                # Nothing of the failed transaction was kept: the run goes back to the queue as
                # soon as the database answers, and the next claim continues from the log.
                span.record_exception(exc)
                span.set_attribute("sursis.run.abandoned", True)
                log.warning("run.segment_abandoned", error_class=type(exc).__name__, error=str(exc)[:300])
                await self._release_after_blip(run, owner)
                return None
            span.set_attribute("sursis.run.status", status.value)
            if status is RunStatus.FAILED:
                span.set_status(Status(StatusCode.ERROR, "run failed"))
        await self._notifier.run_changed(run.id)
        return status

    async def read_segment(self, uow: UnitOfWork, run: Run) -> SegmentStart:
        """What a segment of `run` starts from, read in the caller's transaction: the worker reads
        it in the transaction that claims the run, so a segment costs no read transaction of its own."""
        stored = await self._logs.read(uow.messages, run.conversation_id)
        # The current turn and up to `history_turns` earlier ones; the current turn's prompt is
        # already in the log once the run has started.
        started = run.id in stored.run_ids
        turns = self._history_turns
        shown = stored.window(turns + 1 if started and turns else turns)
        history = shown.history()
        last_response, tail = unanswered_tool_calls(history)
        tail_ids = [p.tool_call_id for p in tail]
        rows, recorded = await uow.pending.with_outcomes(run.conversation_id, tail_ids)
        producer_id = shown.run_ids[last_response] if tail and last_response is not None else None
        producer = await uow.runs.get(producer_id) if producer_id and producer_id != run.id else None
        return SegmentStart(stored.last_seq, started, history, tail, rows, recorded, producer)

    async def _run_segment(
        self, run: Run, owner: str, span: Span, stopping: asyncio.Event, start: SegmentStart | None
    ) -> RunStatus:
        if run.agent not in self._served:
            # The API that queued the run serves an agent this worker does not: give both the
            # same agents (`--agents`, SURSIS_AGENTS).
            log.error("run.agent_not_served", agent=run.agent)
            error = RunError("agent_not_served", f"agent {run.agent!r} is not served by the worker")
            return await self._finish(run, owner, [], RunStatus.FAILED, run.usage, error=error)
        if start is None:
            async with self._uow.reader() as uow:
                start = await self.read_segment(uow, run)
        announced = Announced()
        announced.last_seq = start.last_seq
        started, history, tail = start.started, start.history, start.tail
        tail_ids = [p.tool_call_id for p in tail]
        recorded, producer = start.recorded, start.producer
        if started and history and isinstance(history[-1], ModelResponse) and not tail:
            # A crash after the final answer was stored but before the run was marked done.
            text = "".join(p.content for p in history[-1].parts if isinstance(p, TextPart))
            return await self._finish(run, owner, [], RunStatus.COMPLETED, run.usage, output=text)
        served = self._served[run.agent]
        # Calls left by an earlier run that ended (cancelled, failed) were never performed.
        abandoned = producer is not None and producer.status.finished
        results = deferred_results(tail, start.pending, abandoned, raw=served.raw_results)
        if (forged := approved_args.mismatches(tail, results, recorded)) and not abandoned:
            # Nothing of the segment runs: an approved call would run with other arguments.
            return await self._refuse_forged(run, owner, forged)
        if forged and results is not None:
            # Left by a run that failed on them: the model of a later turn is told they did not run.
            for found in forged:
                results.approvals[found.tool_call_id] = ToolDenied(
                    policy_denial("APPROVED_ARGS_MISMATCH", approved_args.run_error([found]).message)
                )
        if results is not None:
            crash_point("segment_resumed")
        remaining = self._step_limit - run.usage.requests
        if remaining <= 0:
            return await self._step_limit_reached(run, owner, [], run.usage)

        agent = served.agent
        mcp = self._definitions[run.agent].mcp
        if mcp is not None:
            await mcp.connect()  # once per process; again after the server died
        persisted = 0
        usage = run.usage
        agent_run: AgentRun[Any, Any] | None = None

        persisting = asyncio.Lock()
        cancel_seen = False

        async def before_effect() -> None:
            """Store the messages held back, before anything acts on them; a cancel stops here.

            The calls of one response run concurrently: the first stores the response, the
            others wait for it (and for its answer to a cancel) instead of storing it again.
            """
            nonlocal persisted, usage, cancel_seen
            if agent_run is None:
                return
            async with persisting:
                new = agent_run.new_messages()
                if len(new) > persisted:
                    usage = run.usage.add(usage_record(agent_run.usage))
                    cancel_seen = await self._persist(run, owner, new[persisted:], usage, announced, stopping)
                    persisted = len(new)
            if cancel_seen:
                raise CancelRequested()

        deps = RunDeps(
            conversation_id=run.conversation_id,
            run_id=run.id,
            workspace=run.workspace,
            agent_name=run.agent,
            uow=self._uow,
            clock=self._clock,
            policy=self._policy,
            progress=self._progress_sink(run),
            agents=self._agents,
            agent_deps=self._agent_deps,
            run_info=run_info(run),
            tracer=self._telemetry.tracer,
            announced=announced,
            before_effect=before_effect,
            outcomes={i: recorded.get(i) for i in tail_ids},
        )
        span.set_attribute("sursis.segment.resumed", bool(results))
        log.info("run.segment_started", resumed=bool(results))
        async with AsyncExitStack() as stack:
            opened = None if served.deps is None else OpenedDeps(served.deps, run_info(run))
            try:
                own_deps = deps if opened is None else await stack.enter_async_context(opened)
            except DepsFactoryFailed as exc:
                # The factory's error text may hold a URL with its credentials: masked in the trace
                # as in the log line (whose fields and traceback the log configuration masks).
                span.add_event("exception", {"exception.type": type(exc).__name__, **exc.masked()})
                log.error("run.deps_failed", error=str(exc), exc_info=exc.__cause__)
                error = RunError("deps_failed", f"{exc.summary}; details are in the service logs")
                return await self._finish(run, owner, [], RunStatus.FAILED, run.usage, error=error)
            token = current_run_deps.set(deps)
            stack.callback(current_run_deps.reset, token)
            try:
                async with agent.iter(
                    None if started else run.input,
                    message_history=history,
                    deferred_tool_results=results,
                    deps=own_deps,
                    usage_limits=UsageLimits(request_limit=remaining),
                    **served.iter_options,
                ) as agent_run:
                    async for node in agent_run:
                        if Agent.is_end_node(node):
                            break
                        if stopping.is_set():
                            # Shutting down: store what is held back and give the run back here.
                            new = agent_run.new_messages()
                            if len(new) > persisted and not is_final_answer(new[-1]):
                                await before_effect()
                        if Agent.is_model_request_node(node):
                            # Tool results reach the log with the next response; announce them now.
                            await self._publish_request(run, node.request, announced)
                            if served.streams:
                                async with node.stream(agent_run.ctx) as stream:
                                    await self._stream_response(run, stream, announced)
                        elif Agent.is_call_tools_node(node) and not served.streams:
                            # A model that does not stream: its text arrives as one delta.
                            await self._deliver_response(run, node.model_response, announced)
                    result = agent_run.result
                    usage = run.usage.add(usage_record(agent_run.usage))
                    new = agent_run.new_messages()[persisted:]
            except CancelRequested:
                return await self._finish(run, owner, [], RunStatus.CANCELLED, usage)
            except UsageLimitExceeded:
                unsaved = agent_run.new_messages()[persisted:] if agent_run else []
                return await self._step_limit_reached(run, owner, unsaved, usage, announced)
            except (LeaseLost, Interrupted):
                raise
            except Exception as exc:
                if is_transient_database_error(exc):
                    raise
                span.record_exception(exc)
                failure = run_failure(exc)
                if approved_args.refusal(exc) is None:  # a refusal was logged where it was made
                    log.exception("run.segment_error", error=failure.message)
                if opened is not None:
                    opened.failure = exc
                return await self._finish(
                    run,
                    owner,
                    agent_run.new_messages()[persisted:] if agent_run else [],
                    RunStatus.FAILED,
                    usage,
                    error=failure,
                    announced=announced,
                )
        if result is None:
            raise RuntimeError("agent run ended without a result")
        output = result.output
        if isinstance(output, DeferredToolRequests):
            return await self._suspend(run, owner, new, output, usage, announced)
        return await self._finish(
            run, owner, new, RunStatus.COMPLETED, usage, output=output_text(output), announced=announced
        )

    async def _refuse_forged(
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
        return await self._finish(run, owner, [], RunStatus.FAILED, run.usage, error=error, findings=findings)


def output_text(output: Any) -> str:
    """A run's output as stored: the text answer, or an agent's structured output as JSON (marked
    `JsonText`, so that it is shown as JSON)."""
    return output if isinstance(output, str) else JsonText(to_json(output).decode())


def run_info(run: Run) -> RunInfo:
    """What an agent's deps factory is told of the run."""
    return RunInfo(
        workspace=run.workspace,
        conversation_id=run.conversation_id,
        run_id=run.id,
        agent=run.agent,
        channel=run.channel,
        key_id=run.started_by,
        role=run.started_role,
        segment=run.segment,
    )
