"""The one wrapper around every tool call: the entry of the tool path, and its assembly.

It enforces the tool contract (approval gate, human/client executors), turns every outcome into the
`{"ok": ...}` convention without crashing the run or spending retries, and emits one
`ToolCallMetadata` per executed call (log event, span attributes, `tool_calls` row). Each of these is
one link of a chain, built here in the order a call passes them (`tool_chain`):

    PolicyGate → Suspension → Dispatched → Execution → OutcomeRecord → CallTelemetry
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any, Protocol

import structlog
from pydantic_ai import RunContext
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.capabilities.abstract import WrapToolExecuteHandler
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset

from sursis.domain.policy_decisions import PolicyDecision
from sursis.domain.ports import ServiceMetrics
from sursis.domain.tools import ToolSpec
from sursis.infra.agents.call_marks import REVIEW
from sursis.infra.agents.call_outcomes import OutcomeRecord
from sursis.infra.agents.call_telemetry import CallTelemetry
from sursis.infra.agents.dispatched import Dispatched
from sursis.infra.agents.policy_gate import PolicyGate
from sursis.infra.agents.redispatch import UnapprovedRedispatch
from sursis.infra.agents.run_deps import RunDeps, run_deps
from sursis.infra.agents.suspension import Suspension
from sursis.infra.agents.tool_chain import EDITED_ARGS, POLICY, REDISPATCH, ToolCall, ToolLink
from sursis.infra.agents.tool_execution import Execution
from sursis.infra.agents.tool_results import EDITED_NOTE, failure_message, failure_text, told

__all__ = [
    "EDITED_ARGS",
    "EDITED_NOTE",
    "POLICY",
    "REDISPATCH",
    "REVIEW",
    "DiscoveredTools",
    "ObservedTools",
    "failure_message",
    "failure_text",
    "tool_path",
]


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


def tool_path(
    metrics: ServiceMetrics | None = None,
    discovered: DiscoveredTools | None = None,
    once: frozenset[str] = frozenset(),
) -> ToolLink:
    """The links of the tool path, each wrapping the next, in the order a call passes them."""
    return PolicyGate(
        Suspension(Dispatched(Execution(OutcomeRecord(CallTelemetry(metrics))), once)), discovered
    )


class ObservedTools(AbstractCapability[RunDeps]):
    """The capability every tool call of an agent goes through: it hands the call to the chain.

    pydantic-ai's instrumentation is the outermost capability, so the current span in the chain is
    the call's `execute_tool` span.
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
        self._discovered = discovered
        self._raw_results = raw_results
        self._chain = tool_path(metrics, discovered, once)

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
            one = ToolCall(ctx, deps, spec, call, args, ctx.tool_call_metadata or {}, handler)
            return told(await self._chain(one), raw=self._raw_results)
