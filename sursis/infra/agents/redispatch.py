"""A call dispatched again after its segment died is nobody's approval.

pydantic-ai hands the tool of a redispatched call (one the runner answers with `ToolApproved`, so
that it runs again under the same id) a context that says `tool_call_approved=True`. A tool that
gates itself (`if not ctx.tool_call_approved: raise ApprovalRequired`) would then run unasked. The
tool wrapper marks such a call here, and the toolset wrapper the wrapper installs hands the tool a
context that says "not approved", so the tool asks a person as it did the first time.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from copy import copy
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.toolsets import WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool

_unapproved: ContextVar[str | None] = ContextVar("sursis_unapproved_call", default=None)


@contextmanager
def not_approved(tool_call_id: str) -> Iterator[None]:
    """While inside, the tool of call `tool_call_id` is told it is not approved."""
    token = _unapproved.set(tool_call_id)
    try:
        yield
    finally:
        _unapproved.reset(token)


class UnapprovedRedispatch(WrapperToolset[Any]):
    """The agent's toolset, handing a marked call's tool a context that says it is not approved."""

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        if ctx.tool_call_approved and ctx.tool_call_id and _unapproved.get() == ctx.tool_call_id:
            ctx = copy(ctx)
            ctx.tool_call_approved = False
        return await super().call_tool(name, tool_args, ctx, tool)
