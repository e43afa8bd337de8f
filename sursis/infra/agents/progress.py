"""Progress reports of `streaming` tools: they reach the event stream as `tool.progress`."""

from __future__ import annotations

from typing import Any

from pydantic_ai import RunContext

from sursis.infra.agents.run_deps import RunDeps


async def report_progress(ctx: RunContext[RunDeps], progress: Any) -> None:
    """Report how far the current tool call got (any JSON-able value). Best effort, never raises.

    Only tools declared with `ToolSpec(streaming=True)` are heard; reports of other tools are
    dropped, so a UI can rely on the declaration to know which calls show progress.
    """
    sink = ctx.deps.progress
    if sink is not None and ctx.tool_name and ctx.tool_call_id:
        await sink(ctx.tool_name, ctx.tool_call_id, progress)
