"""The agent runner: one claimed run, one segment of pydantic-ai, persisted as it goes."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import structlog
from opentelemetry.trace import Span, Status, StatusCode
from pydantic_ai import Agent
from pydantic_ai.capabilities import AbstractCapability, NativeTool
from pydantic_ai.exceptions import (
    AgentRunError,
    ModelAPIError,
    ModelHTTPError,
    ToolFailed,
    UnexpectedModelBehavior,
    UsageLimitExceeded,
)
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    PartDeltaEvent,
    PartEndEvent,
    PartStartEvent,
    RetryPromptPart,
    TextPart,
    TextPartDelta,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models import Model
from pydantic_ai.native_tools import SUPPORTED_NATIVE_TOOLS
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, ToolApproved, ToolDenied
from pydantic_ai.usage import RunUsage, UsageLimits
from pydantic_core import to_jsonable_python
from sqlalchemy import exc as sa_exc

from abeyance.domain.errors import ToolPolicyError, ok_result
from abeyance.domain.events import EventType, pending_created_data, publish, run_status_data
from abeyance.domain.ports import UnitOfWork, UnitOfWorkFactory
from abeyance.domain.records import AuditEntry, PendingCall, Run, RunError, Usage
from abeyance.domain.sanitize import args_hash, sanitize
from abeyance.domain.services import Clock
from abeyance.domain.states import PendingStatus, RunStatus
from abeyance.domain.tools import Executor, PendingKind, ToolApprovalRequest
from abeyance.infra.agents.declarations import AgentDefinition, DeclaredProviderTool
from abeyance.infra.agents.observed import (
    EDITED_ARGS,
    REDISPATCH,
    ObservedTools,
    PreApprovalPolicy,
    ProgressSink,
    RunDeps,
    failure_message,
)
from abeyance.infra.faults import crash_point
from abeyance.infra.history import MessageLogCache, encode
from abeyance.infra.notifier import LocalRunNotifier
from abeyance.infra.telemetry import Telemetry, context_from, current_trace_context, current_trace_id

log = structlog.get_logger("abeyance.runner")
ACTOR = "system:worker"


def build_agent(
    definition: AgentDefinition, model: Model, telemetry: Telemetry | None = None
) -> Agent[RunDeps, str | DeferredToolRequests]:
    """The pydantic-ai agent of a definition: its tools behind `ObservedTools`, traced by pydantic-ai."""
    telemetry = telemetry or Telemetry.disabled()
    observed = ObservedTools({d.spec.name: d.spec for d in definition.tools}, telemetry.metrics)
    instrumentation = telemetry.agent_instrumentation()
    capabilities: list[AbstractCapability[RunDeps]] = (
        [observed] if instrumentation is None else [instrumentation, observed]
    )
    capabilities += [NativeTool(p.native) for p in supported_provider_tools(definition, model)]
    return Agent(
        model,
        name=definition.name,
        instructions=definition.instructions,
        deps_type=RunDeps,
        output_type=[str, DeferredToolRequests],
        tools=[declared.tool for declared in definition.tools],
        capabilities=capabilities,
    )


def supported_provider_tools(definition: AgentDefinition, model: Model) -> list[DeclaredProviderTool]:
    """The agent's provider tools this model can host; the others are left out, with a warning."""
    supported = tuple(model.profile.get("supported_native_tools", SUPPORTED_NATIVE_TOOLS))
    kept = []
    for provided in definition.provider_tools:
        if isinstance(provided.native, supported):
            kept.append(provided)
        else:
            log.warning(
                "agent.provider_tool_unsupported",
                agent=definition.name,
                tool_name=provided.spec.name,
                model=model.model_name,
            )
    return kept


def unanswered_tool_calls(history: Sequence[ModelMessage]) -> tuple[int | None, list[ToolCallPart]]:
    """The index of the last model response, and its tool calls that have no result in the log yet."""
    answered: set[str] = set()
    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        if isinstance(message, ModelResponse):
            calls = [
                p for p in message.parts if isinstance(p, ToolCallPart) and p.tool_call_id not in answered
            ]
            return index, calls
        for part in message.parts:
            if isinstance(part, ToolReturnPart | RetryPromptPart) and part.tool_call_id:
                answered.add(part.tool_call_id)
    return None, []


