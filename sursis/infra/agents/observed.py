"""The one wrapper around every tool call.

It enforces the tool contract (approval gate, human/client executors), turns every outcome
into the `{"ok": ...}` convention without crashing the run or spending retries, and emits one
`ToolCallMetadata` per executed call (log event, span attributes, `tool_calls` row).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

import structlog
from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.capabilities.abstract import WrapToolExecuteHandler
from pydantic_ai.exceptions import ApprovalRequired, CallDeferred, ToolFailed
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset

from sursis.domain.errors import ToolError, unexpected_error_result
from sursis.domain.policies import authorization_of, governed
from sursis.domain.policy_decisions import PolicyDecision, PolicyEffect
from sursis.domain.ports import NoMetrics, ServiceMetrics
from sursis.domain.tools import Executor, PendingKind, ToolSpec
from sursis.infra.agents import approved_args, at_most_once, call_marks, policy_gate, tool_control_flow
from sursis.infra.agents.call_outcomes import outcome_recorded
from sursis.infra.agents.compat import call_deferred, deferred_kind
from sursis.infra.agents.effects import AlreadyApplied, CallTiming, call_timing
from sursis.infra.agents.policy_gate import apply, cleared_before, decide, denied
from sursis.infra.agents.redispatch import UnapprovedRedispatch, not_approved
from sursis.infra.agents.run_deps import RunDeps, run_deps
from sursis.infra.agents.tool_results import shown_result, stored_result, with_note
from sursis.infra.faults import crash_point

log = structlog.get_logger("sursis.tools")

REDISPATCH = "redispatch"
EDITED_ARGS = "edited_args"
REVIEW = call_marks.REVIEW
"""Deferral metadata: what a gated tool asks the person deciding to check (a JSON object); the
pending call shows it with the call's arguments under this key."""
POLICY = policy_gate.POLICY
"""Deferral metadata: the policy decision that asks for the call (`PolicyDecision.to_json()`); the
pending call keeps it."""
EDITED_NOTE = "args_edited_by_operator"


def failure_message(payload: Mapping[str, Any]) -> str:
    return json.dumps(payload, default=str)


def failure_text(payload: Mapping[str, Any]) -> str:
    """A failure as an adopted agent's model reads it: pydantic-ai puts it in `{"error": ...}`
    itself, so it is plain text (`ToolTransientError MCP_SERVER_UNAVAILABLE: ...`), not JSON."""
    error = payload.get("error")
    if not isinstance(error, Mapping):
        return str(error)
    return f"{error.get('class')} {error.get('code')}: {error.get('message')}"


class DiscoveredTools(Protocol):
    """Tools an agent finds at run time (its MCP servers'): specs built from their definitions."""

    async def checked_spec(self, ctx: RunContext[Any], tool_def: ToolDefinition) -> ToolSpec | None: ...

    def guarded(
        self, ctx: RunContext[Any], spec: ToolSpec, call: ToolCallPart, handler: WrapToolExecuteHandler
    ) -> WrapToolExecuteHandler: ...

    def review(self, spec: ToolSpec, decision: PolicyDecision) -> PolicyDecision:
        """The decision, asked instead when the tool is not what was accepted."""
        ...

    def isolate(self, toolset: AbstractToolset[Any]) -> AbstractToolset[Any]:
        """The agent's toolset with each of its servers failing on its own."""
        ...


