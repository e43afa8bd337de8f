"""A tool's side effect and its outcome, written in one transaction: the idempotency record of a
call (`record_effect`), and what the one tool wrapper knows of the call while the tool runs."""

from __future__ import annotations

import time
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic_ai import RunContext
from pydantic_core import to_jsonable_python

from sursis.domain.errors import Error
from sursis.domain.events.events import EventType, publish
from sursis.domain.policy_decisions import PolicyDecision
from sursis.domain.ports import UnitOfWork
from sursis.domain.records import ToolCallMetadata, ToolCallRecord
from sursis.domain.tools import Category, Executor
from sursis.infra.agents.run_deps import RunDeps, run_deps
from sursis.infra.agents.tool_results import stored_result
from sursis.infra.faults import crash_point
from sursis.infra.telemetry import current_trace_id


@dataclass(slots=True)
class CallTiming:
    started_at: datetime
    t0: float
    executor: Executor | None = None
    category: Category | None = None
    policy: PolicyDecision | None = None
    recorded_in: UnitOfWork | None = None
    """The tool's transaction that recorded the outcome with the effect (`record_effect`), and
    published its `tool.result` event when the segment asked for that."""
    args_hash: str | None = None
    """The hash of the approved arguments the call runs with (None: not on an approval)."""


call_timing: ContextVar[CallTiming | None] = ContextVar("sursis_tool_call_timing", default=None)


class AlreadyApplied(Error):
    """A side effect for this tool call id was committed before; carries the stored outcome."""

    code = "already_applied"

    def __init__(self, payload: Any) -> None:
        super().__init__("already applied")
        self.payload = payload


async def record_effect(uow: UnitOfWork, ctx: RunContext[RunDeps], tool_name: str, result: Any) -> None:
    """Record a side effect's outcome in the same transaction as the effect.

    The `(conversation_id, tool_call_id)` row is the idempotency record: when it already
    exists, the effect was applied by an earlier dispatch of the same call, and the caller's
    transaction must not commit (`AlreadyApplied` makes sure it rolls back).
    """
    deps = run_deps(ctx)
    timing = call_timing.get() or CallTiming(deps.clock(), time.perf_counter())
    payload = stored_result(result)
    md = ToolCallMetadata(
        tool_name=tool_name,
        agent_name=deps.agent_name,
        latency_ms=round((time.perf_counter() - timing.t0) * 1000, 3),
        ok=bool(payload["ok"]),
        error_class=None if payload["ok"] else payload["error"]["class"],
        trace_id=current_trace_id(),
        started_at=timing.started_at,
        ended_at=deps.clock(),
        category=timing.category,
    )
    inserted = await uow.tool_calls.record(
        ToolCallRecord(
            conversation_id=deps.conversation_id,
            run_id=deps.run_id,
            tool_call_id=ctx.tool_call_id or "",
            metadata=md,
            result=payload,
            policy=timing.policy,
            args_hash=timing.args_hash,
        )
    )
    if not inserted:
        previous = await uow.tool_calls.get(deps.conversation_id, ctx.tool_call_id or "")
        raise AlreadyApplied(previous.result if previous else payload)
    if call_timing.get() is timing and timing.executor is not None and deps.announced is not None:
        # The outcome is written with the effect; its event goes with them, so the call's
        # wrapper has nothing left to write once the tool's transaction has committed.
        data = result_event(deps, ctx.tool_call_id or "", tool_name, timing.executor, payload)
        await publish(uow, deps.conversation_id, deps.workspace, EventType.TOOL_RESULT, data, md.ended_at)
        timing.recorded_in = uow
    # The effect and its record are written, not committed: a crash here must undo both.
    crash_point(f"tool_effect_uncommitted:{tool_name}")


def result_event(
    deps: RunDeps, tool_call_id: str, tool_name: str, executor: Executor, payload: Mapping[str, Any]
) -> dict[str, Any]:
    return {
        "run_id": str(deps.run_id),
        "tool_call_id": tool_call_id,
        "tool_name": tool_name,
        "executor": executor.value,
        "ok": True,
        "result": to_jsonable_python(payload.get("result"), fallback=str),
    }


def committed(uow: UnitOfWork | None) -> bool:
    return uow is not None and bool(getattr(uow, "committed", False))
