"""Attack: a pre-approval skipped the approver route: an operator (the requester included) lifted a
finance quorum-2 ask with its own pre-approval. A pre-approval lifts an ask only where the rule
allows pre-approvals (by default not for a rule naming groups or a quorum above one), and never
one the call's own requester created."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from sursis.domain.access import Role
from tests.attacks.policy_attacks import Shop, open_shop, refunds
from tests.conftest import KeyMaker


@pytest.fixture
async def shop(seeded: str, keys: KeyMaker) -> AsyncIterator[Shop]:
    async with open_shop(seeded, keys) as opened:
        yield opened


async def pre_approve(shop: Shop, by: str) -> None:
    created = await shop.http.post(
        "/v1/authorizations",
        json={"tool_name": "refund", "reason": "month-end refunds"},
        headers=shop.headers[by],
    )
    assert created.status_code == 201, created.text


async def test_a_pre_approval_does_not_lift_a_routed_ask(shop: Shop) -> None:
    for name in ("rex", "ann", "bob"):
        await shop.key(name, Role.OPERATOR)
    await shop.group("finance", "ann", "bob")
    rule = {
        "id": "finance",
        "effect": "ask",
        "tools": ["refund"],
        "route": {"groups": ["finance"], "quorum": 2},
    }
    stored = await shop.put_policy(rule)
    assert stored.status_code == 200 and stored.json()["rules"][0]["allow_preapproval"] is None
    await pre_approve(shop, "rex")
    await pre_approve(shop, "ann")

    run = await shop.ask("rex", order_id="A1", amount=900)
    [pending] = run["pending"]
    assert pending["policy"]["rule"] == "finance"
    assert pending["policy"]["allow_preapproval"] is False
    assert refunds() == []


async def test_the_requesters_own_pre_approval_never_lifts_its_call(shop: Shop) -> None:
    for name in ("rex", "ann"):
        await shop.key(name, Role.OPERATOR)
    rule = {"id": "refunds", "effect": "ask", "tools": ["refund"]}
    assert (await shop.put_policy(rule)).status_code == 200
    await pre_approve(shop, "rex")

    own = await shop.ask("rex", order_id="A2", amount=10)
    assert len(own["pending"]) == 1, own
    assert refunds() == []

    lifted = await shop.ask("ann", order_id="A3", amount=10)
    assert lifted["status"] == "completed" and lifted["pending"] == [], lifted
    assert refunds() == [{"order_id": "A3", "amount": 10}]
