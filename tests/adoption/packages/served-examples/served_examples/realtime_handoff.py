"""`pydantic_ai_examples.realtime_handoff`: its text agent (`triage_agent`, a `SupportTicket` output),
which the example feeds the history of a realtime voice call; here a conversation's message. The
realtime half needs OpenAI's realtime API and is not served. The agent has no tool: the team serving
it adds one that reads the caller's open tickets, gated."""

from __future__ import annotations

from pydantic_ai_examples import realtime_handoff as example

from sursis import ToolOptions, adopt

OPEN_TICKETS = {"laptop": ["T-12: battery replaced in March"]}


@example.triage_agent.tool_plain
def open_tickets(device: str) -> list[str]:
    """The caller's earlier tickets about a device."""
    return OPEN_TICKETS.get(device.lower(), [])


AGENT = adopt(
    example.triage_agent,
    name="realtime-handoff",
    model="scripted",
    tools={
        "open_tickets": ToolOptions(
            approval="requires_approval", idempotent=True, effect="Read the tickets about the {device}"
        )
    },
)
