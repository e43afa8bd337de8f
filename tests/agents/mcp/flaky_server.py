"""An MCP server (the `mcp` package) that fails the ways servers fail in production, for the tests.

`FLAKY_MODE=die_at_start`: the process exits before answering anything. Otherwise it serves a
read-only `balance` and a `charge` that records the charge (the effect lands) and then, with
`FLAKY_MODE=die_mid_call`, exits before answering. Every call it receives is appended to the file
named by `FLAKY_CALLS`.
"""

from __future__ import annotations

import json
import os
import sys

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

MODE = os.environ.get("FLAKY_MODE", "")
if MODE == "die_at_start":
    sys.exit(3)

flaky = MCPServer("flaky")


def _received(tool: str, **args: object) -> None:
    path = os.environ.get("FLAKY_CALLS")
    if path:
        with open(path, "a", encoding="utf-8") as calls:
            calls.write(json.dumps({"tool": tool, "args": args, "pid": os.getpid()}) + "\n")


@flaky.tool(annotations=ToolAnnotations(read_only_hint=True))
def balance(account: str) -> str:
    """The balance of an account."""
    _received("balance", account=account)
    if MODE == "die_mid_call":
        os._exit(4)
    return f"{account}: 100 EUR"


@flaky.tool(annotations=ToolAnnotations(destructive_hint=True))
def charge(account: str, amount: int) -> str:
    """Charge an account."""
    _received("charge", account=account, amount=amount)
    if MODE == "die_mid_call":
        os._exit(4)
    return f"charged {amount} to {account}"


if __name__ == "__main__":
    flaky.run("stdio")
