"""Adopting a pydantic-ai `Agent` as it is: its function tools, and those its capabilities bring
(`capability_tools`), are declared for the tool wrapper.

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
from sursis.infra.agents.capability_tools import CapabilityTool, RunTimeTools, listed_capability_tools
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
    listed, and those of its capabilities (`capability_tools`), also tools a capability adds only
    at run time. `supervisor` names a built-in supervisor (`customer`) that may delegate to the agent.
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
            continue  # MCP servers and capabilities' toolsets: below
        for tool in toolset.tools.values():
            declared.append(_declare(served, tool, options.pop(tool.name, ToolOptions())))
    listed = listed_capability_tools(agent)
    for brought in listed.tools:
        given = options.pop(brought.tool.name, ToolOptions())
        declared.append(_declare(served, brought.tool, given, brought))
    servers = mcp_servers(agent.toolsets)
    if options and not servers and not listed.run_time:
        raise ToolDeclarationError(
            f"agent {served!r}: options for tools it does not have: {', '.join(sorted(options))}"
        )
    mcp = McpTools(served, servers, options) if servers else None
    return AgentDefinition(
        name=served,
        instructions="",
        tools=tuple(declared),
        conversational=conversational,
        model=model if model is not None else agent.model,
        adopted=agent,
        deps=deps,
        mcp=mcp,
        supervisor=supervisor,
        run_time=RunTimeTools(served, mcp, options),
    )


def _declare(
    agent: str, tool: Tool[Any], options: ToolOptions, brought: CapabilityTool | None = None
) -> DeclaredTool:
    try:
        return _declared(agent, tool, options, brought)
    except ToolDeclarationError as exc:  # the spec names the tool already
        raise ToolDeclarationError(f"agent {agent!r}: {exc}") from exc
    except ValueError as exc:  # an option of no known value (category="bogus")
        raise ToolDeclarationError(f"agent {agent!r}, tool {tool.name!r}: {exc}") from exc


def _declared(
    agent: str, tool: Tool[Any], options: ToolOptions, brought: CapabilityTool | None
) -> DeclaredTool:
    gated = tool.requires_approval
    asks_user = brought is not None and brought.asks_user
    # The agent's own tool is `read` unless it gates itself; a capability's is `mutate` until its
    # options say otherwise (its author is seldom the agent's); the harness's question is read.
    uncategorised = Category.MUTATE if gated or (brought is not None and not asks_user) else Category.READ
    category = Category(options.category) if options.category else uncategorised
    approval = (
        Approval(options.approval)
        if options.approval
        else (Approval.REQUIRES_APPROVAL if gated else None if category is Category.MUTATE else Approval.AUTO)
    )
    default_executor = Executor.HUMAN if asks_user else Executor.SERVER
    executor = Executor(options.executor) if options.executor else default_executor
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
        capability=brought.capability if brought is not None else None,
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
