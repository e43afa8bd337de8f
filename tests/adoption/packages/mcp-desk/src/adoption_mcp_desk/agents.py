"""The agent: plain pydantic-ai, its tools from the MCP server started over stdio."""

from __future__ import annotations

import os
import sys

from fastmcp.client.transports import StdioTransport
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset

# A stdio server gets the MCP SDK's minimal environment plus what `env` names: only what it needs.
server_env = {"DESK_CALLS": os.environ.get("DESK_CALLS", "")}
desk_server = MCPToolset(
    StdioTransport(sys.executable, ["-m", "adoption_mcp_desk.server"], env=server_env), id="desk"
)

desk = Agent(name="desk", instructions="Help with support tickets.", toolsets=[desk_server])

AGENTS = [desk]
