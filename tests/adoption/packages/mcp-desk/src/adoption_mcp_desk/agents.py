"""The agent: plain pydantic-ai, its tools from the MCP server started over stdio."""

from __future__ import annotations

import sys

from fastmcp.client.transports import StdioTransport
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset

desk_server = MCPToolset(StdioTransport(sys.executable, ["-m", "adoption_mcp_desk.server"]), id="desk")

desk = Agent(name="desk", instructions="Help with support tickets.", toolsets=[desk_server])

AGENTS = [desk]
