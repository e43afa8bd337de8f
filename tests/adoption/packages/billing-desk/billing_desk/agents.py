"""A billing agent whose model is a plain function (`FunctionModel` with no stream function): it
cancels the subscription it is asked about, then says so."""

from __future__ import annotations

import os

import httpx
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel


def decide(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    last = messages[-1]
    if isinstance(last, ModelRequest) and any(isinstance(p, ToolReturnPart) for p in last.parts):
        return ModelResponse(parts=[TextPart("Your subscription S-42 is cancelled.")])
    return ModelResponse(parts=[ToolCallPart("cancel_subscription", {"subscription_id": "S-42"})])


billing = Agent(FunctionModel(decide), name="billing", instructions="Handle subscriptions.")


@billing.tool(requires_approval=True)
def cancel_subscription(ctx: RunContext[None], subscription_id: str) -> dict[str, object]:
    """Cancel a subscription."""
    answer = httpx.post(
        f"{os.environ['ORDERS_API_URL']}/cancellations",
        json={"subscription_id": subscription_id},
        headers={"Idempotency-Key": ctx.tool_call_id or ""},
        timeout=10,
    )
    answer.raise_for_status()
    return dict(answer.json())