def _policy_denial(code: str, message: str) -> str:
    return failure_message(ToolPolicyError(message, code=code).to_result())


def denial_for(call: PendingCall) -> str:
    """What the model sees for a suspension that did not end in approval or an answer."""
    reason = (call.reason or "").strip()
    match call.status:
        case PendingStatus.DENIED:
            return _policy_denial(
                "APPROVAL_DENIED", f"The operator denied this call. Reason: {reason or 'none given'}."
            )
        case PendingStatus.REVISION_REQUESTED:
            return _policy_denial(
                "REVISION_REQUESTED",
                "The operator did not run this call and asks for a revised one. "
                f"Notes: {reason or 'none given'}. You may propose a new call with revised arguments.",
            )
        case PendingStatus.EXPIRED if call.kind is PendingKind.CLIENT_EXEC:
            waited = call.expires_at - call.created_at
            return _policy_denial(
                "CLIENT_UNAVAILABLE",
                f"No client ran this tool within {_human(waited)} (nobody was connected to the "
                "conversation's event stream); it was not performed. Continue without it, or ask the "
                "user to reopen the app and try again.",
            )
        case PendingStatus.EXPIRED:
            waited = call.expires_at - call.created_at
            return _policy_denial(
                "APPROVAL_EXPIRED", f"No decision within {_human(waited)}; the action was not performed."
            )
        case PendingStatus.CANCELLED:
            return _policy_denial(
                "CANCELLED", "The run was cancelled before a decision; the action was not performed."
            )
        case _:
            raise ValueError(f"no denial for status {call.status}")


