"""The billing agent: plain pydantic-ai, a refund that needs an approval.

A refund's effect is a file named by the tool call id in `$REFUNDS_DIR`, created once (the call id is
the idempotency key, as a payment API's would be); each dispatch is appended to `attempts.log`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic_ai import Agent, RunContext

from sursis import adopt

billing = Agent(name="billing", description="Refunds and invoices of the evaluation platform.")


@billing.tool(requires_approval=True)
def refund(ctx: RunContext[Any], invoice_id: str) -> str:
    """Refund an invoice."""
    directory = Path(os.environ["REFUNDS_DIR"])
    call_id = ctx.tool_call_id or ""
    with (directory / "attempts.log").open("a") as attempts:
        attempts.write(call_id + "\n")
    try:
        with (directory / f"refunded-{call_id}").open("x") as effect:
            effect.write(invoice_id)
    except FileExistsError:
        pass
    return f"refunded {invoice_id}"


AGENTS = [adopt(billing, supervisor="customer", conversational=False)]
