"""The one wrapper around every tool call.

It enforces the tool contract (approval gate, human/client executors), turns every outcome
into the `{"ok": ...}` convention without crashing the run or spending retries, and emits one
`ToolCallMetadata` per executed call (log event, span attributes, `tool_calls` row).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Protocol

import structlog
from opentelemetry import trace
from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.capabilities.abstract import WrapToolExecuteHandler
from pydantic_ai.exceptions import ApprovalRequired, CallDeferred, ModelRetry, ToolFailed
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset
from pydantic_core import to_jsonable_python

from sursis.domain.errors import ToolError, unexpected_error_result
from sursis.domain.events import EventType, publish
from sursis.domain.policies import authorization_of, governed, unavailable
from sursis.domain.policy_decisions import PolicyDecision, PolicyEffect
from sursis.domain.ports import NoMetrics, ServiceMetrics
from sursis.domain.records import ToolCallMetadata, ToolCallRecord
from sursis.domain.sanitize import args_hash, sanitize
from sursis.domain.tools import Executor, PendingKind, ToolSpec
from sursis.infra.agents import approved_args, at_most_once
from sursis.infra.agents.compat import call_deferred, deferred_kind
from sursis.infra.agents.effects import AlreadyApplied, CallTiming, call_timing, committed, result_event
from sursis.infra.agents.policy_gate import NOTIFIED, decide, denied, notify
from sursis.infra.agents.redispatch import UnapprovedRedispatch, not_approved
from sursis.infra.agents.run_deps import RunDeps, run_deps
from sursis.infra.agents.tool_results import shown_result, stored_result, with_note
from sursis.infra.faults import crash_point
from sursis.infra.telemetry import current_trace_id

log = structlog.get_logger("sursis.tools")

REDISPATCH = "redispatch"
EDITED_ARGS = "edited_args"
REVIEW = "review"
"""Deferral metadata: what a gated tool asks the person deciding to check (a JSON object); the
pending call shows it with the call's arguments under this key."""
POLICY = "policy"
"""Deferral metadata: the policy decision that asks for the call (`PolicyDecision.to_json()`); the
pending call keeps it."""
AUTO_APPROVED = "pending.auto_approved"
EDITED_NOTE = "args_edited_by_operator"
_AUDIT_PAGE = 200


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
            return await self._observe(ctx, spec, call, args, handler)

    async def _observe(
        self,
        ctx: RunContext[RunDeps],
        spec: ToolSpec,
        call: ToolCallPart,
        args: dict[str, Any],
        handler: WrapToolExecuteHandler,
    ) -> Any:
        deps = run_deps(ctx)
        metadata = ctx.tool_call_metadata or {}
        redispatch = bool(metadata.get(REDISPATCH))
        approved = ctx.tool_call_approved and not redispatch
        decision: PolicyDecision | None = None
        if approved:
            await approved_args.check_dispatch(deps, call, metadata)
            # The decision that asked for the call; the approval answered it.
            stamped = metadata.get(POLICY)
            decision = PolicyDecision.from_json(stamped) if isinstance(stamped, Mapping) else None
        elif governed(spec):
            decision = await decide(deps, spec, call.tool_call_id, args)
            if self._discovered is not None and spec.server is not None:
                decision = self._discovered.review(spec, decision)
            cleared = decision.effect is PolicyEffect.ALLOW and authorization_of(decision) is None
            if not cleared and redispatch and await self._cleared_before(deps, call):
                # An earlier dispatch passed the gate (it ran, or was cleared): not asked again.
                decision = None
            if decision is not None:
                await self._apply(deps, spec, call, args, decision)
                if decision.effect is PolicyEffect.DENY:
                    return await self._execute(ctx, spec, call, args, denied(decision), metadata, decision)
        external = spec.external_kind()
        if external is not None:
            raise call_deferred(
                {"kind": external.value}, "question" if spec.executor is Executor.HUMAN else "external"
            )
        if redispatch and ctx.tool_call_approved and not await self._cleared_before(deps, call):
            # The dispatch of a segment that died is nobody's approval: a tool that gates itself
            # must ask again, not run (see `redispatch`).
            with not_approved(call.tool_call_id):
                return await self._execute(ctx, spec, call, args, handler, metadata, decision)
        return await self._execute(ctx, spec, call, args, handler, metadata, decision)

    async def _apply(
        self,
        deps: RunDeps,
        spec: ToolSpec,
        call: ToolCallPart,
        args: Mapping[str, Any],
        decision: PolicyDecision,
    ) -> None:
        """Act on a decision before the call runs: an ask suspends it; a pre-approval and a notify
        are written down first (a call they cleared is not asked again after a crash)."""
        if decision.effect is PolicyEffect.ASK:
            raise ApprovalRequired(metadata={"kind": PendingKind.APPROVAL.value, POLICY: decision.to_json()})
        authorization = authorization_of(decision)
        try:
            if authorization is not None:
                await self._audit_auto_approval(deps, spec, call, args, authorization)
            elif decision.effect is PolicyEffect.NOTIFY:
                await notify(deps, spec, call.tool_call_id, args, decision)
        except Exception:
            # Fail closed: a clearance that cannot be recorded asks for the call instead.
            event = "pre_approval.unavailable" if authorization is not None else "policy.unavailable"
            log.exception(event, tool_name=spec.name, tool_call_id=call.tool_call_id)
            raise ApprovalRequired(
                metadata={"kind": PendingKind.APPROVAL.value, POLICY: unavailable(spec).to_json()}
            ) from None

    @staticmethod
    async def _cleared_before(deps: RunDeps, call: ToolCallPart) -> bool:
        """Whether an earlier dispatch of this call (a segment that died) already passed the gate.

        A redispatched call carries no approval of its own, so the gate is asked again, unless the
        call has a stored outcome (it ran; `_execute` replays it) or a pre-approval (or a `notify`
        rule) was recorded for it. That recorded clearance holds, like an operator's approval: the
        call is not gated a second time and no second `pending.auto_approved` (`policy.notified`)
        row is written, even if the authorization or the policy has changed since.
        """
        async with deps.uow() as uow:
            if await uow.tool_calls.get(deps.conversation_id, call.tool_call_id) is not None:
                return True
            after_id: int | None = None
            while True:
                rows = await uow.audit.search(
                    workspace=deps.workspace,
                    conversation_id=deps.conversation_id,
                    correlation_id=None,
                    actions=(AUTO_APPROVED, NOTIFIED),
                    since=None,
                    after_id=after_id,
                    limit=_AUDIT_PAGE,
                    newest_first=True,
                )
                if any(row.details.get("tool_call_id") == call.tool_call_id for row in rows):
                    return True
                if len(rows) < _AUDIT_PAGE:
                    return False
                after_id = rows[-1].id

    @staticmethod
    async def _audit_auto_approval(
        deps: RunDeps, spec: ToolSpec, call: ToolCallPart, args: Mapping[str, Any], authorization: str
    ) -> None:
        jsonable = to_jsonable_python(dict(args))
        if deps.before_effect is not None:
            await deps.before_effect()
        now = deps.clock()
        async with deps.uow() as uow:
            details = {
                "tool_name": spec.name,
                "tool_call_id": call.tool_call_id,
                "authorization_id": authorization,
                "args_summary": sanitize(jsonable),
                "args_hash": args_hash(spec.name, jsonable),
            }
            await uow.audit.append(
                deps.audit_entry(AUTO_APPROVED, f"authorization:{authorization}", details), now
            )
            await uow.commit()
        log.info(
            "pre_approval.covered",
            tool_name=spec.name,
            tool_call_id=call.tool_call_id,
            authorization_id=authorization,
            run_id=str(deps.run_id),
        )

    async def _execute(
        self,
        ctx: RunContext[RunDeps],
        spec: ToolSpec,
        call: ToolCallPart,
        args: dict[str, Any],
        handler: WrapToolExecuteHandler,
        metadata: Mapping[str, Any],
        decision: PolicyDecision | None = None,
    ) -> Any:
        deps = run_deps(ctx)
        if deps.outcomes is not None and call.tool_call_id in deps.outcomes:
            previous = deps.outcomes.pop(call.tool_call_id)
        else:
            async with deps.uow.reader() as uow:
                previous = await uow.tool_calls.get(deps.conversation_id, call.tool_call_id)
        if previous is not None:
            # Dispatched before (a crashed segment): the stored outcome is the outcome.
            await approved_args.check_replay(deps, call, metadata, previous.args_hash)
            return self._shown(previous.result)
        if deps.before_effect is not None:
            await deps.before_effect()
        started_at = deps.clock()
        t0 = time.perf_counter()
        error_code: str | None = None
        ran_with = approved_args.approved_hash(metadata)
        timing = CallTiming(started_at, t0, spec.executor, spec.category, decision, args_hash=ran_with)
        crash_point("tool_started")
        crash_point(f"tool_started:{spec.name}")
        if spec.name in self._once:
            await at_most_once.dispatching(deps, spec, call, again=ctx.tool_call_approved)
        token = call_timing.set(timing)
        try:
            payload = stored_result(await handler(args))
            error_code = None if payload["ok"] else payload["error"]["code"]
            crash_point(f"tool_effect_committed:{spec.name}")
        except AlreadyApplied as exc:
            return self._shown(exc.payload)
        except CallDeferred as exc:
            raise _deferred_with_kind(exc, spec) from None
        except (ApprovalRequired, ModelRetry, ToolFailed, approved_args.ApprovedArgsMismatch):
            raise
        except ToolError as exc:
            payload = exc.to_result()
            error_code = exc.code
        except Exception:
            log.exception("tool.unexpected_error", tool_name=spec.name, tool_call_id=call.tool_call_id)
            payload = unexpected_error_result()
            error_code = "UNEXPECTED"
        finally:
            call_timing.reset(token)
        if metadata.get(EDITED_ARGS) is not None:
            payload[EDITED_NOTE] = metadata[EDITED_ARGS]
        ended_at = deps.clock()
        ok = bool(payload["ok"])
        span = trace.get_current_span()
        trace_id = current_trace_id()
        md = ToolCallMetadata(
            tool_name=spec.name,
            agent_name=deps.agent_name,
            latency_ms=round((time.perf_counter() - t0) * 1000, 3),
            ok=ok,
            error_class=None if ok else payload["error"]["class"],
            trace_id=trace_id,
            started_at=started_at,
            ended_at=ended_at,
            category=spec.category,
        )
        announce = ok and deps.announced is not None
        recorded = committed(timing.recorded_in)  # the outcome and its event went with the effect
        if not recorded:
            await self._record_outcome(
                deps, call.tool_call_id, spec, md, payload, error_code, announce, decision, ran_with
            )
            crash_point("tool_outcome_recorded")
        if (announce or recorded) and deps.announced is not None:
            deps.announced.add(call.tool_call_id)
        self._metrics.tool_call(md)
        if span.is_recording():  # a span nothing exports is given no attributes
            span.set_attributes(
                {
                    "sursis.tool.name": md.tool_name,
                    "sursis.tool.agent": md.agent_name,
                    "sursis.tool.ok": md.ok,
                    "sursis.tool.latency_ms": md.latency_ms,
                    "sursis.tool.error_class": md.error_class or "",
                    "sursis.tool.error_code": error_code or "",
                }
            )
        log.info(
            "tool.call",
            tool_name=md.tool_name,
            agent_name=md.agent_name,
            latency_ms=md.latency_ms,
            ok=md.ok,
            error_class=md.error_class,
            trace_id=md.trace_id,
            started_at=md.started_at.isoformat(),
            ended_at=md.ended_at.isoformat(),
            error_code=error_code,
            tool_call_id=call.tool_call_id,
            run_id=str(deps.run_id),
            conversation_id=str(deps.conversation_id),
        )
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

    @staticmethod
    async def _record_outcome(
        deps: RunDeps,
        tool_call_id: str,
        spec: ToolSpec,
        md: ToolCallMetadata,
        payload: dict[str, Any],
        error_code: str | None,
        announce: bool,
        decision: PolicyDecision | None,
        args_hash: str | None = None,
    ) -> None:
        async with deps.uow() as uow:
            await uow.tool_calls.record(
                ToolCallRecord(
                    conversation_id=deps.conversation_id,
                    run_id=deps.run_id,
                    tool_call_id=tool_call_id,
                    metadata=md,
                    result=payload,
                    error_code=error_code,
                    policy=decision,
                    args_hash=args_hash,
                )
            )
            if announce:
                data = result_event(deps, tool_call_id, spec.name, spec.executor, payload)
                await publish(
                    uow, deps.conversation_id, deps.workspace, EventType.TOOL_RESULT, data, md.ended_at
                )
            await uow.commit()


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
