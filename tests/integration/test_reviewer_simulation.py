"""Simulation knows the reviewer: over recorded calls, a proposed rule with a reviewer reports how many
asks it would have taken and which, with the model named for the simulation (`scripted`), before
anyone turns it on; calls whose proposed rule names no reviewer are not put to a model."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from sursis import Service
from sursis.domain.policy_decisions import ApprovalRoute
from sursis.domain.reviewer import ReviewerSpec
from sursis.testing import ScriptedModel, expect_pending
from tests.integration.policy_kit import rule, shop_agent

NO = json.dumps({"verdict": "no", "reason": "a small refund"})


async def test_the_simulation_counts_what_the_reviewer_would_take(database_url: str) -> None:
    model = ScriptedModel().calls(
        ("refund", {"order_id": "1", "amount": 40}),
        ("refund", {"order_id": "2", "amount": 900}),
        ("deploy", {"service": "api", "env": "prod"}),
    )
    model.text("done")
    async with Service.open(database_url, agents=[shop_agent()], model=model.model) as svc:
        since = datetime.now(UTC) - timedelta(minutes=5)
        conversation = await svc.start_conversation("shop")
        await svc.send(conversation.id, "go")
        for pending in await expect_pending(svc, count=3):
            await svc.resolve(pending.correlation_id, "approve")
        await svc.run_until_idle()
        question = f"Is this refund unusual?\nSCRIPT: {json.dumps([NO])}"
        proposed = [
            rule(
                "refunds",
                "ask",
                tools=("refund",),
                route=ApprovalRoute(reviewer=ReviewerSpec("openai:gpt-4.1-mini", question)),
            ),
            rule("deploys", "ask", tools=("deploy",)),
        ]
        simulation = svc.container.policy_simulation
        report = await simulation.simulate(
            svc.principal, None, proposed, since, datetime.now(UTC), reviewer_model="scripted"
        )
        tally = report.to_json()["reviewer"]
        assert (tally["reviewed"], tally["would_approve"], tally["left_to_people"]) == (2, 2, 0)
        assert tally["verdicts"] == {"no": 2}
        assert {e["tool_name"] for e in tally["examples"]} == {"refund"}  # the deploy has no reviewer
        assert all(e["model"] == "scripted" and e["rule"] == "refunds" for e in tally["examples"])

        capped = await simulation.simulate(
            svc.principal, None, proposed, since, datetime.now(UTC), reviewer_model="scripted", max_reviews=1
        )
        assert (capped.to_json()["reviewer"]["reviewed"], capped.to_json()["reviewer"]["not_reviewed"]) == (
            1,
            1,
        )

        without = await simulation.simulate(svc.principal, None, proposed[1:], since, datetime.now(UTC))
        assert without.to_json()["reviewer"] is None
