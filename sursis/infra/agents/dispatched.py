"""The third link of the tool path: a call is dispatched once.

A call with a stored outcome (dispatched by a segment that died) is told that outcome, as it was
first told, and does not run again. Any other call's dispatch starts here: the segment's hook before
an effect, the call's timing, its crash points, and, for a tool that runs at most once per call id,
its dispatch mark (`at_most_once`).
"""

from __future__ import annotations

import time
from typing import Any

from sursis.infra.agents import at_most_once
from sursis.infra.agents.approved_args import approved_hash, check_replay
from sursis.infra.agents.effects import CallTiming
from sursis.infra.agents.tool_chain import ToolCall, ToolLink, WrapperLink
from sursis.infra.agents.tool_control_flow import replay
from sursis.infra.faults import crash_point


class Dispatched(WrapperLink):
    """The stored outcome of a call dispatched before, or its dispatch started, then the next link."""

    __slots__ = ("_once",)

    def __init__(self, next: ToolLink, once: frozenset[str] = frozenset()) -> None:
        super().__init__(next)
        self._once = once
        """Tools that run at most once per call id (`at_most_once`)."""

    async def __call__(self, call: ToolCall) -> Any:
        deps, spec, part = call.deps, call.spec, call.call
        if deps.outcomes is not None and part.tool_call_id in deps.outcomes:
            previous = deps.outcomes.pop(part.tool_call_id)
        else:
            async with deps.uow.reader() as uow:
                previous = await uow.tool_calls.get(deps.conversation_id, part.tool_call_id)
        if previous is not None:
            # Dispatched before (a crashed segment): the stored outcome is the outcome.
            await check_replay(deps, part, call.metadata, previous.args_hash)
            replay(previous.result)
            return previous.result
        if deps.before_effect is not None:
            await deps.before_effect()
        ran_with = approved_hash(call.metadata)
        call.timing = CallTiming(
            deps.clock(), time.perf_counter(), spec.executor, spec.category, call.decision, args_hash=ran_with
        )
        crash_point("tool_started")
        crash_point(f"tool_started:{spec.name}")
        if spec.name in self._once:
            await at_most_once.dispatching(deps, spec, part, again=call.ctx.tool_call_approved)
        return await self.next(call)
