"""A support desk as its authors wrote it: its HTTP client and the current customer live in its own
deps (a dataclass), opened for each run by a factory and closed after it."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
from pydantic_ai import Agent, RunContext

from sursis import RunInfo, ToolOptions, adopt, run_deps


@dataclass
class OrdersDeps:
    http: httpx.AsyncClient
    customer: str


desk = Agent(name="orders-desk", deps_type=OrdersDeps, instructions="Help customers with their orders.")


@desk.tool
async def lookup_order(ctx: RunContext[OrdersDeps], order_id: str) -> dict[str, Any]:
    """Look an order up."""
    answer = await ctx.deps.http.get(f"/orders/{order_id}")
    answer.raise_for_status()
    return dict(answer.json())


@desk.tool(requires_approval=True)
async def refund_order(ctx: RunContext[OrdersDeps], order_id: str, amount: int) -> dict[str, Any]:
    """Refund part of an order."""
    # The call id is the idempotency key: a call dispatched again after a crash is applied once.
    key = f"{run_deps(ctx).conversation_id}:{ctx.tool_call_id}"
    answer = await ctx.deps.http.post(
        "/refunds",
        json={"order_id": order_id, "amount": amount, "customer": ctx.deps.customer},
        headers={"Idempotency-Key": key},
    )
    answer.raise_for_status()
    return dict(answer.json())


@asynccontextmanager
async def orders_deps(info: RunInfo) -> AsyncIterator[OrdersDeps]:
    async with httpx.AsyncClient(base_url=os.environ["ORDERS_API_URL"], timeout=10) as http:
        yield OrdersDeps(http=http, customer=f"{info.workspace}:{info.key_id}")


AGENT = adopt(
    desk,
    deps=orders_deps,
    tools={"refund_order": ToolOptions(effect="Refund {amount} on order {order_id}", idempotent=True)},
)
