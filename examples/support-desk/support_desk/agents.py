"""The support desk's agent: a plain pydantic-ai `Agent`, served by Sursis as it is.

`lookup_order` reads; `refund_order` is declared with `requires_approval=True`, so every call waits
in Sursis' pending-call table until an operator approves it. The orders and the refund ledger are
in memory here, standing in for the shop's own API.
"""

from __future__ import annotations

from typing import Any

from pydantic_ai import Agent, RunContext

from sursis import ToolOptions, adopt

ORDERS: dict[str, dict[str, Any]] = {
    "A1001": {"order_id": "A1001", "customer": "Ada", "total": 120.0, "status": "delivered"},
    "A1002": {"order_id": "A1002", "customer": "Grace", "total": 35.5, "status": "shipped"},
}
REFUNDS: dict[str, dict[str, Any]] = {}
"""Refunds by tool call id: a call dispatched again after a crash refunds once."""

support = Agent(
    name="support",
    description="Answers customers about their orders and refunds them.",
    instructions="You are a support desk. Look the order up before you refund it; never refund more "
    "than its total.",
)


@support.tool_plain
def lookup_order(order_id: str) -> dict[str, Any]:
    """Look an order up by its id.

    Args:
        order_id: The order's id, e.g. A1001.
    """
    order = ORDERS.get(order_id)
    return dict(order) if order else {"order_id": order_id, "found": False}


@support.tool(requires_approval=True)
def refund_order(ctx: RunContext[Any], order_id: str, amount: float, reason: str) -> dict[str, Any]:
    """Refund part or all of an order (an operator approves every refund first).

    Args:
        order_id: The order to refund.
        amount: How much to refund.
        reason: Why, in the customer's words.
    """
    key = ctx.tool_call_id or order_id
    if key not in REFUNDS:
        order = ORDERS.get(order_id)
        if order is None or amount > order["total"]:
            return {"refunded": False, "why": "no such order, or more than its total"}
        REFUNDS[key] = {"refunded": True, "order_id": order_id, "amount": amount}
    return REFUNDS[key]


AGENTS = [
    adopt(
        support,
        tools={
            "refund_order": ToolOptions(
                effect="Refund {amount} on order {order_id} ({reason})", timeout=4 * 3600
            )
        },
    )
]
