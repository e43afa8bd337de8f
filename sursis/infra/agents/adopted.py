"""Adopting a pydantic-ai `Agent` as it is: its function tools are declared for the tool wrapper.

The agent keeps its instructions, output type, toolsets and model settings; the service adds only
what every agent gets (the tool wrapper, `DeferredToolRequests` as an output, tracing). A tool
declared with `requires_approval=True` is gated by the wrapper like a declared gated tool (so
pre-approvals apply to it), and a tool that raises `ApprovalRequired` or `CallDeferred` suspends
into a pending call. What the agent cannot say about a tool (its category, effect text, timeout,
who answers a deferred call) is given beside it as `ToolOptions`; its own deps are built per segment by
the factory given as `deps` (see `sursis.infra.agents.agent_deps`).
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from pydantic import TypeAdapter
from pydantic_ai import Tool
from pydantic_ai.agent import AbstractAgent
from pydantic_ai.models import Model
from pydantic_ai.toolsets import FunctionToolset

from sursis.domain.errors import ToolDeclarationError
from sursis.domain.tools import Approval, Category, Executor, ToolSpec
from sursis.infra.agents.agent_deps import DepsFactory
from sursis.infra.agents.capabilities import refused_capability
from sursis.infra.agents.declarations import AgentDefinition, DeclaredTool
from sursis.infra.agents.mcp_tools import McpTools, mcp_servers
from sursis.infra.agents.run_deps import RunDeps
from sursis.infra.agents.tool_options import ToolOptions as ToolOptions


def adopt(
    agent: AbstractAgent[Any, Any],
    *,
    name: str | None = None,
    tools: Mapping[str, ToolOptions] | None = None,
    model: Model | str | None = None,
    conversational: bool = True,
    deps: DepsFactory | None = None,
    supervisor: str | None = None,
) -> AgentDefinition:
    """The definition serving `agent` under `name` (default: the agent's own `name`; an agent
    without one needs `name`, unless `--agents module:VARIABLE` names it after its variable).

    `model` replaces the agent's own model; with neither, the service's model is used. `deps` builds
    the agent's own deps (`ctx.deps` of its tools) for each segment from the run's `RunInfo`; without
    it an agent that declares a `deps_type` is refused here, and `ctx.deps` is the service's `RunDeps`.
    Options may name the tools of the agent's MCP servers, which are known once the servers are
    listed. `supervisor` names a built-in supervisor (`customer`) that may delegate to the agent.
    """
    served = name or agent.name
    if not served:
        raise ToolDeclarationError(
            "an adopted pydantic-ai Agent needs a name: adopt(agent, name='...'), or serve it as "
            "--agents module:VARIABLE, which names it after the variable"
        )
    if (refused := refused_capability(agent)) is not None:
        raise ToolDeclarationError(f"agent {served!r}: {refused}")
    if deps is not None and not callable(deps):
        raise ToolDeclarationError(f"agent {served!r}: deps must be a factory taking the run's RunInfo")
    deps_type = getattr(agent, "deps_type", None)
    if deps is None and deps_type not in (None, type(None), Any, RunDeps, object):
        raise ToolDeclarationError(
            f"agent {served!r} declares deps_type={getattr(deps_type, '__name__', deps_type)}: "
            "give the factory that builds them, adopt(agent, deps=factory)"
        )
    options = dict(tools or {})
    declared: list[DeclaredTool] = []
    for toolset in agent.toolsets:
        if not isinstance(toolset, FunctionToolset):
            continue  # MCP servers and other toolsets: called as they are, described by their server
        for tool in toolset.tools.values():
            declared.append(_declare(served, tool, options.pop(tool.name, ToolOptions())))
    servers = mcp_servers(agent.toolsets)
    if options and not servers:
        raise ToolDeclarationError(
            f"agent {served!r}: options for tools it does not have: {', '.join(sorted(options))}"
        )
    return AgentDefinition(
        name=served,
        instructions="",
        tools=tuple(declared),
        conversational=conversational,
        model=model if model is not None else agent.model,
        adopted=agent,
        deps=deps,
        mcp=McpTools(served, servers, options) if servers else None,
        supervisor=supervisor,
    )


def _declare(agent: str, tool: Tool[Any], options: ToolOptions) -> DeclaredTool:
    try:
        return _declared(agent, tool, options)
    except ToolDeclarationError as exc:  # the spec names the tool already
        raise ToolDeclarationError(f"agent {agent!r}: {exc}") from exc
    except ValueError as exc:  # an option of no known value (category="bogus")
        raise ToolDeclarationError(f"agent {agent!r}, tool {tool.name!r}: {exc}") from exc


def _declared(agent: str, tool: Tool[Any], options: ToolOptions) -> DeclaredTool:
    gated = tool.requires_approval
    category = Category(options.category) if options.category else Category.MUTATE if gated else Category.READ
    approval = (
        Approval(options.approval)
        if options.approval
        else (Approval.REQUIRES_APPROVAL if gated else Approval.AUTO)
    )
    executor = Executor(options.executor) if options.executor else Executor.SERVER
    if executor is Executor.PROVIDER:
        raise ToolDeclarationError(
            f"agent {agent!r}, tool {tool.name!r}: a function tool is not hosted by the provider"
        )
    timeout = options.timeout
    spec = ToolSpec(
        tool.name,
        executor=executor,
        category=category,
        approval=approval,
        effect=options.effect,
        timeout=timedelta(seconds=timeout) if isinstance(timeout, int | float) else timeout,
    )
    result: TypeAdapter[Any] | None = None
    if spec.external_kind() is not None:
        try:
            annotation = typing.get_type_hints(tool.function).get("return")
        except NameError:
            annotation = None
        if annotation is not None and annotation is not Any:
            result = TypeAdapter(annotation)
    return DeclaredTool(
        spec=spec,
        tool=tool,
        result=result,
        idempotent=options.idempotent,
        category_declared=bool(options.category) or gated,
    )
