"""The tools an adopted agent's capabilities bring, governed like its own.

pydantic-ai 2.x composes agents from capabilities (`Capability(tools=...)`, `@cap.tool`, a toolset of
a capability of one's own, pydantic-ai-harness's `AskUser`), eager or `defer_loading=True`. Their
tools reach the model beside the agent's own, so they pass the same wrapper, under a `ToolSpec`:

* a tool a capability lists before any run (a `FunctionToolset`, also inside a `CombinedToolset`) is
  declared when the agent is adopted (`listed_capability_tools`): in the catalog with its
  capability's name, open to `ToolOptions`, recorded in `tool_calls`, run at most once;
* a tool that appears only at run time (a toolset built per run, a wrapper that adds tools) gets
  its spec when it is called (`RunTimeTools`); both kinds are `mutate` (a person is asked) unless
  `ToolOptions` categorise them: the service cannot tell what a tool it never saw changes.

The harness's `ask_user_question` becomes a question for a person (executor `human`), answered
through the pending-call API. pydantic-ai's own tools that only reveal other tools
(`load_capability`, `search_tools`) are not calls of the agent's tools and pass as they are.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic_ai import RunContext, Tool
from pydantic_ai.agent import AbstractAgent
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.capabilities.abstract import WrapToolExecuteHandler
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, CombinedToolset, FunctionToolset

from sursis.domain.errors import ToolDeclarationError
from sursis.domain.policy_decisions import PolicyDecision
from sursis.domain.tools import Approval, Category, ToolSpec
from sursis.infra.agents import at_most_once
from sursis.infra.agents.capabilities import capability_leaves
from sursis.infra.agents.run_deps import run_deps
from sursis.infra.agents.tool_options import ToolOptions

if TYPE_CHECKING:
    from sursis.infra.agents.mcp_tools import McpTools

REVEALING_TOOLS = frozenset({"load_capability", "search_tools"})
"""pydantic-ai's own tools that load a deferred capability or find deferred tools: they change
nothing, and their results are read by pydantic-ai itself."""
ASK_USER = "ask_user_question"


@dataclass(frozen=True, slots=True)
class CapabilityTool:
    """A tool a capability lists before any run."""

    capability: str
    tool: Tool[Any]
    asks_user: bool = False
    """The harness's `AskUser` question: a person answers it."""


@dataclass(frozen=True, slots=True)
class ListedTools:
    """What an agent's capabilities list before any run, and whether any may add tools at run time."""

    tools: tuple[CapabilityTool, ...]
    run_time: bool


def capability_name(capability: AbstractCapability[Any]) -> str:
    """How the catalog names a capability: its `id`, else its class."""
    given = getattr(capability, "id", None)
    return given if isinstance(given, str) and given else type(capability).__name__


def listed_capability_tools(agent: AbstractAgent[Any, Any]) -> ListedTools:
    """The function tools of the agent's capabilities, eager and deferred alike."""
    tools: list[CapabilityTool] = []
    run_time = False
    ask_type = _ask_user_toolset()
    for capability in capability_leaves(agent):
        run_time = run_time or _wraps_toolsets(capability)
        try:
            toolset = capability.get_toolset()
        except Exception:  # a toolset that needs a run: its tools are known at run time
            run_time = True
            continue
        if toolset is None:
            continue
        name = capability_name(capability)
        for leaf, listed in _function_toolsets(toolset):
            if not listed:
                run_time = True
                continue
            asks = ask_type is not None and isinstance(leaf, ask_type)
            tools += [CapabilityTool(name, tool, asks) for tool in leaf.tools.values()]
    return ListedTools(tuple(tools), run_time)


def _function_toolsets(toolset: Any) -> Iterator[tuple[FunctionToolset[Any], bool]]:
    """The leaves of a capability's toolset, each with whether its tools can be listed now."""
    if isinstance(toolset, FunctionToolset):
        yield toolset, True
    elif isinstance(toolset, CombinedToolset):
        for inner in toolset.toolsets:
            yield from _function_toolsets(inner)
    else:
        yield FunctionToolset(), False


