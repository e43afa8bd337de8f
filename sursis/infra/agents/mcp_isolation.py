"""Each MCP server of an agent on its own: one that is down fails only the calls of its tools.

pydantic-ai enters every toolset of an agent as a run starts, and one server that cannot be started
fails the whole run (and, retried, the run's every attempt). Here each MCP toolset is wrapped for the
run: a server that cannot be entered is left out and marked unavailable; its tools (as this process
or the stored pins last knew them) stay visible to the model, and a call of one is a tool error naming
the server. The agent's other servers and its own tools run as usual.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, Self

from pydantic_ai import RunContext
from pydantic_ai.messages import InstructionPart
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, WrapperToolset
from pydantic_ai.toolsets.abstract import ToolsetTool
from pydantic_core import SchemaValidator, core_schema

from sursis.infra.agents.mcp_connections import McpServer
from sursis.infra.agents.mcp_descriptions import McpTool
from sursis.infra.agents.mcp_failures import one_line, server_unavailable


class McpTools(Protocol):
    """What isolation needs of an agent's MCP tools (`sursis.infra.agents.mcp_tools.McpTools`),
    named here so that this module does not import the one that wraps servers with it."""

    @property
    def servers(self) -> Sequence[McpServer]: ...

    def why_unavailable(self, server: str) -> str | None: ...

    def lost(self, server: str, reason: str) -> None: ...

    async def remembered(self, server: McpServer) -> list[McpTool]: ...


_ANY_ARGS = SchemaValidator(core_schema.any_schema())


def isolate_servers(tools: McpTools, toolset: AbstractToolset[Any]) -> AbstractToolset[Any]:
    """`toolset` with each of the agent's MCP servers wrapped in an `IsolatedServer`."""
    servers = {id(s.toolset): s for s in tools.servers}

    def visit(leaf: AbstractToolset[Any]) -> AbstractToolset[Any]:
        server = servers.get(id(leaf))
        return IsolatedServer(leaf, tools, server) if server is not None else leaf

    return toolset.visit_and_replace(visit)


@dataclass
class IsolatedServer(WrapperToolset[Any]):
    """One MCP server for one run: entered if it can be, otherwise its tools fail by name."""

    tools: McpTools
    server: McpServer
    entered: bool = field(default=False, init=False)

    async def __aenter__(self) -> Self:
        name = self.server.name
        if self.tools.why_unavailable(name) is not None and not _per_run(self.server):
            return self  # this segment's connect just failed: not tried twice
        try:
            await self.wrapped.__aenter__()
        except Exception as exc:
            self.tools.lost(name, one_line(exc))
            return self
        self.entered = True
        return self

    async def __aexit__(self, *args: Any) -> bool | None:
        if not self.entered:
            return None
        self.entered = False
        try:
            return await self.wrapped.__aexit__(*args)
        except Exception as exc:  # a server that died leaves its session broken
            self.tools.lost(self.server.name, one_line(exc))
            return None

    async def get_instructions(self, ctx: RunContext[Any]) -> str | InstructionPart | Sequence[Any] | None:
        """The server's own instructions; while it is down, a line telling the model which server
        is unavailable (its tools fail by name until it is back)."""
        reason = self.tools.why_unavailable(self.server.name)
        if self.entered and reason is None:
            return await super().get_instructions(ctx)
        return (
            f"The MCP server {self.server.name!r} is unavailable ({reason or 'it could not be started'}); "
            "calls of its tools fail until it is back. Other tools work."
        )

    async def get_tools(self, ctx: RunContext[Any]) -> dict[str, ToolsetTool[Any]]:
        if self.entered and self.tools.why_unavailable(self.server.name) is None:
            try:
                return await self.wrapped.get_tools(ctx)
            except Exception as exc:
                self.tools.lost(self.server.name, one_line(exc))
        known = await self.tools.remembered(self.server)
        prefix = self.server.prefix
        return {
            t.spec.name.removeprefix(prefix): ToolsetTool(
                toolset=self, tool_def=_definition(t, prefix), max_retries=0, args_validator=_ANY_ARGS
            )
            for t in known
        }

    async def call_tool(
        self, name: str, tool_args: dict[str, Any], ctx: RunContext[Any], tool: ToolsetTool[Any]
    ) -> Any:
        reason = self.tools.why_unavailable(self.server.name)
        if not self.entered or reason is not None:
            raise server_unavailable(self.server.name, reason or "it could not be started")
        return await self.wrapped.call_tool(name, tool_args, ctx, tool)


def _per_run(server: McpServer) -> bool:
    return bool(getattr(server.toolset, "_resolves_per_run", False))


def _definition(tool: McpTool, prefix: str) -> ToolDefinition:
    """A tool of a server that is down, as it was last described."""
    return ToolDefinition(
        name=tool.spec.name.removeprefix(prefix),
        description=tool.description,
        parameters_json_schema=dict(tool.input_schema),
        metadata={"annotations": tool.annotations, "meta": None, "task": False},
    )
