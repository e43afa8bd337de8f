"""The fifth link of the tool path: the outcome of a call that ran is recorded, with its
`tool.result` event (unless the tool's own transaction did both, `effects.record_effect`), as one
`ToolCallMetadata`; the last link tells it."""

from __future__ import annotations

import time
from typing import Any

from sursis.domain.events.events import EventType, publish
from sursis.domain.records import ToolCallMetadata, ToolCallRecord
from sursis.domain.tools import ToolSpec
from sursis.infra.agents.effects import committed, result_event
from sursis.infra.agents.run_deps import RunDeps
from sursis.infra.agents.tool_chain import ToolCall, WrapperLink
from sursis.infra.faults import crash_point
from sursis.infra.telemetry import current_trace_id


class OutcomeRecord(WrapperLink):
    """The outcome recorded (a `tool_calls` row), then the next link."""

    __slots__ = ()

    async def __call__(self, call: ToolCall) -> Any:
        deps, spec, timing, payload = call.deps, call.spec, call.timing, call.payload
        assert timing is not None, "recorded before it was dispatched"
        assert payload is not None, "recorded before it ran"
        ended_at = deps.clock()
        ok = bool(payload["ok"])
        md = ToolCallMetadata(
            tool_name=spec.name,
            agent_name=deps.agent_name,
            latency_ms=round((time.perf_counter() - timing.t0) * 1000, 3),
            ok=ok,
            error_class=None if ok else payload["error"]["class"],
            trace_id=current_trace_id(),
            started_at=timing.started_at,
            ended_at=ended_at,
            category=spec.category,
        )
        tool_call_id = call.call.tool_call_id
        announce = ok and deps.announced is not None
        recorded = committed(timing.recorded_in)  # the outcome and its event went with the effect
        if not recorded:
            record = ToolCallRecord(
                conversation_id=deps.conversation_id,
                run_id=deps.run_id,
                tool_call_id=tool_call_id,
                metadata=md,
                result=payload,
                error_code=call.error_code,
                policy=timing.policy,
                args_hash=timing.args_hash,
            )
            await _record(deps, spec, record, announce)
            crash_point("tool_outcome_recorded")
        if (announce or recorded) and deps.announced is not None:
            deps.announced.add(tool_call_id)
        call.emitted = md
        return await self.next(call)


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
