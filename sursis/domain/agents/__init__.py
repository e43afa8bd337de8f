"""The agent side as the domain sees it: the agent catalog, the tool catalog and the process ports that
wake workers and long-polls, and the MCP pins (what an MCP server said about each tool when it was
accepted).

Its modules are imported here; the names they define are imported from the module
that defines them (`sursis.domain.agents.<module>`). See README.md."""

from sursis.domain.agents import (
    agent_ports,
    agents,
    mcp_pins,
)

__all__ = [
    "agent_ports",
    "agents",
    "mcp_pins",
]
