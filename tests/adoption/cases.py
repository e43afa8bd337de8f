"""The adopted-agent cases: one per package under `packages/` (see `harness.py` to add one)."""

from __future__ import annotations

import json

from tests.adoption.harness import AdoptionCase
from tests.fakes.model_servers import call_then_answer

ORDERS_SCRIPT = [
    [{"tool": "lookup_order", "args": {"order_id": "A1001"}}],
    [{"tool": "refund_order", "args": {"order_id": "A1001", "amount": 15}}],
    "Refunded.",
]

CASES = [
    # (1) Its own deps: a dataclass with an httpx client to the orders API, from an async context
    # manager; the service's scripted model drives it.
    AdoptionCase(
        package="orders-desk",
        agents="orders_desk.agents:AGENT",
        agent="orders-desk",
        gated_tool="refund_order",
        effect="refunds",
        message=f"A1001 came late\nSCRIPT: {json.dumps(ORDERS_SCRIPT)}",
        output="Refunded.",
    ),
    # (3) A FunctionModel without a stream function.
    AdoptionCase(
        package="billing-desk",
        agents="billing_desk.agents:billing",
        agent="billing",
        gated_tool="cancel_subscription",
        effect="cancellations",
        message="Please cancel my subscription.",
        output="Your subscription S-42 is cancelled.",
    ),
    # (4) An `anthropic:` model, its real client library against the fake Anthropic server.
    AdoptionCase(
        package="claude-desk",
        agents="claude_desk.agents:helpdesk",
        agent="helpdesk",
        gated_tool="close_ticket",
        effect="closed-tickets",
        message="Ticket T-9 is solved, thanks.",
        output="Ticket T-9 is closed.",
        env={"ANTHROPIC_BASE_URL": "{model_url}", "ANTHROPIC_API_KEY": "sk-ant-fake"},
        model_script=call_then_answer("close_ticket", {"ticket_id": "T-9"}, "Ticket T-9 is closed."),
        model_name="claude-sonnet-4-0",
    ),
]
