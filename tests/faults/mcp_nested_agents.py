"""Adopted agents the fault tests serve (`SURSIS_AGENTS=tests.faults.mcp_nested_agents:AGENTS`).

`desk` has the desk MCP server over stdio (what it receives goes to `$DESK_CALLS`). `concierge` asks
`billing` through `run_agent`, and the built-in `customer` supervisor may consult it too; billing's `refund` is declared `requires_approval=True` and its effect
is a file named by the tool call id in `$ADOPTED_EFFECTS_DIR`, created once (the call id is the
idempotency key, so it is declared idempotent); every dispatch also appends the id to `attempts.log`.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from fastmcp.client.transports import StdioTransport
from pydantic_ai import Agent, RunContext
from pydantic_ai.mcp import MCPToolset

from sursis import ToolOptions, adopt, run_agent

SERVER = Path(__file__).parents[1] / "agents" / "mcp" / "desk_server.py"

desk = Agent(
    name="desk",
    instructions="Help with support tickets.",
    toolsets=[
        MCPToolset(
            StdioTransport(
                sys.executable, [str(SERVER)], env={"DESK_CALLS": os.environ.get("DESK_CALLS", "")}
            ),
            id="desk",
        )
    ],
)

billing = Agent(name="billing", description="Refunds and invoices.")


@billing.tool(requires_approval=True)
def refund(ctx: RunContext[Any], order_id: str) -> str:
    """Refund an order."""
    directory = Path(os.environ["ADOPTED_EFFECTS_DIR"])
    call_id = ctx.tool_call_id or ""
    with (directory / "attempts.log").open("a") as attempts:
        attempts.write(call_id + "\n")
    try:
        with (directory / f"refunded-{call_id}").open("x") as effect:
            effect.write(order_id)
    except FileExistsError:
        pass
    return f"refunded {order_id}"


concierge = Agent(name="concierge", instructions="Route requests to billing.")


@concierge.tool
async def ask_billing(ctx: RunContext[Any], request: str) -> str:
    """Ask the billing agent to handle a request."""
    output: str = await run_agent(ctx, billing, request)
    return output


AGENTS = [
    adopt(desk),
    adopt(concierge),
    adopt(
        billing,
        conversational=False,
        supervisor="customer",
        tools={"refund": ToolOptions(idempotent=True)},
    ),
]