def _human(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    if seconds % 3600 == 0 and seconds >= 3600:
        return f"{seconds // 3600} h"
    if seconds % 60 == 0 and seconds >= 60:
        return f"{seconds // 60} min"
    return f"{seconds} s"


# SQLSTATE classes (and codes) of PostgreSQL errors that another attempt may not meet: connection
# exceptions, serialization failures and deadlocks, insufficient resources, operator intervention
# (shutdown, statement timeout), system errors, and a lock wait that timed out.
_TRANSIENT_SQLSTATE_CLASSES = frozenset({"08", "40", "53", "57", "58"})
_TRANSIENT_SQLSTATES = frozenset({"55P03"})


def is_transient_database_error(exc: BaseException) -> bool:
    """A database or connection failure rather than a fault of the run itself.

    A segment that meets one is abandoned, not failed: its lease runs out and the run is claimed
    again (bounded by the claim count). pydantic-ai's own errors never count, although
    `RunTimedOut` is a `TimeoutError`, hence an `OSError`.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, BaseExceptionGroup):
            return any(is_transient_database_error(inner) for inner in current.exceptions)
        if isinstance(current, AgentRunError):
            return False
        if isinstance(current, OSError | sa_exc.TimeoutError | sa_exc.DisconnectionError):
            return True
        if isinstance(current, sa_exc.DBAPIError):
            if current.connection_invalidated or isinstance(
                current, sa_exc.OperationalError | sa_exc.InterfaceError
            ):
                return True
            state = getattr(current.orig, "sqlstate", None)
            return isinstance(state, str) and (
                state[:2] in _TRANSIENT_SQLSTATE_CLASSES or state in _TRANSIENT_SQLSTATES
            )
        current = current.__cause__
    return False


def run_failure(exc: BaseException) -> RunError:
    """What a run that failed on `exc` tells its caller: a summary, never the exception's text
    (SQL, hosts, a provider's raw body); the details are in the logs, under the trace id."""
    trace_id = current_trace_id()
    details = f"details are in the service logs (trace {trace_id})" if trace_id else "details are in the logs"
    if isinstance(exc, ModelHTTPError):
        return RunError("model_error", f"the model provider answered HTTP {exc.status_code}; {details}")
    if isinstance(exc, ModelAPIError):
        return RunError("model_error", f"the model provider could not be used; {details}")
    if isinstance(exc, UnexpectedModelBehavior):
        return RunError("model_error", f"the model answered something the agent could not use; {details}")
    return RunError("internal_error", f"the run failed unexpectedly; {details}")


class NotReady(Exception):
    """The run was queued while one of its calls still awaits a decision (should not happen)."""

    def __init__(self, message: str, awaiting: int) -> None:
        super().__init__(message)
        self.awaiting = awaiting


class LeaseLost(Exception):
    """Another worker owns the run now; stop without writing."""


class Interrupted(Exception):
    """The worker is shutting down: the segment stopped at a persistence point."""


@dataclass(slots=True)
class Timeouts:
    approval: timedelta
    elicitation: timedelta
    client_exec: timedelta

    def as_mapping(self) -> Mapping[PendingKind, timedelta]:
        return {
            PendingKind.APPROVAL: self.approval,
            PendingKind.ELICITATION: self.elicitation,
            PendingKind.CLIENT_EXEC: self.client_exec,
        }


class AgentRunner:
    """Runs one segment of a claimed run and leaves the run suspended, completed, failed or cancelled."""

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
        history_cache_messages: int = 50_000,
        history_turns: int = 0,
    ) -> None:
        self._uow = uow
        self._telemetry = telemetry or Telemetry.disabled()
        self._metrics = self._telemetry.metrics
        self._delta_interval = delta_interval
        self._logs = MessageLogCache(history_cache_messages)
        self._history_turns = history_turns
        self._definitions = dict(definitions)
        self._agents = {name: build_agent(d, model, self._telemetry) for name, d in definitions.items()}
        self._notifier = notifier
        self._clock = clock
        self._step_limit = step_limit
        self._timeouts = timeouts.as_mapping()
        self._lease = lease
        self._policy = policy or PreApprovalPolicy()

    async def run_segment(
        self, run: Run, owner: str, stopping: asyncio.Event | None = None
    ) -> RunStatus | None:
        """One segment, in a `run.segment` span that continues the trace stored on the run.

        The first segment continues the trace of the request that queued the run; a resumed one
        continues the segment that suspended it, so the whole run is one trace.
        """
        with (
            structlog.contextvars.bound_contextvars(
                run_id=str(run.id), conversation_id=str(run.conversation_id), segment=run.segment
            ),
            self._telemetry.tracer.start_as_current_span(
                "run.segment",
                context=context_from(run.trace_context),
                attributes={
                    "abeyance.run_id": str(run.id),
                    "abeyance.conversation_id": str(run.conversation_id),
                    "abeyance.workspace": run.workspace,
                    "abeyance.agent": run.agent,
                    "abeyance.segment": run.segment,
                },
            ) as span,
        ):
            try:
                status = await self._run_segment(run, owner, span, stopping or asyncio.Event())
            except LeaseLost:
                span.set_attribute("abeyance.run.lease_lost", True)
                log.warning("run.lease_lost")
                return None
            except NotReady as exc:
                log.error("run.queued_while_awaiting", error=str(exc))
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
                # Nothing of the failed transaction was kept; the lease runs out and the run is
                # claimed again, continuing from what the log holds.
                span.record_exception(exc)
                span.set_attribute("abeyance.run.abandoned", True)
                log.warning("run.segment_abandoned", error_class=type(exc).__name__, error=str(exc)[:300])
                return None
            span.set_attribute("abeyance.run.status", status.value)
            if status is RunStatus.FAILED:
                span.set_status(Status(StatusCode.ERROR, "run failed"))
        await self._notifier.run_changed(run.id)
        return status

    async def _run_segment(self, run: Run, owner: str, span: Span, stopping: asyncio.Event) -> RunStatus:
        async with self._uow() as uow:
            stored = await self._logs.read(uow.messages, run.conversation_id)
            # The current turn and up to `history_turns` earlier ones; the current turn's prompt is
            # already in the log once the run has started.
            started = run.id in stored.run_ids
            shown = stored.window(
                self._history_turns + 1 if started and self._history_turns else self._history_turns
            )
            history = shown.history()
            last_response, tail = unanswered_tool_calls(history)
            rows = await uow.pending.by_tool_call_ids(run.conversation_id, [p.tool_call_id for p in tail])
            producer_id = shown.run_ids[last_response] if tail and last_response is not None else None
            producer = await uow.runs.get(producer_id) if producer_id and producer_id != run.id else None
        if started and history and isinstance(history[-1], ModelResponse) and not tail:
            # A crash after the final answer was stored but before the run was marked done.
            text = "".join(p.content for p in history[-1].parts if isinstance(p, TextPart))
            return await self._finish(run, owner, [], RunStatus.COMPLETED, run.usage, output=text)
        # Calls left by an earlier run that ended (cancelled, failed) were never performed.
        abandoned = producer is not None and producer.status.finished
        results = self._deferred_results(tail, rows, abandoned)
        if results is not None:
            crash_point("segment_resumed")
        remaining = self._step_limit - run.usage.requests
        if remaining <= 0:
            return await self._step_limit_reached(run, owner, [], run.usage)

        agent = self._agents[run.agent]
        deps = RunDeps(
            conversation_id=run.conversation_id,
            run_id=run.id,
            workspace=run.workspace,
            agent_name=run.agent,
            uow=self._uow,
            clock=self._clock,
            policy=self._policy,
            progress=self._progress_sink(run),
        )
        persisted = 0
        announced: set[str] = set()
        usage = run.usage
        agent_run = None
        span.set_attribute("abeyance.segment.resumed", bool(results))
        log.info("run.segment_started", resumed=bool(results))
        try:
            async with agent.iter(
                None if started else run.input,
                message_history=history,
                deferred_tool_results=results,
                deps=deps,
                usage_limits=UsageLimits(request_limit=remaining),
            ) as agent_run:
                async for node in agent_run:
                    if Agent.is_end_node(node):
                        break
                    new = agent_run.new_messages()
                    if len(new) > persisted:
                        usage = run.usage.add(_usage(agent_run.usage))
                        if await self._persist(run, owner, new[persisted:], usage, announced, stopping):
                            return await self._finish(run, owner, [], RunStatus.CANCELLED, usage)
                        persisted = len(new)
                    if Agent.is_model_request_node(node):
                        # Tool results reach the log with the next response; announce them now.
                        await self._publish_request(run, node.request, announced)
                        async with node.stream(agent_run.ctx) as stream:
                            await self._stream_response(run, stream, announced)
                result = agent_run.result
                usage = run.usage.add(_usage(agent_run.usage))
                new = agent_run.new_messages()[persisted:]
        except UsageLimitExceeded:
            unsaved = agent_run.new_messages()[persisted:] if agent_run else []
            return await self._step_limit_reached(run, owner, unsaved, usage, announced)
        except (LeaseLost, Interrupted):
            raise
        except Exception as exc:
            if is_transient_database_error(exc):
                raise
            span.record_exception(exc)
            log.exception("run.segment_error")
            return await self._finish(
                run,
                owner,
                agent_run.new_messages()[persisted:] if agent_run else [],
                RunStatus.FAILED,
                usage,
                error=run_failure(exc),
                announced=announced,
            )
        if result is None:
            raise RuntimeError("agent run ended without a result")
        output = result.output
        if isinstance(output, DeferredToolRequests):
            return await self._suspend(run, owner, new, output, usage, announced)
        return await self._finish(
            run, owner, new, RunStatus.COMPLETED, usage, output=output, announced=announced
        )

    def _deferred_results(
        self, tail: Sequence[ToolCallPart], rows: Sequence[PendingCall], abandoned: bool
    ) -> DeferredToolResults | None:
        if not tail:
            return None
        latest: dict[str, PendingCall] = {}
        for earlier in sorted(rows, key=lambda r: r.created_at):
            latest[earlier.tool_call_id] = earlier
        results = DeferredToolResults()
        for part in tail:
            row = latest.get(part.tool_call_id)
            call_id = part.tool_call_id
            if row is None:
                if abandoned:
                    results.approvals[call_id] = ToolDenied(
                        _policy_denial("CANCELLED", "The run ended before this call; it was not performed.")
                    )
                else:
                    # Dispatched by a segment that died: run it again under the same id.
                    results.approvals[call_id] = ToolApproved()
                    results.metadata[call_id] = {REDISPATCH: True}
                continue
            if row.status is PendingStatus.AWAITING:
                awaiting = sum(1 for r in latest.values() if r.status is PendingStatus.AWAITING)
                raise NotReady(f"pending call {row.correlation_id} is still awaiting", awaiting)
            if row.kind is PendingKind.APPROVAL:
                if row.status is PendingStatus.APPROVED:
                    edited = (row.resolution or {}).get("args")
                    results.approvals[call_id] = ToolApproved(override_args=edited)
                    if edited is not None:
                        results.metadata[call_id] = {EDITED_ARGS: edited}
                else:
                    results.approvals[call_id] = ToolDenied(denial_for(row))
            elif row.status is PendingStatus.ANSWERED:
                results.calls[call_id] = ok_result((row.resolution or {}).get("result"))
            elif row.status is PendingStatus.DENIED:
                results.calls[call_id] = ToolFailed(
                    _policy_denial(
                        "ANSWER_DECLINED", f"No answer was given. Reason: {row.reason or 'none given'}."
                    )
                )
            else:
                results.calls[call_id] = ToolFailed(denial_for(row))
        return results

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
            await uow.messages.append(run.conversation_id, run.id, [encode(m) for m in messages], now)
            if not await uow.runs.record_progress(run.id, owner, usage, now, now + self._lease):
                raise LeaseLost()
            cancel = await uow.runs.cancel_requested(run.id)
            await self._publish_messages(uow, run, messages, now, announced)
            await uow.commit()
        if any(isinstance(m, ModelResponse) for m in messages):
            crash_point("model_response_persisted")
        if stopping.is_set() and not cancel:
            raise Interrupted()
        return cancel

    async def _stream_response(self, run: Run, stream: Any, announced: set[str]) -> None:
        """Publish a streamed model response as it arrives.

        Text becomes `message.delta` events: deltas arriving within `delta_interval` of each
        other are sent as one event, so a fast model costs a few writes per second, not one per
        token. Provider tool calls and their results are announced where they occur in the
        response (the model runs them; nothing else will).
        """
        definition = self._definitions[run.agent]
        pending: list[str] = []
        last_flush = time.monotonic()
        async for event in stream:
            text: str | None = None
            provided: NativeToolCallPart | NativeToolReturnPart | None = None
            if isinstance(event, PartStartEvent | PartEndEvent):
                part = event.part
                if isinstance(event, PartStartEvent) and isinstance(part, TextPart):
                    text = part.content
                elif isinstance(part, NativeToolReturnPart) or (
                    isinstance(event, PartEndEvent) and isinstance(part, NativeToolCallPart)
                ):
                    provided = part
            elif isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
                text = event.delta.content_delta
            if provided is not None:
                events = message_events(run.id, [ModelResponse(parts=[provided])], definition, announced)
                if events and pending:
                    await self._publish_delta(run, "".join(pending))
                    pending.clear()
                await self._publish_now(run, events)
                continue
            if text:
                pending.append(text)
            if pending and time.monotonic() - last_flush >= self._delta_interval:
                await self._publish_delta(run, "".join(pending))
                pending.clear()
                last_flush = time.monotonic()
        if pending:
            await self._publish_delta(run, "".join(pending))

    async def _publish_delta(self, run: Run, text: str) -> None:
        async with self._uow() as uow:
            await publish(
                uow,
                run.conversation_id,
                run.workspace,
                EventType.MESSAGE_DELTA,
                {"run_id": str(run.id), "text": text},
                self._clock(),
            )
            await uow.commit()

    def _progress_sink(self, run: Run) -> ProgressSink:
        definition = self._definitions[run.agent]

        async def sink(tool_name: str, tool_call_id: str, progress: Any) -> None:
            spec = definition.spec(tool_name)
            if spec is None or not spec.streaming:
                log.warning("tool.progress_ignored", tool_name=tool_name, reason="tool is not streaming")
                return
            data = {
                "run_id": str(run.id),
                "tool_call_id": tool_call_id,
                "tool_name": tool_name,
                "progress": progress,
            }
            try:
                async with self._uow() as uow:
                    await publish(
                        uow,
                        run.conversation_id,
                        run.workspace,
                        EventType.TOOL_PROGRESS,
                        to_jsonable_python(data, fallback=str),
                        self._clock(),
                    )
                    await uow.commit()
            except Exception:
                # A lost progress report must not fail the tool that sent it.
                log.exception("tool.progress_failed", tool_name=tool_name, tool_call_id=tool_call_id)

        return sink

    async def _publish_messages(
        self,
        uow: UnitOfWork,
        run: Run,
        messages: Sequence[ModelMessage],
        now: datetime,
        announced: set[str] | None = None,
    ) -> None:
        """`tool.call` and `tool.result` events for messages stored in the same transaction.

        Results already announced before the request went to the model are not repeated.
        """
        definition = self._definitions[run.agent]
        for event_type, data in message_events(run.id, messages, definition, announced):
            await publish(uow, run.conversation_id, run.workspace, event_type, data, now)

    async def _publish_request(self, run: Run, request: ModelRequest, announced: set[str]) -> None:
        await self._publish_now(
            run, message_events(run.id, [request], self._definitions[run.agent], announced)
        )

    async def _publish_now(self, run: Run, events: Sequence[tuple[EventType, dict[str, Any]]]) -> None:
        """Events that describe no stored change, in a transaction of their own."""
        if not events:
            return
        now = self._clock()
        async with self._uow() as uow:
            for event_type, data in events:
                await publish(uow, run.conversation_id, run.workspace, event_type, data, now)
            await uow.commit()

    async def _suspend(
        self,
        run: Run,
        owner: str,
        messages: Sequence[ModelMessage],
        output: DeferredToolRequests,
        usage: Usage,
        announced: set[str],
    ) -> RunStatus:
        now = self._clock()
        definition = self._definitions[run.agent]
        calls: list[PendingCall] = []
        for part, default_kind in [(p, PendingKind.APPROVAL) for p in output.approvals] + [
            (p, PendingKind.ELICITATION) for p in output.calls
        ]:
            spec = definition.spec(part.tool_name)
            kind = PendingKind(output.metadata.get(part.tool_call_id, {}).get("kind", default_kind.value))
            args = part.args_as_dict()
            request = ToolApprovalRequest.for_call(spec, part.tool_name, run.agent, args)
            calls.append(
                PendingCall(
                    correlation_id=request.correlation_id,
                    conversation_id=run.conversation_id,
                    run_id=run.id,
                    workspace=run.workspace,
                    segment=run.segment,
                    tool_call_id=part.tool_call_id,
                    tool_name=part.tool_name,
                    agent=run.agent,
                    executor=spec.executor if spec else Executor.SERVER,
                    kind=kind,
                    args=args,
                    args_summary=request.args_summary,
                    args_hash=args_hash(part.tool_name, args),
                    effect_description=request.effect_description,
                    status=PendingStatus.AWAITING,
                    created_at=now,
                    expires_at=now
                    + (spec.timeout_for(kind, self._timeouts) if spec else self._timeouts[kind]),
                )
            )
        async with self._uow() as uow:
            if await uow.runs.cancel_requested(run.id):
                # Cancelled after the last persistence point: nobody is asked. The calls stay
                # unanswered in the log and the next message tells the model they were not performed.
                details = {"calls_not_requested": len(calls)}
                await self._end(
                    uow,
                    run,
                    owner,
                    messages,
                    RunStatus.CANCELLED,
                    usage,
                    now,
                    announced=announced,
                    details=details,
                )
                await uow.commit()
                self._metrics.run_status(RunStatus.CANCELLED)
                log.info("run.cancelled", usage=_usage_log(usage), **details)
                return RunStatus.CANCELLED
            await uow.messages.append(run.conversation_id, run.id, [encode(m) for m in messages], now)
            if not await uow.runs.finish(
                run.id,
                owner,
                RunStatus.SUSPENDED,
                now,
                usage=usage,
                awaiting_count=len(calls),
                trace_context=current_trace_context(),
            ):
                raise LeaseLost()
            for call in calls:
                await uow.pending.add(call)
                await uow.audit.append(
                    AuditEntry(
                        action="pending.requested",
                        actor=ACTOR,
                        workspace=run.workspace,
                        conversation_id=run.conversation_id,
                        run_id=run.id,
                        correlation_id=call.correlation_id,
                        details={
                            "tool_name": call.tool_name,
                            "tool_call_id": call.tool_call_id,
                            "kind": call.kind,
                        },
                    ),
                    now,
                )
            await uow.audit.append(self._run_audit(run, "run.suspended", {"pending": len(calls)}), now)
            await self._publish_messages(uow, run, messages, now, announced)
            for call in calls:
                await publish(
                    uow,
                    run.conversation_id,
                    run.workspace,
                    EventType.PENDING_CREATED,
                    pending_created_data(call),
                    now,
                )
            await self._publish_status(uow, run, RunStatus.SUSPENDED.value, now)
            await uow.commit()
        self._metrics.run_status(RunStatus.SUSPENDED)
        for call in calls:
            log.info(
                "pending.requested",
                correlation_id=str(call.correlation_id),
                tool_call_id=call.tool_call_id,
                tool_name=call.tool_name,
                kind=call.kind.value,
                expires_at=call.expires_at.isoformat(),
            )
        log.info("run.suspended", pending=len(calls), usage=_usage_log(usage))
        return RunStatus.SUSPENDED

    async def _step_limit_reached(
        self,
        run: Run,
        owner: str,
        messages: Sequence[ModelMessage],
        usage: Usage,
        announced: set[str] | None = None,
    ) -> RunStatus:
        return await self._finish(
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

    async def _finish(
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
    ) -> RunStatus:
        now = self._clock()
        async with self._uow() as uow:
            if status is RunStatus.COMPLETED and await uow.runs.cancel_requested(run.id):
                # A cancel that came after the last persistence point still wins; the answer stays
                # in the log.
                status, output = RunStatus.CANCELLED, None
            await self._end(
                uow, run, owner, messages, status, usage, now, output=output, error=error, announced=announced
            )
            await uow.commit()
        self._metrics.run_status(status)
        log.info(f"run.{status.value}", error=error.code if error else None, usage=_usage_log(usage))
        return status

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
    ) -> None:
        """Write the run's end in the caller's transaction: its last messages, the final status,
        the audit row, the conversation freed and the closing events."""
        await uow.messages.append(run.conversation_id, run.id, [encode(m) for m in messages], now)
        if not await uow.runs.finish(run.id, owner, status, now, usage=usage, output=output, error=error):
            raise LeaseLost()
        audited = {"error": error.code} if error else (details or {})
        await uow.audit.append(self._run_audit(run, f"run.{status.value}", audited), now)
        await uow.conversations.release_active_run(run.conversation_id, run.id, now)
        await self._publish_messages(uow, run, messages, now, announced)
        await self._publish_end(uow, run, status, usage, output, error, now)

    async def give_up(self, run: Run, owner: str, attempts: int) -> RunStatus:
        """Fail a run the worker just claimed whose last `attempts` segments all ended without
        reaching a persistence point; the conversation is freed."""
        with structlog.contextvars.bound_contextvars(
            run_id=str(run.id), conversation_id=str(run.conversation_id)
        ):
            log.error("run.segment_attempts_exhausted", attempts=attempts)
            status = await self._finish(
                run,
                owner,
                [],
                RunStatus.FAILED,
                run.usage,
                error=RunError(
                    "segment_attempts_exhausted",
                    f"{attempts} attempts in a row to continue this run ended without progress; "
                    "details are in the service logs; the conversation stays usable",
                ),
            )
        await self._notifier.run_changed(run.id)
        return status

    @staticmethod
    async def _publish_status(uow: UnitOfWork, run: Run, status: str, now: datetime) -> None:
        await publish(
            uow, run.conversation_id, run.workspace, EventType.RUN_STATUS, run_status_data(run, status), now
        )

    async def _publish_end(
        self,
        uow: UnitOfWork,
        run: Run,
        status: RunStatus,
        usage: Usage,
        output: str | None,
        error: RunError | None,
        now: datetime,
    ) -> None:
        data: dict[str, Any]
        if status is RunStatus.COMPLETED:
            data = {"run_id": str(run.id), "output": output, "usage": _usage_json(usage)}
            event_type = EventType.RUN_COMPLETED
        elif status is RunStatus.FAILED:
            data = {
                "run_id": str(run.id),
                "error": {"code": error.code, "message": error.message} if error else None,
                "usage": _usage_json(usage),
            }
            event_type = EventType.RUN_FAILED
        else:
            data = run_status_data(run, status.value)
            event_type = EventType.RUN_STATUS
        await publish(uow, run.conversation_id, run.workspace, event_type, data, now)

    @staticmethod
    def _run_audit(run: Run, action: str, details: dict[str, Any]) -> AuditEntry:
        return AuditEntry(
            action=action,
            actor=ACTOR,
            workspace=run.workspace,
            conversation_id=run.conversation_id,
            run_id=run.id,
            details=details,
        )


def _usage_json(usage: Usage) -> dict[str, int]:
    return {
        "requests": usage.requests,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "tool_calls": usage.tool_calls,
    }


def _tool_outcome(content: Any, failed: bool) -> dict[str, Any]:
    """`ok` plus `result` or `error`, read from the `{"ok": ...}` convention when the content follows it."""
    if isinstance(content, str):
        with contextlib.suppress(ValueError):
            content = json.loads(content)
    if isinstance(content, dict) and isinstance(content.get("ok"), bool):
        if content["ok"]:
            return {"ok": True, "result": content.get("result")}
        return {"ok": False, "error": content.get("error")}
    if failed:
        return {"ok": False, "error": {"class": "ToolError", "message": str(content)}}
    return {"ok": True, "result": content}


def message_events(
    run_id: uuid.UUID,
    messages: Sequence[ModelMessage],
    definition: AgentDefinition,
    announced: set[str] | None = None,
) -> list[tuple[EventType, dict[str, Any]]]:
    """The `tool.call` / `tool.result` events that messages stand for.

    `announced` holds what was already published (`call:<id>` for calls, `<id>` for results)
    and is updated, so each call and each result is published once per segment.
    """
    events: list[tuple[EventType, dict[str, Any]]] = []
    announced = announced if announced is not None else set()

    def base(tool_name: str, tool_call_id: str) -> dict[str, Any]:
        spec = definition.spec(tool_name)
        return {
            "run_id": str(run_id),
            "tool_call_id": tool_call_id,
            "tool_name": tool_name,
            "executor": spec.executor.value if spec else Executor.SERVER.value,
        }

    for message in messages:
        if isinstance(message, ModelResponse):
            for part in message.parts:
                if isinstance(part, ToolCallPart | NativeToolCallPart):
                    if "call:" + part.tool_call_id in announced:
                        continue
                    announced.add("call:" + part.tool_call_id)
                    spec = definition.spec(part.tool_name)
                    data = base(part.tool_name, part.tool_call_id)
                    if isinstance(part, NativeToolCallPart):
                        data["executor"] = Executor.PROVIDER.value
                    data["args"] = sanitize(part.args_as_dict())
                    data["streaming"] = bool(spec and spec.streaming)
                    events.append((EventType.TOOL_CALL, data))
                elif isinstance(part, NativeToolReturnPart):
                    if part.tool_call_id in announced:
                        continue
                    announced.add(part.tool_call_id)
                    data = base(part.tool_name, part.tool_call_id)
                    data["executor"] = Executor.PROVIDER.value
                    data.update(_tool_outcome(to_jsonable_python(part.content, fallback=str), False))
                    events.append((EventType.TOOL_RESULT, data))
        elif isinstance(message, ModelRequest):
            for request_part in message.parts:
                if (
                    not isinstance(request_part, ToolReturnPart | RetryPromptPart)
                    or not request_part.tool_name
                ):
                    continue
                if request_part.tool_call_id in announced:
                    continue
                announced.add(request_part.tool_call_id)
                data = base(request_part.tool_name, request_part.tool_call_id)
                if isinstance(request_part, ToolReturnPart):
                    content = to_jsonable_python(request_part.content, fallback=str)
                    data.update(_tool_outcome(content, request_part.outcome == "failed"))
                else:
                    error = {"class": "RetryPrompt", "message": request_part.model_response()}
                    data.update({"ok": False, "error": error})
                events.append((EventType.TOOL_RESULT, data))
    return events


def _usage(usage: RunUsage) -> Usage:
    """Our record of pydantic-ai's usage; its cost is the genai-prices estimate, None when unpriced."""
    return Usage(
        requests=usage.requests,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        tool_calls=usage.tool_calls,
        cost=usage.cost,
    )


def _usage_log(usage: Usage) -> dict[str, Any]:
    return {
        "requests": usage.requests,
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cost_usd": None if usage.cost is None else str(usage.cost),
    }


def dumps(value: Any) -> str:
    return json.dumps(value, default=str)
