"""A helpdesk agent on an Anthropic model (`ANTHROPIC_API_KEY`, and `ANTHROPIC_BASE_URL` for a proxy)."""

from __future__ import annotations

import os

import httpx
from pydantic_ai import Agent, RunContext

helpdesk = Agent(
    "anthropic:claude-sonnet-4-0",
    name="helpdesk",
    instructions="Close the tickets customers say are solved.",
)


@helpdesk.tool(requires_approval=True)
async def close_ticket(ctx: RunContext[None], ticket_id: str) -> dict[str, object]:
    """Close a ticket."""
    async with httpx.AsyncClient(timeout=10) as http:
        answer = await http.post(
            f"{os.environ['ORDERS_API_URL']}/closed-tickets",
            json={"ticket_id": ticket_id},
            headers={"Idempotency-Key": ctx.tool_call_id or ""},
        )
    answer.raise_for_status()
    return dict(answer.json())
