"""A plain pydantic-ai `Agent` the fault tests serve (`SURSIS_AGENTS=tests.faults.adopted_agent:AGENTS`).

`pay_invoice` is declared with `requires_approval=True`; `refund_invoice` gates itself (it raises
`ApprovalRequired` until the call is approved). Its effect is a file named by the tool call
id in `$ADOPTED_EFFECTS_DIR`, created once (the call id is the idempotency key, as a real payment
API's would be), so `pay_invoice` is declared idempotent; every dispatch also appends the id to
`attempts.log`. `wire_money` changes things too but is not idempotent (each dispatch appends a
line to `wires.log`): a call whose worker died while it ran must not run again. `charge_card` is
declared by nobody (no category, no option): it is started at most once too (`charges.log`).
`capable` has the same `wire_money`, brought by a capability; `drifting` has it in a toolset built
for each run.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from pydantic_ai import Agent, ApprovalRequired, RunContext
from pydantic_ai.capabilities import Capability
from pydantic_ai.toolsets import FunctionToolset

from sursis import ToolOptions, adopt

payer = Agent(name="payer", instructions="Pay the invoices you are asked to pay.")


@payer.tool_plain
def find_invoice(invoice_id: str) -> dict[str, Any]:
    """Look an invoice up."""
    return {"invoice_id": invoice_id, "amount": 42}


@payer.tool(requires_approval=True)
def pay_invoice(ctx: RunContext[Any], invoice_id: str) -> dict[str, Any]:
    """Pay an invoice."""
    return _pay(ctx, invoice_id)


@payer.tool
def refund_invoice(ctx: RunContext[Any], invoice_id: str) -> dict[str, Any]:
    """Refund an invoice; a person approves it first."""
    if not ctx.tool_call_approved:
        raise ApprovalRequired()
    return _pay(ctx, invoice_id)


@payer.tool
def wire_money(ctx: RunContext[Any], invoice_id: str) -> dict[str, Any]:
    """Wire the amount of an invoice (no idempotency key: each call wires again)."""
    with (Path(os.environ["ADOPTED_EFFECTS_DIR"]) / "wires.log").open("a") as wires:
        wires.write(f"{ctx.tool_call_id} {invoice_id}\n")
    hold = os.environ.get("WIRE_HOLD")  # a slow bank: it answers once this file exists
    deadline = time.monotonic() + 30
    while hold and not Path(hold).exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return {"wired": invoice_id}


@payer.tool
def charge_card(ctx: RunContext[Any], invoice_id: str) -> dict[str, Any]:
    """Charge the customer's card for an invoice (nobody said what kind of tool this is)."""
    with (Path(os.environ["ADOPTED_EFFECTS_DIR"]) / "charges.log").open("a") as charges:
        charges.write(f"{ctx.tool_call_id} {invoice_id}\n")
    return {"charged": invoice_id}


def _pay(ctx: RunContext[Any], invoice_id: str) -> dict[str, Any]:
    directory = Path(os.environ["ADOPTED_EFFECTS_DIR"])
    call_id = ctx.tool_call_id or ""
    with (directory / "attempts.log").open("a") as attempts:
        attempts.write(call_id + "\n")
    try:
        with (directory / f"paid-{call_id}").open("x") as effect:
            effect.write(invoice_id)
    except FileExistsError:
        pass
    return {"paid": invoice_id}


wires = Capability[Any](id="wires")
"""The same `wire_money`, brought by a capability (`capable`): governed like the agent's own tool."""
wires.tool(wire_money)

capable = Agent(name="capable", instructions="Wire what you are asked to wire.", capabilities=[wires])


def _wires_for_the_run(ctx: RunContext[Any]) -> FunctionToolset[Any]:
    return FunctionToolset([wire_money])


drifting = Agent(
    name="drifting",
    instructions="Wire what you are asked to wire.",
    capabilities=[Capability[Any](toolsets=[_wires_for_the_run])],
)
"""The same `wire_money` again, in a toolset its capability builds for each run: known only at run time."""

AGENTS = [
    adopt(
        payer,
        tools={
            "pay_invoice": ToolOptions(idempotent=True),
            "wire_money": ToolOptions(category="suggest"),
        },
    ),
    adopt(capable, tools={"wire_money": ToolOptions(category="suggest")}),
    adopt(drifting, tools={"wire_money": ToolOptions(category="suggest")}),
]
