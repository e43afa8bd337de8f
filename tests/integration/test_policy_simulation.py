"""Simulation: a period's recorded calls replayed against a proposed policy, over seeded history."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from sursis import Service
from sursis.domain.policy.policies import InvalidPolicy
from sursis.testing import ScriptedModel, expect_pending, resolve_and_settle
from tests.integration.policy_kit import put_policy, rule, shop_agent


async def seed(svc: Service) -> None:
    """Two reads that ran, a small refund a rule allowed, and a big refund an operator approved."""
    await put_policy(svc, rule("small", "allow", "context.arguments.amount <= 100", ("refund",)))
    conversation = await svc.start_conversation("shop")
    await svc.send(conversation.id, "go")
    [big] = await expect_pending(svc, tool_name="refund")
    await resolve_and_settle(svc, big, "approve")


async def test_a_simulation_counts_what_would_change(database_url: str) -> None:
    model = ScriptedModel().calls(
        ("lookup_order", {"order_id": "1"}),
        ("lookup_order", {"order_id": "2"}),
        ("refund", {"order_id": "1", "amount": 40}),
        ("refund", {"order_id": "2", "amount": 900}),
    )
    model.text("done")
    async with Service.open(database_url, agents=[shop_agent()], model=model.model) as svc:
        since = datetime.now(UTC) - timedelta(minutes=5)
        await seed(svc)
        simulation = svc.container.policy_simulation
        proposed = [
            rule("big", "deny", "context.arguments.amount > 500", ("refund",)),
            rule("reads", "ask", tools=("lookup_order",)),
        ]
        report = await simulation.simulate(svc.principal, None, proposed, since, datetime.now(UTC))
        out = report.to_json()
        assert out["calls"] == 4
        assert out["current"] == {"allow": 3, "ask": 1}
        # The small refund (its arguments read from the conversation's log) is asked by the
        # tool's default now that no rule allows it; the big one is denied; the reads are asked.
        assert out["proposed"] == {"ask": 3, "deny": 1}
        assert out["changes"] == {"allow->ask": 3, "ask->deny": 1}
        assert out["arguments_unknown"] == 0
        examples = {(e["tool_name"], e["before"], e["after"], e["rule"]) for e in out["examples"]}
        assert ("refund", "ask", "deny", "big") in examples
        assert ("lookup_order", "allow", "ask", "reads") in examples
        denied = next(e for e in out["examples"] if e["after"] == "deny")
        assert denied["arguments_known"] is True

        # The current policy replayed changes nothing it decided itself; the period is respected.
        same = await simulation.simulate(
            svc.principal,
            None,
            [rule("small", "allow", "context.arguments.amount <= 100", ("refund",))],
            since,
            datetime.now(UTC),
        )
        assert same.to_json()["changes"] == {}
        empty = await simulation.simulate(svc.principal, None, proposed, since - timedelta(days=2), since)
        assert empty.calls == 0

        with pytest.raises(InvalidPolicy):
            await simulation.simulate(
                svc.principal, None, [rule("x", "ask", "nope(")], since, datetime.now(UTC)
            )
