"""Attack: a rule asking `{"groups": [], "quorum": 2}` was stored, and the requester's one click
approved the call. A route whose quorum cannot be reached is refused at PUT (422 `invalid_policy`,
the rule's error of type `unreachable_quorum`), and
on a call any operator decides, the key that caused it cannot approve it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from sursis.domain.access import Role
from tests.attacks.policy_attacks import Shop, open_shop, problem, refunds
from tests.conftest import KeyMaker

EMPTY_QUORUM_2 = {
    "id": "refunds",
    "effect": "ask",
    "tools": ["refund"],
    "route": {"groups": [], "quorum": 2},
}


@pytest.fixture
async def shop(seeded: str, keys: KeyMaker) -> AsyncIterator[Shop]:
    async with open_shop(seeded, keys) as opened:
        yield opened


async def test_a_quorum_no_group_can_reach_is_refused_at_put(shop: Shop) -> None:
    refused = problem(await shop.put_policy(EMPTY_QUORUM_2), 422, "invalid_policy")
    assert refused["errors"][0]["loc"] == ["rules", "0", "route", "quorum"]
    assert refused["errors"][0]["type"] == "unreachable_quorum"
    assert (await shop.http.get("/v1/policies", headers=shop.headers["admin"])).json()["version"] is None
    simulated = await shop.http.post(
        "/v1/policies/simulate",
        json={"rules": [EMPTY_QUORUM_2], "since": "2026-01-01T00:00:00Z"},
        headers=shop.headers["admin"],
    )
    assert problem(simulated, 422, "invalid_policy")["errors"][0]["type"] == "unreachable_quorum"


async def test_the_requester_cannot_approve_a_call_any_operator_decides(shop: Shop) -> None:
    await shop.key("rex", Role.OPERATOR)
    await shop.key("ann", Role.OPERATOR)
    rule = {"id": "refunds", "effect": "ask", "tools": ["refund"], "route": {"groups": [], "quorum": 1}}
    assert (await shop.put_policy(rule)).status_code == 200

    run = await shop.ask("rex", order_id="A1", amount=900)
    [pending] = run["pending"]
    assert pending["requested_by"] == shop.ids["rex"]
    problem(await shop.resolve("rex", pending["correlation_id"]), 403, "self_approval")
    assert refunds() == []
    approved = await shop.resolve("ann", pending["correlation_id"])
    assert approved.status_code == 200 and approved.json()["status"] == "approved", approved.text
    await shop.run(run["id"])
    assert refunds() == [{"order_id": "A1", "amount": 900}]
