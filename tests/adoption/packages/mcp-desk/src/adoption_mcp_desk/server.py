"""The desk's MCP server (stdio): a read-only lookup and a destructive delete.

Every call it receives is appended to the file named by `DESK_CALLS`, if set.
"""

from __future__ import annotations

import json
import os

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

desk = MCPServer("desk")


def _received(tool: str, ticket_id: str) -> None:
    path = os.environ.get("DESK_CALLS")
    if path:
        with open(path, "a", encoding="utf-8") as calls:
            calls.write(json.dumps({"tool": tool, "ticket_id": ticket_id}) + "\n")


@desk.tool(annotations=ToolAnnotations(read_only_hint=True))
def lookup_ticket(ticket_id: str) -> str:
    """Look a support ticket up."""
    _received("lookup_ticket", ticket_id)
    return f"ticket {ticket_id}: printer on fire"


@desk.tool(annotations=ToolAnnotations(destructive_hint=True))
def delete_ticket(ticket_id: str) -> str:
    """Delete a support ticket for good."""
    _received("delete_ticket", ticket_id)
    return f"deleted {ticket_id}"


if __name__ == "__main__":
    desk.run("stdio")
