"""Attack: the requester was the conversation's owner, not the key that caused the call: an
operator posted into a user's conversation, then voted on the call it caused, and the vote counted.
The key that posted the message is recorded on the pending call; its vote never counts unless the
rule allows self-approval, and then it is audited as one."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from sursis.domain.access import Role
from tests.attacks.policy_attacks import Shop, open_shop, problem, refunds
from tests.conftest import KeyMaker

FINANCE_2 = {
    "id": "finance-refunds",
    "effect": "ask",
    "tools": ["refund"],
    "route": {"groups": ["finance"], "quorum": 2},
}


@pytest.fixture
async def shop(seeded: str, keys: KeyMaker) -> AsyncIterator[Shop]:
    async with open_shop(seeded, keys) as opened:
        yield opened


async def test_an_operator_posting_into_a_users_conversation_cannot_vote_on_its_call(shop: Shop) -> None:
    await shop.key("uma", Role.USER)
    for name in ("rex", "ann", "bob"):
        await shop.key(name, Role.OPERATOR)
    await shop.group("finance", "rex", "ann", "bob")
    assert (await shop.put_policy(FINANCE_2)).status_code == 200

    users = await shop.conversation("uma")
    run = await shop.ask("rex", conversation=users, order_id="A1", amount=900)
    [pending] = run["pending"]
    cid = pending["correlation_id"]
    assert pending["requested_by"] == shop.ids["rex"]

    problem(await shop.resolve("rex", cid), 403, "self_approval")
    shown = (await shop.http.get(f"/v1/pending/{cid}", headers=shop.headers["rex"])).json()
    assert shown["can_decide"] is False and shown["votes"] == []
    first = (await shop.resolve("ann", cid)).json()
    assert (first["status"], first["still_needed"]) == ("awaiting", 1)
    assert refunds() == []
    second = (await shop.resolve("bob", cid)).json()
    assert second["status"] == "approved"
    await shop.run(run["id"])
    assert refunds() == [{"order_id": "A1", "amount": 900}]


async def test_a_rule_that_allows_self_approval_counts_it_and_audits_it(shop: Shop) -> None:
    for name in ("rex", "ann"):
        await shop.key(name, Role.OPERATOR)
    await shop.group("finance", "rex", "ann")
    allowed = {**FINANCE_2, "allow_self_approval": True}
    assert (await shop.put_policy(allowed)).status_code == 200

    run = await shop.ask("rex", order_id="A2", amount=900)
    [pending] = run["pending"]
    cid = pending["correlation_id"]
    assert pending["policy"]["allow_self_approval"] is True
    mine = (await shop.resolve("rex", cid)).json()
    assert (mine["status"], mine["still_needed"]) == ("awaiting", 1)
    assert (await shop.resolve("ann", cid)).json()["status"] == "approved"
    audit = (await shop.http.get(f"/v1/audit?correlation_id={cid}", headers=shop.headers["admin"])).json()
    votes = [e for e in audit["items"] if e["action"] == "pending.vote"]
    assert [(e["actor"], e["details"].get("self_approval")) for e in votes] == [
        (shop.ids["rex"], True),
        (shop.ids["ann"], None),
    ]
