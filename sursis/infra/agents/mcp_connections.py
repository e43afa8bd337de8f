"""An agent's MCP servers (`mcp_servers`), and one server's connection, held open by a task of the
process: the MCP client's session must be entered and left by the same task, and a segment's own
enter of the toolset then only counts a user."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import structlog
from pydantic_ai.toolsets import AbstractToolset, CombinedToolset, PrefixedToolset, WrapperToolset

log = structlog.get_logger("sursis.mcp")

PING_SECONDS = 5.0
METHOD_NOT_FOUND = -32601


@dataclass(frozen=True, slots=True)
class McpServer:
    """An MCP toolset of an agent: its name (the toolset's `id`, else its label) and the prefix the
    agent puts before its tools' names."""

    name: str
    toolset: Any  # pydantic_ai.mcp.MCPToolset
    prefix: str = ""


def _mcp_toolset_class() -> type | None:
    """pydantic-ai's `MCPToolset`, if an agent made one: the MCP client (with its OAuth and crypto
    libraries) is loaded only by a process whose agents have an MCP server."""
    module = sys.modules.get("pydantic_ai.mcp")
    toolset: type | None = getattr(module, "MCPToolset", None) if module is not None else None
    return toolset


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


class McpConnection:
    """Holds one MCP toolset entered, in a task of its own: the MCP client's session must be
    entered and left by the same task, and a segment's own enter then only counts a user."""

    def __init__(self, server: McpServer) -> None:
        self.server = server
        self._task: asyncio.Task[None] | None = None
        self._release = asyncio.Event()

    @property
    def open(self) -> bool:
        return self._task is not None and not self._task.done()

    async def connect(self) -> None:
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._release = asyncio.Event()
        self._task = asyncio.create_task(self._hold(ready, self._release), name=f"mcp {self.server.name}")
        await ready

    async def _hold(self, ready: asyncio.Future[None], release: asyncio.Event) -> None:
        toolset = self.server.toolset
        try:
            async with toolset:
                ready.set_result(None)
                await release.wait()
            if not toolset.is_running:
                # A stdio transport keeps its server process alive between sessions unless closed.
                await toolset.client.close()
        except Exception as exc:
            if not ready.done():
                ready.set_exception(exc)
            else:  # a server that died is left here when it is connected again
                log.info("mcp.disconnected", server=self.server.name, error=str(exc)[:200])

    async def alive(self) -> bool:
        """Whether the server answers a ping; one that answers "method not found" answers too."""
        try:
            await asyncio.wait_for(self.server.toolset.client.ping(), PING_SECONDS)
        except Exception as exc:
            if getattr(exc, "code", None) == METHOD_NOT_FOUND:
                return True
            log.warning("mcp.server_lost", server=self.server.name, error=str(exc)[:200])
            return False
        return True

    async def close(self) -> None:
        task = self._task
        self._task = None
        if task is None:
            return
        self._release.set()
        try:
            await asyncio.wait_for(task, PING_SECONDS)
        except (TimeoutError, asyncio.CancelledError):
            task.cancel()
