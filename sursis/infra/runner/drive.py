"""The agent loop driver: one claimed run, one segment of pydantic-ai, persisted as it goes."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Mapping
from contextlib import AsyncExitStack, suppress
from datetime import timedelta
from functools import partial

import structlog
from opentelemetry.trace import Span, Status, StatusCode
from pydantic_ai import Agent
from pydantic_ai.exceptions import UsageLimitExceeded
from pydantic_ai.messages import ModelResponse, TextPart
from pydantic_ai.models import Model
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, ToolDenied
from pydantic_ai.usage import UsageLimits

from sursis.domain.clock import Clock
from sursis.domain.errors import ServiceError
from sursis.domain.ports import UnitOfWork, UnitOfWorkFactory
from sursis.domain.records import Run, RunError
from sursis.domain.states import RunStatus
from sursis.infra.agents import approved_args, deps_state
from sursis.infra.agents.agent_deps import DepsFactoryFailed, OpenedDeps
from sursis.infra.agents.declarations import AgentDefinition
from sursis.infra.agents.resumed import NotReady, deferred_results, policy_denial, unanswered_tool_calls
from sursis.infra.agents.run_deps import PreApprovalPolicy, RunDeps, current_run_deps
from sursis.infra.db.held import GuardFailed
from sursis.infra.faults import crash_point
from sursis.infra.history import MessageLogCache
from sursis.infra.notifier import LocalRunNotifier
from sursis.infra.runner.agents import ServedAgent, serve_agent
from sursis.infra.runner.base import RunnerParts, Timeouts, log
from sursis.infra.runner.events import Announced, EventPublisher
from sursis.infra.runner.failures import is_transient_database_error
from sursis.infra.runner.finish import Finisher
from sursis.infra.runner.leases import CancelRequested, Interrupted, LeaseKeeper, LeaseLost
from sursis.infra.runner.segment import Held, Segment, SegmentStart, is_final_answer, output_text, run_info
from sursis.infra.runner.stream import ResponseStreamer
from sursis.infra.runner.suspend import Suspender
from sursis.infra.runner.usage import usage_record
from sursis.infra.telemetry import Telemetry, context_from, segment_attributes


class AgentRunner:
    """Runs one segment of a claimed run and leaves the run suspended, completed, failed or cancelled.

    Its collaborators, built here from the same parts: `events` publishes, `streamer` streams a
    response as it arrives, `leases` stores progress under the lease, `suspender` and `finisher`
    end the segment.
    """

    def __init__(
        self,
        uow: UnitOfWorkFactory,
        definitions: Mapping[str, AgentDefinition],
        model: Model,
        notifier: LocalRunNotifier,
        *,
        clock: Clock,
        step_limit: int,
        timeouts: Timeouts,
        lease: timedelta,
        policy: PreApprovalPolicy | None = None,
        telemetry: Telemetry | None = None,
        delta_interval: float = 0.1,
        history_cache_messages: int = 2_000,
        history_turns: int = 0,
    ) -> None:
        self._telemetry = telemetry = telemetry or Telemetry.disabled()
        parts = RunnerParts(uow, clock, notifier, telemetry.metrics, dict(definitions))
        self._uow, self._clock, self._notifier, self._definitions = uow, clock, notifier, parts.definitions
        # A segment shows the model its own turn and `history_turns` before it: the cache keeps those.
        self._logs = MessageLogCache(
            history_cache_messages, keep_turns=history_turns + 1 if history_turns else 0
        )
        self._history_turns = history_turns
        self._served = {
            name: serve_agent(d, d.model if isinstance(d.model, Model) else model, telemetry)
            for name, d in definitions.items()
        }
        self._agents = {
            name: served.runnable(d.mcp.connect if d.mcp is not None else None)
            for (name, served), d in zip(self._served.items(), definitions.values(), strict=True)
        }
        self._agent_deps = {name: s.deps for name, s in self._served.items() if s.deps is not None}
        self._step_limit = step_limit
        self._policy = policy or PreApprovalPolicy()
        self.events = EventPublisher(parts)
        self.streamer = ResponseStreamer(parts, self.events, delta_interval)
        self.leases = LeaseKeeper(parts, self.events, lease)
        self.finisher = Finisher(parts, self.events, step_limit)
        self.suspender = Suspender(parts, self.events, self.finisher, timeouts.as_mapping())

    def log_position(self, conversation_id: uuid.UUID) -> int | None:
        """How far this runner has read the conversation's log (None: not kept)."""
        return self._logs.position(conversation_id)

    def log_positions(self) -> dict[uuid.UUID, int]:
        """How far this runner has read the logs of recently run conversations (`claim_next`)."""
        return self._logs.positions()

    async def fail_unreadable(self, run: Run, owner: str, exc: ServiceError) -> RunStatus:
        """Fail a run the worker just claimed whose log does not open (`encryption_key_unavailable`
        or `encrypted_value_unreadable`, naming the key): no attempt can succeed until the key is
        back, so the run is not left `running` or re-queued; the conversation is freed."""
        with structlog.contextvars.bound_contextvars(
            run_id=str(run.id), conversation_id=str(run.conversation_id)
        ):
            status = await self.finisher.finish(
                run, owner, [], RunStatus.FAILED, run.usage, error=RunError(exc.code, exc.message)
            )
        await self._notifier.run_changed(run.id)
        return status

    async def give_up(self, run: Run, owner: str, attempts: int) -> RunStatus:
        """Fail a run the worker just claimed whose last `attempts` segments all ended without
        reaching a persistence point; the conversation is freed."""
        with structlog.contextvars.bound_contextvars(
            run_id=str(run.id), conversation_id=str(run.conversation_id)
        ):
            log.error("run.segment_attempts_exhausted", attempts=attempts)
            error = RunError(
                "segment_attempts_exhausted",
                f"{attempts} attempts in a row to continue this run ended without progress; "
                "details are in the service logs; the conversation stays usable",
            )
            status = await self.finisher.finish(run, owner, [], RunStatus.FAILED, run.usage, error=error)
        await self._notifier.run_changed(run.id)
        return status

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
                await self.leases.release_after_blip(run, owner)
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
        """The segment's agent loop, run in this coroutine itself: every coroutine between the loop
        and the task is resumed, and counted, at each step of the agent, so the steps before and
        after the loop are called from here and the loop is not."""
        prepared = await self._prepared(run, owner, span, stopping, start)
        if isinstance(prepared, RunStatus):
            return prepared
        segment, results, remaining = prepared
        served, held, announced = segment.served, segment.held, segment.announced
        deps = self._run_deps(segment)
        async with AsyncExitStack() as stack:
            opened = None if served.deps is None else OpenedDeps(served.deps, run_info(run))
            try:
                own_deps = deps if opened is None else await stack.enter_async_context(opened)
            except DepsFactoryFailed as exc:
                return await self.finisher.deps_failed(run, owner, span, exc)
            if opened is not None and segment.start.started:
                await deps_state.restore(self._uow, run.id, own_deps)
            token = current_run_deps.set(deps)
            stack.callback(current_run_deps.reset, token)
            try:
                async with served.agent.iter(
                    None if segment.start.started else run.input,
                    message_history=segment.start.history,
                    deferred_tool_results=results,
                    deps=own_deps,
                    usage_limits=UsageLimits(request_limit=remaining),
                    **served.iter_options,
                ) as agent_run:
                    held.agent_run = agent_run
                    streams = served.streams and run.stream
                    async for node in agent_run:
                        if Agent.is_end_node(node):
                            break
                        if stopping.is_set():
                            # Shutting down: store what is held back and give the run back here.
                            new = agent_run.new_messages()
                            if len(new) > held.persisted and not is_final_answer(new[-1]):
                                await self.leases.before_effect(segment)
                        if Agent.is_model_request_node(node):
                            # Tool results reach the log with the next response; announce them now.
                            await self.events.publish_request(run, node.request, announced)
                            if streams:
                                async with node.stream(agent_run.ctx) as stream:
                                    await self.streamer.stream_response(run, stream, announced)
                        elif Agent.is_call_tools_node(node) and not streams:
                            # Asked for whole (the run does not stream, or its model cannot):
                            # its text arrives as one delta.
                            await self.streamer.deliver_response(run, node.model_response, announced)
                    result = agent_run.result
                    held.usage = run.usage.add(usage_record(agent_run.usage))
                    new = agent_run.new_messages()[held.persisted :]
                if (
                    opened is not None
                    and result is not None
                    and isinstance(result.output, DeferredToolRequests)
                ):
                    await deps_state.keep(self._uow, run.id, own_deps)
            except (CancelRequested, UsageLimitExceeded) as exc:
                return await self.finisher.stopped(segment, exc)
            except (LeaseLost, Interrupted):
                raise
            except Exception as exc:
                if is_transient_database_error(exc):
                    raise
                return await self.finisher.failed(segment, exc, opened)
        if result is None:
            raise RuntimeError("agent run ended without a result")
        output = result.output
        if isinstance(output, DeferredToolRequests):
            return await self.suspender.suspend(run, owner, new, output, held.usage, announced)
        return await self.finisher.finish(
            run, owner, new, RunStatus.COMPLETED, held.usage, output=output_text(output), announced=announced
        )

    async def _prepared(
        self, run: Run, owner: str, span: Span, stopping: asyncio.Event, start: SegmentStart | None
    ) -> tuple[Segment, DeferredToolResults | None, int] | RunStatus:
        """The segment ready to run its agent (with what it resumes with and how many model requests
        are left), or the run's end when it ends before the agent runs."""
        if run.agent not in self._served:
            # The API that queued the run serves an agent this worker does not: give both the
            # same agents (`--agents`, SURSIS_AGENTS).
            log.error("run.agent_not_served", agent=run.agent)
            error = RunError("agent_not_served", f"agent {run.agent!r} is not served by the worker")
            return await self.finisher.finish(run, owner, [], RunStatus.FAILED, run.usage, error=error)
        if start is None:
            async with self._uow.reader() as uow:
                start = await self.read_segment(uow, run)
        announced = Announced()
        announced.last_seq = start.last_seq
        served = self._served[run.agent]
        results = await self._deferred_results(run, owner, start, served)
        if isinstance(results, RunStatus):
            return results
        remaining = self._step_limit - run.usage.requests
        if remaining <= 0:
            return await self.finisher.step_limit_reached(run, owner, [], run.usage)
        mcp = self._definitions[run.agent].mcp
        if mcp is not None:
            await mcp.connect()  # once per process; again after the server died
        span.set_attribute("sursis.segment.resumed", bool(results))
        log.info("run.segment_started", resumed=bool(results))
        segment = Segment(run, owner, span, stopping, start, served, announced, Held(run.usage))
        return segment, results, remaining

    async def _deferred_results(
        self, run: Run, owner: str, start: SegmentStart, served: ServedAgent
    ) -> DeferredToolResults | RunStatus | None:
        """What the segment resumes with: the answers to the calls its log left unanswered (None:
        none), or the run's end when it ends before the agent runs (a final answer stored before a
        crash, approved calls whose arguments changed)."""
        started, history, tail = start.started, start.history, start.tail
        if started and history and isinstance(history[-1], ModelResponse) and not tail:
            # A crash after the final answer was stored but before the run was marked done.
            text = "".join(p.content for p in history[-1].parts if isinstance(p, TextPart))
            return await self.finisher.finish(run, owner, [], RunStatus.COMPLETED, run.usage, output=text)
        # Calls left by an earlier run that ended (cancelled, failed) were never performed.
        abandoned = start.producer is not None and start.producer.status.finished
        results = deferred_results(tail, start.pending, abandoned, raw=served.raw_results)
        if (forged := approved_args.mismatches(tail, results, start.recorded)) and not abandoned:
            # Nothing of the segment runs: an approved call would run with other arguments.
            return await self.finisher.refuse_forged(run, owner, forged)
        if forged and results is not None:
            # Left by a run that failed on them: the model of a later turn is told they did not run.
            for found in forged:
                results.approvals[found.tool_call_id] = ToolDenied(
                    policy_denial(found.code.upper(), approved_args.run_error([found]).message)
                )
        if results is not None:
            crash_point("segment_resumed")
        return results

    def _run_deps(self, segment: Segment) -> RunDeps:
        """What the segment's tool calls reach (`RunDeps`)."""
        run = segment.run
        return RunDeps(
            conversation_id=run.conversation_id,
            run_id=run.id,
            workspace=run.workspace,
            agent_name=run.agent,
            uow=self._uow,
            clock=self._clock,
            policy=self._policy,
            progress=self.streamer.progress_sink(run),
            agents=self._agents,
            agent_deps=self._agent_deps,
            run_info=run_info(run),
            tracer=self._telemetry.tracer,
            announced=segment.announced,
            before_effect=partial(self.leases.before_effect, segment),
            outcomes={p.tool_call_id: segment.start.recorded.get(p.tool_call_id) for p in segment.start.tail},
        )
