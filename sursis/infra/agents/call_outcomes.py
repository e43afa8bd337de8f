"""A tool call's outcome once it ran: recorded with its `tool.result` event (unless the tool's own
transaction did), counted, put on the call's span and logged (`ToolCallMetadata`)."""

from __future__ import annotations

import time
from typing import Any

import structlog
from opentelemetry import trace

from sursis.domain.events import EventType, publish
from sursis.domain.ports import ServiceMetrics
from sursis.domain.records import ToolCallMetadata, ToolCallRecord
from sursis.domain.tools import ToolSpec
from sursis.infra.agents.effects import CallTiming, committed, result_event
from sursis.infra.agents.run_deps import RunDeps
from sursis.infra.faults import crash_point
from sursis.infra.telemetry import current_trace_id

log = structlog.get_logger("sursis.tools")


async def outcome_recorded(
    deps: RunDeps,
    spec: ToolSpec,
    tool_call_id: str,
    timing: CallTiming,
    payload: dict[str, Any],
    error_code: str | None,
    metrics: ServiceMetrics,
) -> None:
    """Record, count and tell the outcome of a call that ran (one `ToolCallMetadata`)."""
    ended_at = deps.clock()
    ok = bool(payload["ok"])
    span = trace.get_current_span()
    trace_id = current_trace_id()
    md = ToolCallMetadata(
        tool_name=spec.name,
        agent_name=deps.agent_name,
        latency_ms=round((time.perf_counter() - timing.t0) * 1000, 3),
        ok=ok,
        error_class=None if ok else payload["error"]["class"],
        trace_id=trace_id,
        started_at=timing.started_at,
        ended_at=ended_at,
        category=spec.category,
    )
    announce = ok and deps.announced is not None
    recorded = committed(timing.recorded_in)  # the outcome and its event went with the effect
    if not recorded:
        record = ToolCallRecord(
            conversation_id=deps.conversation_id,
            run_id=deps.run_id,
            tool_call_id=tool_call_id,
            metadata=md,
            result=payload,
            error_code=error_code,
            policy=timing.policy,
            args_hash=timing.args_hash,
        )
        await _record(deps, spec, record, announce)
        crash_point("tool_outcome_recorded")
    if (announce or recorded) and deps.announced is not None:
        deps.announced.add(tool_call_id)
    metrics.tool_call(md)
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
        tool_call_id=tool_call_id,
        run_id=str(deps.run_id),
        conversation_id=str(deps.conversation_id),
    )


async def _record(deps: RunDeps, spec: ToolSpec, record: ToolCallRecord, announce: bool) -> None:
    """The outcome stored, with its `tool.result` event when the segment asked for one."""
    async with deps.uow() as uow:
        await uow.tool_calls.record_outcome(record)
        if announce:
            data = result_event(deps, record.tool_call_id, spec.name, spec.executor, record.result)
            await publish(
                uow,
                deps.conversation_id,
                deps.workspace,
                EventType.TOOL_RESULT,
                data,
                record.metadata.ended_at,
            )
        await uow.commit()
