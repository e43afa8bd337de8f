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
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import structlog
from pydantic_ai import RunContext
from pydantic_ai.capabilities.abstract import WrapToolExecuteHandler
from pydantic_ai.exceptions import CallDeferred
from pydantic_ai.messages import ToolCallPart
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.toolsets import AbstractToolset, CombinedToolset, PrefixedToolset, WrapperToolset

from sursis.domain.errors import ToolDeclarationError
from sursis.domain.tools import Approval, Category, Executor, PendingKind, ToolSpec
from sursis.infra.agents.compat import call_deferred
from sursis.infra.agents.mcp_connections import McpConnection, McpServer
from sursis.infra.agents.observed import REVIEW
from sursis.infra.agents.run_deps import RunDeps, run_deps
from sursis.infra.faults import crash_point

if TYPE_CHECKING:
    from sursis.infra.agents.adopted import ToolOptions

log = structlog.get_logger("sursis.mcp")

DISPATCHED = "mcp.dispatched"
"""Audit action written, and committed, before a call of a tool that is not `read` is sent."""
OUTCOME_UNKNOWN = "outcome_unknown"
_AUDIT_PAGE = 200


def _mcp_toolset_class() -> type | None:
    """pydantic-ai's `MCPToolset`, if an agent made one: the MCP client (with its OAuth and crypto
    libraries) is loaded only by a process whose agents have an MCP server."""
    module = sys.modules.get("pydantic_ai.mcp")
    toolset: type | None = getattr(module, "MCPToolset", None) if module is not None else None
    return toolset


