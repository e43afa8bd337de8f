"""Attack: with the ceiling `ask_above`, a `user` key put `{"level": "ask_above", "condition":
"false"}` and every call ran unasked. A rung is never looser than its ceiling: an `ask_above`
ceiling carries the admin's condition, and the call is asked when the admin's condition or the
user's holds (the user can only add asks)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import sqlalchemy as sa

from sursis.domain.access import Role
from sursis.infra.db import policy_tables as p
from sursis.infra.db.engine import create_engine
from tests.attacks.policy_attacks import Shop, open_shop, problem, refunds
from tests.conftest import KeyMaker


@pytest.fixture
async def shop(seeded: str, keys: KeyMaker) -> AsyncIterator[Shop]:
    async with open_shop(seeded, keys) as opened:
        yield opened


async def test_a_user_condition_only_adds_asks_to_the_ceilings(shop: Shop) -> None:
    user = await shop.key("uma", Role.USER)
    admin = shop.headers["admin"]
    no_condition = await shop.http.put(
        "/v1/ladder", json={"tool": "refund", "ceiling": "ask_above"}, headers=admin
    )
    problem(no_condition, 422, "invalid_policy")
    ceiling = await shop.http.put(
        "/v1/ladder",
        json={
            "tool": "refund",
            "ceiling": "ask_above",
            "ceiling_condition": "context.arguments.amount > 100",
        },
        headers=admin,
    )
    assert ceiling.status_code == 200, ceiling.text
    assert ceiling.json()["ceiling_condition"] == "context.arguments.amount > 100"
    problem(
        await shop.http.put(
            "/v1/ladder", json={"tool": "refund", "ceiling_condition": "false"}, headers=user
        ),
        403,
        "forbidden",
    )

    moved = await shop.http.put(
        "/v1/ladder", json={"tool": "refund", "level": "ask_above", "condition": "false"}, headers=user
    )
    assert moved.status_code == 200, moved.text
    assert moved.json()["ceiling_condition"] == "context.arguments.amount > 100"

    big = await shop.ask("uma", order_id="B1", amount=900)
    [pending] = big["pending"]
    assert pending["policy"]["rule"] == "ladder:refund"
    assert "above_ceiling" in pending["policy"]["flags"]
    small = await shop.ask("uma", order_id="S1", amount=50)
    assert small["status"] == "completed" and small["pending"] == []
    assert refunds() == [{"order_id": "S1", "amount": 50}]

    stricter = await shop.http.put(
        "/v1/ladder",
        json={"tool": "refund", "level": "ask_above", "condition": "context.arguments.amount > 10"},
        headers=user,
    )
    assert stricter.status_code == 200, stricter.text
    added = await shop.ask("uma", order_id="S2", amount=50)
    assert len(added["pending"]) == 1
    assert refunds() == [{"order_id": "S1", "amount": 50}]


async def test_a_ceiling_stored_without_the_admins_condition_asks_every_call(seeded: str, shop: Shop) -> None:
    user = await shop.key("uma", Role.USER)
    engine = create_engine(seeded)
    try:
        async with engine.begin() as conn:
            await conn.execute(
                sa.insert(p.autonomy_ladder).values(workspace="default", tool="refund", ceiling="ask_above")
            )
    finally:
        await engine.dispose()
    moved = await shop.http.put(
        "/v1/ladder", json={"tool": "refund", "level": "ask_above", "condition": "false"}, headers=user
    )
    assert moved.status_code == 200, moved.text
    run = await shop.ask("uma", order_id="A1", amount=5)
    assert len(run["pending"]) == 1, run
    assert refunds() == []
