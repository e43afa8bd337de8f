"""A call the policy point asks about keeps the decision that made it wait: the deferral's `policy`
metadata is stored with the pending call (route, quorum, escalations, rule, version) and read back
whole, on SQLite and PostgreSQL through the migrations."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from pydantic_ai import Agent, ApprovalRequired, RunContext

from sursis import Service
from sursis.domain.policy_decisions import (
    ApprovalRoute,
    Escalation,
    PolicyDecision,
    PolicyEffect,
    TimeoutOutcome,
)
from sursis.infra.agents.observed import POLICY
from sursis.testing import ScriptedModel, expect_pending

DECISION = PolicyDecision(
    effect=PolicyEffect.ASK,
    policy_version=3,
    rule="refunds-over-500",
    reason="refunds over 500 need finance",
    route=ApprovalRoute(
        groups=("finance",),
        quorum=2,
        remind_after=timedelta(minutes=10),
        escalations=(Escalation(after=timedelta(minutes=30), to=("group:on-call", "slack:C0FIN")),),
        timeout=timedelta(hours=2),
        on_timeout=TimeoutOutcome.DENY,
    ),
)


def gated_agent() -> Agent[None, str]:
    agent: Agent[None, str] = Agent(name="payments")

    @agent.tool
    def refund(ctx: RunContext[Any], order_id: str, amount: int) -> str:
        """Refund an order."""
        if not ctx.tool_call_approved:
            raise ApprovalRequired(metadata={"kind": "approval", POLICY: DECISION.to_json()})
        return f"refunded {amount}"

    @agent.tool
    def note(ctx: RunContext[Any], text: str) -> str:
        """Write a note; asks without a policy decision."""
        if not ctx.tool_call_approved:
            raise ApprovalRequired()
        return "noted"

    return agent


def test_a_decision_survives_its_json_form() -> None:
    assert PolicyDecision.from_json(DECISION.to_json()) == DECISION
    allow = PolicyDecision(effect=PolicyEffect.ALLOW)
    assert PolicyDecision.from_json(allow.to_json()) == allow


async def test_the_pending_call_keeps_the_policy_decision_that_asked(database_url: str) -> None:
    model = ScriptedModel().calls(("refund", {"order_id": "A1", "amount": 900}), ("note", {"text": "x"}))
    model.text("done")
    async with Service.open(database_url, agents=[gated_agent()], model=model.model) as svc:
        conversation = await svc.start_conversation("payments")
        await svc.send(conversation.id, "refund A1")
        calls = {c.tool_name: c for c in await expect_pending(svc, count=2)}
        async with svc.container.uow.reader() as uow:
            refund = await uow.pending.get(calls["refund"].correlation_id)
            note = await uow.pending.get(calls["note"].correlation_id)
        assert refund is not None and note is not None
        assert refund.policy == DECISION
        assert note.policy is None