def schema_digest(description: str | None, input_schema: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of what the model is told about a tool."""
    canonical = json.dumps(
        {"description": description or "", "input_schema": input_schema},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        default=str,
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def read_only(annotations: Mapping[str, Any] | None) -> bool:
    return bool((annotations or {}).get("readOnlyHint"))


def mcp_tool_spec(
    name: str,
    server: str,
    description: str | None,
    input_schema: Mapping[str, Any],
    annotations: Mapping[str, Any] | None,
    options: ToolOptions | None = None,
) -> ToolSpec:
    """The contract of one MCP tool: `read` when the server says it only reads, else `mutate`;
    `ToolOptions` (category, approval, effect, timeout) override."""
    category = (
        Category(options.category)
        if options is not None and options.category
        else (Category.READ if read_only(annotations) else Category.MUTATE)
    )
    approval = Approval(options.approval) if options is not None and options.approval else None
    timeout = options.timeout if options is not None else None
    return ToolSpec(
        name,
        executor=Executor.SERVER,
        category=category,
        approval=approval,
        effect=options.effect if options is not None else None,
        timeout=timedelta(seconds=timeout) if isinstance(timeout, int | float) else timeout,
        server=server,
        schema_digest=schema_digest(description, input_schema),
    )


@dataclass(frozen=True, slots=True)
class McpTool:
    """One tool of an MCP server as the catalog lists it."""

    spec: ToolSpec
    description: str | None
    input_schema: Mapping[str, Any]
    annotations: Mapping[str, Any] | None


def mcp_servers(toolsets: Iterable[AbstractToolset[Any]], prefix: str = "") -> list[McpServer]:
    """The MCP toolsets among an agent's toolsets, looking through combined and wrapping toolsets."""
    found: list[McpServer] = []
    mcp_toolset = _mcp_toolset_class()
    for toolset in toolsets:
        if mcp_toolset is not None and isinstance(toolset, mcp_toolset):
            found.append(McpServer(toolset.id or toolset.label, toolset, prefix))
        elif isinstance(toolset, PrefixedToolset):
            found += mcp_servers([toolset.wrapped], f"{prefix}{toolset.prefix}_")
        elif isinstance(toolset, WrapperToolset):
            found += mcp_servers([toolset.wrapped], prefix)
        elif isinstance(toolset, CombinedToolset):
            found += mcp_servers(toolset.toolsets, prefix)
    return found


@dataclass(slots=True, eq=False)
class McpTools:
    """The MCP servers of one adopted agent, the options given for their tools and what they offer
    (compared, and hashed, by identity: it holds the process's connections)."""

    agent: str
    servers: Sequence[McpServer]
    options: Mapping[str, ToolOptions] = field(default_factory=dict)
    _tools: dict[str, McpTool] = field(default_factory=dict)
    _connections: dict[str, McpConnection] = field(default_factory=dict)
    _asked: set[str] = field(default_factory=set)
    """Tools a server described as not only reading, in this process."""
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

    def spec_for(self, tool_def: ToolDefinition) -> ToolSpec | None:
        """The spec of a tool the wrapper is about to call, or None when it is not an MCP tool.

        pydantic-ai's definition of an MCP tool carries the server's annotations in its metadata;
        the spec is built from what the model was told, so a tool changed since it was listed gets
        its new digest."""
        metadata = tool_def.metadata
        if not isinstance(metadata, Mapping) or "annotations" not in metadata:
            return None
        known = self._tools.get(tool_def.name)
        server = known.spec.server if known is not None and known.spec.server else None
        server = server or tool_def.toolset_id or self._sole_server() or "mcp"
        tool = self._describe(
            tool_def.name,
            server,
            tool_def.description,
            tool_def.parameters_json_schema,
            metadata["annotations"],
        )
        if known != tool:
            self._tools[tool_def.name] = tool
        return tool.spec

    def _sole_server(self) -> str | None:
        return self.servers[0].name if len(self.servers) == 1 else None

    def _describe(
        self,
        name: str,
        server: str,
        description: str | None,
        input_schema: Mapping[str, Any],
        annotations: Mapping[str, Any] | None,
    ) -> McpTool:
        claimed = annotations
        if not read_only(annotations):
            self._asked.add(name)
        elif name in self._asked:
            # A server's annotations are its claims: a tool it described as changing things stays
            # asked in this process, even if the server now says it only reads.
            log.warning("mcp.read_only_claim_ignored", agent=self.agent, server=server, tool_name=name)
            claimed = {**(annotations or {}), "readOnlyHint": False}
        spec = mcp_tool_spec(name, server, description, input_schema, claimed, self.options.get(name))
        return McpTool(spec, description, dict(input_schema), dict(annotations) if annotations else None)

    async def connect(self) -> None:
        """Connect every server not connected yet and every one that stopped answering, then list
        their tools. A server that cannot be reached is logged; the segment then meets the error."""
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            for server in self.servers:
                if getattr(server.toolset, "_resolves_per_run", False):
                    continue  # its `auth` or `headers` depend on the run: each run opens its own session
                connection = self._connections.get(server.name)
                try:
                    if connection is not None and connection.open and await connection.alive():
                        continue
                    if connection is not None:
                        await connection.close()
                        log.info("mcp.reconnecting", server=server.name, agent=self.agent)
                    connection = self._connections[server.name] = McpConnection(server)
                    await connection.connect()
                    await self._list(server)
                except Exception as exc:
                    log.warning("mcp.unavailable", server=server.name, agent=self.agent, error=str(exc)[:300])

    async def _list(self, server: McpServer) -> None:
        listed = await server.toolset.list_tools()
        for tool in listed:
            annotations = tool.annotations.model_dump(by_alias=True) if tool.annotations else None
            name = f"{server.prefix}{tool.name}"
            self._tools[name] = self._describe(
                name, server.name, tool.description, tool.input_schema, annotations
            )
        unknown = sorted(set(self.options) - set(self._tools))
        if unknown:
            log.warning("mcp.options_for_unknown_tools", agent=self.agent, tools=unknown)
        log.info("mcp.connected", server=server.name, agent=self.agent, tools=len(listed))

    async def close(self) -> None:
        for connection in self._connections.values():
            await connection.close()
        self._connections.clear()

    def guarded(
        self, ctx: RunContext[Any], spec: ToolSpec, call: ToolCallPart, handler: WrapToolExecuteHandler
    ) -> WrapToolExecuteHandler:
        """The handler of an MCP call, marked as dispatched before it is sent unless the tool is `read`;
        a call marked before (a segment died after sending it) is a pending call for a person."""
        if spec.category is Category.READ:
            return handler

        async def send(args: dict[str, Any]) -> Any:
            deps = run_deps(ctx)
            if await _dispatched_before(deps, call.tool_call_id):
                log.warning("mcp.outcome_unknown", tool_name=spec.name, tool_call_id=call.tool_call_id)
                raise outcome_unknown(spec)
            await _mark_dispatched(deps, spec, call)
            crash_point(f"mcp_dispatched:{spec.name}")
            return await handler(args)

        return send


def outcome_unknown(spec: ToolSpec) -> CallDeferred:
    """A person's answer stands for the result of a call the server may or may not have received."""
    review = {
        OUTCOME_UNKNOWN: (
            f"The service stopped after sending this call to the MCP server {spec.server!r} and before "
            "its result was recorded: it may or may not have taken effect. It is not sent again. Check, "
            "then answer with what the agent should be told, or decline."
        )
    }
    return call_deferred({"kind": PendingKind.ELICITATION.value, REVIEW: review}, "question")


async def _dispatched_before(deps: RunDeps, tool_call_id: str) -> bool:
    async with deps.uow.reader() as uow:
        after_id: int | None = None
        while True:
            rows = await uow.audit.search(
                workspace=deps.workspace,
                conversation_id=deps.conversation_id,
                correlation_id=None,
                actions=(DISPATCHED,),
                since=None,
                after_id=after_id,
                limit=_AUDIT_PAGE,
                newest_first=True,
            )
            if any(row.details.get("tool_call_id") == tool_call_id for row in rows):
                return True
            if len(rows) < _AUDIT_PAGE:
                return False
            after_id = rows[-1].id


async def _mark_dispatched(deps: RunDeps, spec: ToolSpec, call: ToolCallPart) -> None:
    details = {
        "tool_call_id": call.tool_call_id,
        "tool_name": spec.name,
        "server": spec.server,
        "schema_digest": spec.schema_digest,
    }
    async with deps.uow() as uow:
        await uow.audit.append(
            deps.audit_entry(DISPATCHED, f"agent:{deps.agent_name}", details), deps.clock()
        )
        await uow.commit()