class ObservedTools(AbstractCapability[RunDeps]):
    """The capability every tool call of an agent goes through.

    pydantic-ai's instrumentation is the outermost capability, so the current span here is the
    call's `execute_tool` span: the metadata lands on it as attributes.
    """

    def __init__(
        self,
        specs: Mapping[str, ToolSpec],
        metrics: ServiceMetrics | None = None,
        discovered: DiscoveredTools | None = None,
        *,
        raw_results: bool = False,
        once: frozenset[str] = frozenset(),
    ) -> None:
        self._specs = dict(specs)
        self._once = once
        """Tools that run at most once per call id (`at_most_once`)."""
        self._metrics: ServiceMetrics = metrics or NoMetrics()
        self._discovered = discovered
        self._raw_results = raw_results

    def get_wrapper_toolset(self, toolset: AbstractToolset[RunDeps]) -> AbstractToolset[RunDeps] | None:
        if self._discovered is not None:
            toolset = self._discovered.isolate(toolset)
        return UnapprovedRedispatch(toolset)

    async def prepare_tools(
        self, ctx: RunContext[RunDeps], tool_defs: list[ToolDefinition]
    ) -> list[ToolDefinition]:
        """A tool declared with pydantic-ai's `requires_approval=True` is gated here, by its spec, like
        every gated tool (pre-approvals, redispatch after a crash), not before the wrapper sees it."""
        return [
            replace(d, kind="function") if d.kind == "unapproved" and d.name in self._specs else d
            for d in tool_defs
        ]

    async def wrap_tool_execute(
        self,
        ctx: RunContext[RunDeps],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: dict[str, Any],
        handler: WrapToolExecuteHandler,
    ) -> Any:
        spec = self._specs.get(call.tool_name)
        if spec is None and self._discovered is not None:
            spec = await self._discovered.checked_spec(ctx, tool_def)
            if spec is not None:
                handler = self._discovered.guarded(ctx, spec, call, handler)
        if spec is None:
            return await handler(args)
        with structlog.contextvars.bound_contextvars(tool_call_id=call.tool_call_id, tool_name=spec.name):
            deps = run_deps(ctx)
            return await self._observe(
                _Dispatch(ctx, deps, spec, call, args, ctx.tool_call_metadata or {}), handler
            )

    async def _observe(self, d: _Dispatch, handler: WrapToolExecuteHandler) -> Any:
        deps, spec, call, args, metadata = d.deps, d.spec, d.call, d.args, d.metadata
        redispatch = bool(metadata.get(REDISPATCH))
        approved = d.ctx.tool_call_approved and not redispatch
        decision: PolicyDecision | None = None
        if approved:
            await approved_args.check_dispatch(deps, call, metadata, args)
            # The decision that asked for the call; the approval answered it.
            stamped = metadata.get(POLICY)
            decision = PolicyDecision.from_json(stamped) if isinstance(stamped, Mapping) else None
        elif governed(spec):
            decision = await decide(deps, spec, call, args)
            if self._discovered is not None and spec.server is not None:
                decision = self._discovered.review(spec, decision)
            cleared = decision.effect is PolicyEffect.ALLOW and authorization_of(decision) is None
            if not cleared and redispatch and await cleared_before(deps, call, args):
                # An earlier dispatch passed the gate (it ran, or was cleared): not asked again.
                decision = None
            if decision is not None:
                await apply(deps, spec, call, args, decision)
                if decision.effect is PolicyEffect.DENY:
                    return await self._execute(d, denied(decision), decision)
        external = spec.external_kind()
        if external is not None:
            raise call_deferred(
                {"kind": external.value}, "question" if spec.executor is Executor.HUMAN else "external"
            )
        if redispatch and d.ctx.tool_call_approved and not await cleared_before(deps, call, args):
            # The dispatch of a segment that died is nobody's approval: a tool that gates itself
            # must ask again, not run (see `redispatch`).
            with not_approved(call.tool_call_id):
                return await self._execute(d, handler, decision)
        return await self._execute(d, handler, decision)

    async def _execute(
        self, d: _Dispatch, handler: WrapToolExecuteHandler, decision: PolicyDecision | None
    ) -> Any:
        """Run the call once: a call with a stored outcome (dispatched by a segment that died) is
        told that outcome; otherwise it runs, and its outcome is recorded (`outcome_recorded`)."""
        deps, spec, call, metadata = d.deps, d.spec, d.call, d.metadata
        if deps.outcomes is not None and call.tool_call_id in deps.outcomes:
            previous = deps.outcomes.pop(call.tool_call_id)
        else:
            async with deps.uow.reader() as uow:
                previous = await uow.tool_calls.get(deps.conversation_id, call.tool_call_id)
        if previous is not None:
            # Dispatched before (a crashed segment): the stored outcome is the outcome.
            await approved_args.check_replay(deps, call, metadata, previous.args_hash)
            tool_control_flow.replay(previous.result)
            return self._shown(previous.result)
        if deps.before_effect is not None:
            await deps.before_effect()
        ran_with = approved_args.approved_hash(metadata)
        timing = CallTiming(
            deps.clock(), time.perf_counter(), spec.executor, spec.category, decision, args_hash=ran_with
        )
        crash_point("tool_started")
        crash_point(f"tool_started:{spec.name}")
        again = d.ctx.tool_call_approved
        once = spec.name in self._once
        if once:
            await at_most_once.dispatching(deps, spec, call, again=again)
        token = call_timing.set(timing)
        told: Exception | None = None
        try:
            payload = stored_result(await handler(d.args))
            error_code = None if payload["ok"] else payload["error"]["code"]
            crash_point(f"tool_effect_committed:{spec.name}")
        except AlreadyApplied as exc:
            return self._shown(exc.payload)
        except Exception as exc:
            outcome = tool_control_flow.recorded_outcome(exc)
            if outcome is None:
                payload, error_code = _failure(exc, spec, call)
            else:
                # Told to the model by pydantic-ai, in its own words: recorded, then raised on.
                (payload, error_code), told = outcome, exc
        finally:
            call_timing.reset(token)
        if told is not None:
            await outcome_recorded(deps, spec, call.tool_call_id, timing, payload, error_code, self._metrics)
            raise told
        if metadata.get(EDITED_ARGS) is not None:
            payload[EDITED_NOTE] = metadata[EDITED_ARGS]
        await outcome_recorded(deps, spec, call.tool_call_id, timing, payload, error_code, self._metrics)
        return self._shown(payload)

    def _shown(self, payload: Any) -> Any:
        """What the model is told of an outcome: the `{"ok": ...}` envelope (a failure is a
        `ToolFailed` either way), or, for an adopted agent, a success as its tool returned it, with an
        operator's edit of the arguments told beside it."""
        if not self._raw_results:
            return _replay(payload)
        if isinstance(payload, dict) and payload.get("ok") is False:
            raise ToolFailed(failure_text(payload))
        if not (isinstance(payload, dict) and payload.get("ok") is True):
            return _replay(payload)
        result = shown_result(payload)
        edited = payload.get(EDITED_NOTE)
        if edited is None:
            return result
        ran_with = json.dumps(edited, default=str)
        note = f"An operator edited this call's arguments before it ran; it ran with {ran_with}."
        return with_note(result, note)


