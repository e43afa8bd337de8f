"""Attack: a `deny` rule whose condition errors for the model's arguments (an amount that overflows
`amount * 2`) became an ask of any operator, the requester included. A condition that cannot be
evaluated resolves to the strictest effect its rule could have had: an erroring deny denies, an
erroring ask keeps its own route."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from sursis.domain.access import Role
from tests.attacks.policy_attacks import Shop, open_shop, refunds
from tests.conftest import KeyMaker

OVERFLOW = 9223372036854775000
DENY_BIG = {
    "id": "no-huge-refunds",
    "effect": "deny",
    "tools": ["refund"],
    "when": "context.arguments.amount * 2 > 20000",
    "reason": "refunds over 10000 are not made by the agent",
}


@pytest.fixture
async def shop(seeded: str, keys: KeyMaker) -> AsyncIterator[Shop]:
    async with open_shop(seeded, keys) as opened:
        yield opened


async def test_an_erroring_deny_denies_and_nothing_waits_for_a_click(shop: Shop) -> None:
    await shop.key("rex", Role.OPERATOR)
    stored = await shop.put_policy(DENY_BIG, {"id": "refunds", "effect": "allow", "tools": ["refund"]})
    assert stored.status_code == 200, stored.text

    run = await shop.ask("rex", order_id="A1", amount=OVERFLOW)
    assert run["status"] == "completed", run
    assert run["pending"] == []
    assert refunds() == []
    calls = (await shop.http.get(f"/v1/runs/{run['id']}/tool-calls", headers=shop.headers["rex"])).json()
    [refund] = [c for c in calls if c["tool_name"] == "refund"]
    assert refund["policy"]["effect"] == "deny"
    assert refund["policy"]["rule"] == "no-huge-refunds"
    assert "condition_error" in refund["policy"]["flags"]
    pending = (await shop.http.get("/v1/pending?status=awaiting", headers=shop.headers["admin"])).json()
    assert pending["items"] == []


async def test_an_erroring_ask_keeps_its_route(shop: Shop) -> None:
    for name in ("rex", "ann", "bob"):
        await shop.key(name, Role.OPERATOR)
    await shop.group("finance", "ann", "bob", "rex")
    finance = {
        "id": "big-refunds",
        "effect": "ask",
        "tools": ["refund"],
        "when": "context.arguments.amount * 2 > 20000",
        "route": {"groups": ["finance"], "quorum": 2},
    }
    stored = await shop.put_policy(finance, {"id": "refunds", "effect": "allow", "tools": ["refund"]})
    assert stored.status_code == 200, stored.text

    run = await shop.ask("rex", order_id="A2", amount=OVERFLOW)
    [pending] = run["pending"]
    assert pending["policy"]["rule"] == "big-refunds"
    assert pending["policy"]["route"]["groups"] == ["finance"]
    assert pending["policy"]["route"]["quorum"] == 2
    assert "condition_error" in pending["policy"]["flags"]
    # Not one click of any operator: the requester is refused, one approver is not enough.
    mine = await shop.resolve("rex", pending["correlation_id"])
    assert mine.status_code == 403, mine.text
    first = await shop.resolve("ann", pending["correlation_id"])
    assert first.status_code == 200 and first.json()["status"] == "awaiting", first.text
    assert refunds() == []