def _wraps_toolsets(capability: AbstractCapability[Any]) -> bool:
    """Whether a capability other than pydantic-ai's own wraps the agent's toolsets, where it may
    add tools of its own."""
    own = type(capability).get_wrapper_toolset
    return own is not AbstractCapability.get_wrapper_toolset and not type(capability).__module__.startswith(
        "pydantic_ai."
    )


def _ask_user_toolset() -> type[Any] | None:
    module = sys.modules.get("pydantic_ai_harness.ask_user._toolset")
    found = getattr(module, "AskUserToolset", None)
    return found if isinstance(found, type) else None


def run_time_spec(name: str, options: ToolOptions | None) -> ToolSpec:
    """The spec of a tool first seen when it is called: `mutate` unless its options say otherwise."""
    options = options or ToolOptions()
    category = Category(options.category) if options.category else Category.MUTATE
    return ToolSpec(
        name,
        category=category,
        approval=Approval(options.approval) if options.approval else None,
        effect=options.effect,
    )


@dataclass(slots=True, eq=False)
class RunTimeTools:
    """The tools an adopted agent finds at run time (`observed.DiscoveredTools`): its MCP servers'
    (`mcp`, described by their servers) and any other a capability adds to a run, governed as
    `run_time_spec` says. A call of a tool that is not `read` is marked before it runs, so a call
    whose worker died while it ran asks a person ("outcome unknown") instead of running again."""

    agent: str
    mcp: McpTools | None = None
    """The agent's `McpTools`, if it has MCP servers."""
    options: Mapping[str, ToolOptions] = field(default_factory=dict)
    _seen: dict[str, ToolSpec] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, options in self.options.items():
            try:
                run_time_spec(name, options)
            except (ValueError, ToolDeclarationError) as exc:
                raise ToolDeclarationError(f"agent {self.agent!r}, tool {name!r}: {exc}") from exc

    def spec(self, name: str) -> ToolSpec | None:
        """The spec of a run-time tool this process has seen called."""
        return self._seen.get(name)

    def specs(self) -> list[ToolSpec]:
        return [self._seen[name] for name in sorted(self._seen)]

    async def checked_spec(self, ctx: RunContext[Any], tool_def: ToolDefinition) -> ToolSpec | None:
        if self.mcp is not None:
            spec: ToolSpec | None = await self.mcp.checked_spec(ctx, tool_def)
            if spec is not None:
                return spec
        if tool_def.kind not in ("function", "unapproved") or tool_def.name in REVEALING_TOOLS:
            return None
        known = self._seen.get(tool_def.name)
        if known is None:
            known = self._seen[tool_def.name] = run_time_spec(tool_def.name, self.options.get(tool_def.name))
        return known

    def guarded(
        self, ctx: RunContext[Any], spec: ToolSpec, call: ToolCallPart, handler: WrapToolExecuteHandler
    ) -> WrapToolExecuteHandler:
        if spec.server is not None and self.mcp is not None:
            return self.mcp.guarded(ctx, spec, call, handler)
        options = self.options.get(spec.name)
        if spec.category is Category.READ or (options is not None and options.idempotent):
            return handler

        async def once(args: dict[str, Any]) -> Any:
            await at_most_once.TOOL.dispatching(run_deps(ctx), spec, call, again=ctx.tool_call_approved)
            return await handler(args)

        return once

    def review(self, spec: ToolSpec, decision: PolicyDecision) -> PolicyDecision:
        if spec.server is not None and self.mcp is not None:
            return self.mcp.review(spec, decision)
        return decision

    def isolate(self, toolset: AbstractToolset[Any]) -> AbstractToolset[Any]:
        return self.mcp.isolate(toolset) if self.mcp is not None else toolset
