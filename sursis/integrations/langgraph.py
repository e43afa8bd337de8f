"""LangGraph, governed by Sursis: a node asks before it acts with
`interrupt(approval_request(tool_name, args))`, and the code that drives the graph answers the
graph's interrupts from Sursis's decisions with `resume_from_sursis`, then resumes with the
`Command` it returns.

    answer = interrupt(approval_request("wire_money", {"amount": 900}))   # in the node
    if answer["approved"]: ...run with answer["args"], then report the outcome...

    result = await graph.ainvoke(inputs, config)                          # in the driver
    command = await resume_from_sursis(client, result["__interrupt__"], thread_id=thread_id)
    result = await graph.ainvoke(command, config)

Each interrupt is filed under the thread id and the interrupt's id: a driver that died while it
waited and runs again files the same requests and gets the same decisions, and an approval is
consumed once. Interrupts that are not approval requests are left alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langgraph.types import Command, Interrupt

from sursis.integrations.approvals_http import ApprovalsClient

__all__ = ["ApprovalsClient", "approval_request", "resume_from_sursis"]

KEY = "sursis_approval"


def approval_request(tool_name: str, args: dict[str, Any]) -> dict[str, Any]:
    """The value a node interrupts with to ask Sursis whether `tool_name` may run with `args`."""
    return {KEY: {"tool_name": tool_name, "args": args}}


async def resume_from_sursis(
    client: ApprovalsClient, interrupts: Sequence[Interrupt], *, thread_id: str
) -> Command[Any] | None:
    """The `Command` that resumes the graph with Sursis's answer to each approval request among
    `interrupts` (None when there is none): `{"approved", "message", "args", "answered_by",
    "correlation_id"}`, keyed by interrupt id. A node that ran an approved call reports its outcome
    with `client.report(answer["correlation_id"], "ran" | "failed")`."""
    answers: dict[str, Any] = {}
    async with client.http() as http:
        for pending in interrupts:
            value = pending.value
            request = value.get(KEY) if isinstance(value, dict) else None
            if not isinstance(request, dict):
                continue
            verdict = await client.decide(
                http,
                request["tool_name"],
                request["args"],
                idempotency_key=f"{thread_id}:{pending.id}",
                conversation=thread_id,
            )
            answers[pending.id] = {
                "approved": verdict.approved,
                "message": verdict.message,
                "args": verdict.args,
                "answered_by": list(verdict.deciders),
                "correlation_id": verdict.correlation_id,
            }
    return Command(resume=answers) if answers else None