@dataclass(frozen=True, slots=True)
class _Dispatch:
    """One call as the wrapper handles it."""

    ctx: RunContext[RunDeps]
    deps: RunDeps
    spec: ToolSpec
    call: ToolCallPart
    args: dict[str, Any]
    metadata: Mapping[str, Any]


def _failure(exc: Exception, spec: ToolSpec, call: ToolCallPart) -> tuple[dict[str, Any], str | None]:
    """What an error of a tool is (called in its `except` block): a deferral is marked with its
    kind; an approval asked, pydantic-ai's other control flow and a refused replay propagate;
    any other error is the outcome, in the `{"ok": ...}` convention, with its code."""
    if isinstance(exc, CallDeferred):
        raise _deferred_with_kind(exc, spec) from None
    if isinstance(exc, ApprovalRequired | approved_args.ApprovedArgsMismatch):
        raise  # the error being handled, as it was raised
    if tool_control_flow.raised_on(exc):
        raise  # the error being handled, as it was raised
    if isinstance(exc, ToolError):
        return exc.to_result(), exc.code
    log.exception("tool.unexpected_error", tool_name=spec.name, tool_call_id=call.tool_call_id)
    return unexpected_error_result(), "UNEXPECTED"


def _deferred_with_kind(exc: CallDeferred, spec: ToolSpec) -> CallDeferred:
    """A deferral the tool raised itself, marked with the kind of pending call it becomes: a client
    execution for a `client` tool, otherwise a person's answer."""
    metadata = dict(exc.metadata or {})
    if "kind" in metadata:
        return exc
    kind = PendingKind.CLIENT_EXEC if spec.executor is Executor.CLIENT else PendingKind.ELICITATION
    return call_deferred({**metadata, "kind": kind.value}, deferred_kind(exc))


def _replay(payload: Any) -> Any:
    if isinstance(payload, dict) and payload.get("ok") is False:
        raise ToolFailed(failure_message(payload))
    return payload
