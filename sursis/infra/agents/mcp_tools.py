"""The MCP servers of an adopted agent: their tools described, governed and kept connected.

An MCP tool is discovered at run time: pydantic-ai's `MCPToolset` lists it (name, description,
input schema, the server's annotations). Each gets a `ToolSpec` like a declared tool, so every call
passes the one tool wrapper: `readOnlyHint: true` makes it `read` (it runs), anything else `mutate`
(gated: a person is asked), unless `ToolOptions` given to `adopt` say otherwise. The spec names its
server and carries `schema_digest`, the digest of what the model is told about the tool, so a
policy can tell a tool changed since it was allowed.

A server is connected once per process and reused by every segment (`McpTools.connect`, called as
a segment starts): a task of its own holds the connection open, and a server that stopped answering
a ping is connected again. A call of a tool that is not `read` is marked as dispatched (an audit row,
committed) before it is sent: when a crashed segment's call comes back without a recorded result,
the mark says the server may have received it, and the call becomes a pending call "outcome unknown"
for a person instead of a second call. A `read` tool's call is sent again.

What a server says about a tool is pinned in the database (`sursis.domain.agents.mcp_pins`): the digest of
everything it says (`tool_digest`: name, title, description, input and output schema, annotations).
A tool whose description differs from the accepted one is asked, in every process and after
restarts, until an admin accepts the new description. Each server is isolated (`mcp_isolation`): one
that is down fails only the calls of its own tools.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import structlog
from pydantic_ai import RunContext
from pydantic_ai.capabilities.abstract import WrapToolExecuteHandler
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset

from sursis.domain.clock import utcnow
from sursis.domain.errors import ToolDeclarationError
from sursis.domain.policy_decisions import PolicyDecision
from sursis.domain.tools import Category, Executor, ToolSpec
from sursis.infra.agents.call_marks import OUTCOME_UNKNOWN
from sursis.infra.agents.mcp_connections import McpConnection, McpServer, mcp_servers
from sursis.infra.agents.mcp_descriptions import (
    McpTool,
    Said,
    changed_review,
    described,
    mcp_tool_spec,
    read_only,
    said_of,
    schema_digest,
    tool_digest,
)
from sursis.infra.agents.mcp_failures import (
    DISPATCHED,
    MCP,
    one_line,
    outcome_unknown,
    server_died,
    server_unavailable,
)
from sursis.infra.agents.mcp_isolation import isolate_servers
from sursis.infra.agents.run_deps import run_deps

if TYPE_CHECKING:
    from sursis.infra.agents.tool_options import ToolOptions
    from sursis.infra.db.mcp_pins import SqlMcpPinStore

__all__ = [
    "DISPATCHED",
    "OUTCOME_UNKNOWN",
    "McpTool",
    "McpTools",
    "mcp_servers",
    "mcp_tool_spec",
    "outcome_unknown",
    "schema_digest",
    "tool_digest",
]

log = structlog.get_logger("sursis.mcp")


@dataclass(slots=True, eq=False)
class McpTools:
    """The MCP servers of one adopted agent, the options given for their tools and what they offer
    (compared, and hashed, by identity: it holds the process's connections)."""

    agent: str
    servers: Sequence[McpServer]
    options: Mapping[str, ToolOptions] = field(default_factory=dict)
    pins: SqlMcpPinStore | None = None
    """Where descriptions are pinned (set by the composition root); without it, in this process."""
    _tools: dict[str, McpTool] = field(default_factory=dict)
    _connections: dict[str, McpConnection] = field(default_factory=dict)
    _unavailable: dict[str, str] = field(default_factory=dict)
    """Servers that could not be reached or died, with why, until they are connected again."""
    _accepted: dict[str, str] = field(default_factory=dict)
    """The digest of each tool found accepted in storage by this process."""
    _first: dict[str, str] = field(default_factory=dict)
    """Without a store: the first digest this process saw of each tool."""
    _recalled: set[str] = field(default_factory=set)
    _warned: bool = False
    _lock: asyncio.Lock | None = None

    def __post_init__(self) -> None:
        for name, options in self.options.items():
            try:
                mcp_tool_spec(name, "?", None, {}, None, options)
                executor = Executor(options.executor) if options.executor is not None else Executor.SERVER
            except ValueError as exc:
                raise ToolDeclarationError(f"agent {self.agent!r}, tool {name!r}: {exc}") from exc
            if executor is not Executor.SERVER:
                raise ToolDeclarationError(
                    f"agent {self.agent!r}, tool {name!r}: an MCP tool is run by its server"
                )

    def tools(self) -> list[McpTool]:
        """The tools the servers offered when they were last listed, by name."""
        return [self._tools[name] for name in sorted(self._tools)]

    def tool(self, name: str) -> McpTool | None:
        return self._tools.get(name)

    def spec(self, name: str) -> ToolSpec | None:
        tool = self._tools.get(name)
        return tool.spec if tool is not None else None

    def unavailable(self) -> dict[str, str]:
        """The servers this process cannot reach now, with why (the banner, `/readyz`)."""
        return dict(self._unavailable)

    def why_unavailable(self, server: str) -> str | None:
        return self._unavailable.get(server)

    def lost(self, server: str, reason: str) -> None:
        """A server that cannot be reached (or died): its tools fail until it is connected again."""
        if server not in self._unavailable:
            log.warning("mcp.unavailable", server=server, agent=self.agent, error=reason)
        self._unavailable[server] = reason

    def tools_of(self, server: str) -> list[McpTool]:
        return [t for t in self.tools() if t.spec.server == server]

    async def remembered(self, server: McpServer) -> list[McpTool]:
        """The tools of a server that is down, as this process last listed them, else as their
        descriptions were last accepted (the stored pins, read once): the model still sees them,
        and a call of one is told the server is unavailable."""
        known = self.tools_of(server.name)
        if known or self.pins is None or server.name in self._recalled:
            return known
        self._recalled.add(server.name)
        try:
            pins = await self.pins.pins(changed_only=False)
        except Exception:
            log.exception("mcp.pins_unavailable", agent=self.agent, server=server.name)
            return []
        for pin in pins:
            if (pin.agent, pin.server) == (self.agent, server.name) and pin.tool not in self._tools:
                self._tools[pin.tool] = self._describe(Said.of(pin.tool, server.name, pin.description), True)
        return self.tools_of(server.name)

    def isolate(self, toolset: AbstractToolset[Any]) -> AbstractToolset[Any]:
        """The agent's toolset with each MCP server isolated (see `mcp_isolation`)."""
        return isolate_servers(self, toolset)

    def spec_for(self, tool_def: ToolDefinition) -> ToolSpec | None:
        """The spec of a tool from its definition alone, or None when it is not an MCP tool; a
        description other than the first this process saw is not believed (see `checked_spec`)."""
        said = self._defined(tool_def)
        if said is None:
            return None
        return self._remember(self._describe(said, self._first_seen(said))).spec

    async def checked_spec(self, ctx: RunContext[Any], tool_def: ToolDefinition) -> ToolSpec | None:
        """The spec of a tool the wrapper is about to call, or None when it is not an MCP tool.

        pydantic-ai's definition of an MCP tool carries the server's annotations in its metadata;
        the spec is built from what the server says now (its listing, cached by pydantic-ai), checked
        against the pinned description, so a tool changed since it was accepted is asked. The tool
        of a server that is down is not checked: its call fails before anything is sent."""
        said = self._defined(tool_def)
        if said is None:
            return None
        if said.server in self._unavailable:
            known = self._tools.get(said.name)
            return known.spec if known is not None else self._describe(said, accepted=True).spec
        said = await self._listed(said)
        return self._remember(await self._checked(said, run_deps(ctx).clock())).spec

    def _defined(self, tool_def: ToolDefinition) -> Said | None:
        metadata = tool_def.metadata
        if not isinstance(metadata, Mapping) or "annotations" not in metadata:
            return None
        known = self._tools.get(tool_def.name)
        server = known.spec.server if known is not None and known.spec.server else None
        server = server or tool_def.toolset_id or self._sole_server() or "mcp"
        return Said(
            tool_def.name,
            server,
            tool_def.description,
            tool_def.parameters_json_schema,
            metadata["annotations"],
            output_schema=tool_def.return_schema,
        )

    async def _listed(self, said: Said) -> Said:
        """What the server's listing says of the tool (its title too), else what its definition says."""
        server = next((s for s in self.servers if s.name == said.server), None)
        if server is None:
            return said
        try:
            listed = await server.toolset.list_tools()  # cached by pydantic-ai's toolset
        except Exception:
            return said
        return next(
            (said_of(said.name, said.server, t) for t in listed if f"{server.prefix}{t.name}" == said.name),
            said,
        )

    def _remember(self, tool: McpTool) -> McpTool:
        if self._tools.get(tool.spec.name) != tool:
            self._tools[tool.spec.name] = tool
        return tool

    def _first_seen(self, said: Said) -> bool:
        """Without stored pins: whether this is the first description this process saw."""
        return self._first.setdefault(said.name, said.digest) == said.digest

    def _sole_server(self) -> str | None:
        return self.servers[0].name if len(self.servers) == 1 else None

    async def _checked(self, said: Said, now: datetime) -> McpTool:
        """The tool as described, accepted or not: a description other than the pinned one is not."""
        digest = said.digest
        accepted = self._accepted.get(said.name) == digest
        if not accepted and self.pins is not None:
            try:
                check = await self.pins.check(
                    self.agent, said.name, said.server, digest, described(said), now
                )
                accepted = check.accepted
            except Exception:
                log.exception("mcp.pins_unavailable", agent=self.agent, tool_name=said.name)
                accepted = False  # fail closed: asked
            if accepted:
                self._accepted[said.name] = digest
            else:
                log.warning("mcp.tool_changed", agent=self.agent, server=said.server, tool_name=said.name)
        elif not accepted:
            accepted = self._first_seen(said)
        return self._describe(said, accepted)

    def _describe(self, said: Said, accepted: bool) -> McpTool:
        claimed = said.annotations
        if not accepted and read_only(claimed):
            # A changed description's claims are not believed until an admin accepts them.
            claimed = {**(claimed or {}), "readOnlyHint": False}
        spec = mcp_tool_spec(
            said.name, said.server, said.description, said.input_schema, claimed, self.options.get(said.name)
        )
        return McpTool(
            spec,
            said.description,
            dict(said.input_schema),
            dict(said.annotations) if said.annotations else None,
            said.title,
            dict(said.output_schema) if said.output_schema is not None else None,
            said.digest,
            accepted,
        )

    def review(self, spec: ToolSpec, decision: PolicyDecision) -> PolicyDecision:
        """A decision about a tool whose description was not accepted: asked (see `changed_review`)."""
        tool = self._tools.get(spec.name)
        if tool is None or tool.accepted:
            return decision
        return changed_review(spec, decision)

    async def connect(self) -> None:
        """Connect every server not connected yet and every one that stopped answering, then list
        their tools. A server that cannot be reached is marked unavailable: its tools fail, the
        others work."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            listed = True
            for server in self.servers:
                if getattr(server.toolset, "_resolves_per_run", False):
                    continue  # its `auth` or `headers` depend on the run: each run opens its own session
                connection = self._connections.get(server.name)
                try:
                    if connection is not None and connection.open and await connection.alive():
                        self._unavailable.pop(server.name, None)
                        continue
                    if connection is not None:
                        await connection.close()
                        log.info("mcp.reconnecting", server=server.name, agent=self.agent)
                    await self._open(server)
                    self._unavailable.pop(server.name, None)
                except Exception as exc:
                    listed = False
                    self.lost(server.name, one_line(exc))
            if listed:
                self._warn_unknown_options()

    async def _open(self, server: McpServer) -> None:
        """Connect to the server and list its tools; a second try after a failed first (a server
        slow to start on a busy host fails its first initialization, one that is missing fails
        both quickly)."""
        for attempt in (1, 2):
            connection = self._connections[server.name] = McpConnection(server)
            try:
                await connection.connect()
                await self._list(server)
                return
            except Exception:
                await connection.close()
                if attempt == 2:
                    raise
                log.info("mcp.connect_retry", server=server.name, agent=self.agent)

    async def _list(self, server: McpServer) -> None:
        listed = await server.toolset.list_tools()
        now = utcnow()
        for tool in listed:
            said = said_of(f"{server.prefix}{tool.name}", server.name, tool)
            self._tools[said.name] = await self._checked(said, now)
        log.info("mcp.connected", server=server.name, agent=self.agent, tools=len(listed))

    def _warn_unknown_options(self) -> None:
        """Options naming a tool no server offers (told once, when every server was listed)."""
        unknown = sorted(set(self.options) - set(self._tools))
        if unknown and not self._warned:
            log.warning("mcp.options_for_unknown_tools", agent=self.agent, tools=unknown)
        self._warned = True

    async def close(self) -> None:
        for connection in self._connections.values():
            await connection.close()
        self._connections.clear()

    def resends(self, spec: ToolSpec) -> bool:
        """Whether a call of the tool is sent again after a crash: it is `read`, or declared
        `ToolOptions(idempotent=True)`."""
        options = self.options.get(spec.name)
        return spec.category is Category.READ or (options is not None and options.idempotent)

    def guarded(
        self, ctx: RunContext[Any], spec: ToolSpec, call: ToolCallPart, handler: WrapToolExecuteHandler
    ) -> WrapToolExecuteHandler:
        """The handler of an MCP call. A server known to be down fails the call, naming it, before
        anything is sent. A call of a tool that is not `read` is marked as dispatched before it is
        sent; a call marked before (a segment died after sending it), or one whose server died while
        it ran, is a pending call "outcome unknown" for a person. A tool declared
        `ToolOptions(idempotent=True)` is sent again, like a `read` one."""
        server = spec.server or "mcp"
        resend = self.resends(spec)

        async def send(args: dict[str, Any]) -> Any:
            reason = self._unavailable.get(server)
            if reason is not None:
                raise server_unavailable(server, reason)
            if resend:
                return await self._sent(server, spec, handler, args)
            await MCP.dispatching(run_deps(ctx), spec, call, again=True)
            return await self._sent(server, spec, handler, args)

        return send

    async def _sent(
        self, server: str, spec: ToolSpec, handler: WrapToolExecuteHandler, args: dict[str, Any]
    ) -> Any:
        """The call sent; a server that died while it ran is marked lost, and the call is an error
        naming it (a `read` tool) or "outcome unknown" (it may have taken effect)."""
        try:
            return await handler(args)
        except Exception as exc:
            if not server_died(exc):
                raise
            self.lost(server, "it stopped while a call ran")
            log.warning("mcp.server_died_mid_call", server=server, tool_name=spec.name)
            if spec.category is Category.READ:
                raise server_unavailable(server, "it stopped while this call ran") from None
            raise outcome_unknown(spec, died=True) from None
