"""Attack: a ladder move raced a ceiling change. The move read the tool's row, the admin lowered the
ceiling, and the move wrote the whole row back, restoring the ceiling the admin had just lowered
(1 run in 5). Ladder writes are serialised on the tool's row, and a move that sets no ceiling
never writes the ceiling's columns."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from sursis.domain.access import Role
from tests.attacks.policy_attacks import Shop, open_shop
from tests.conftest import KeyMaker

ROUNDS = 25


@pytest.fixture
async def shop(seeded: str, keys: KeyMaker) -> AsyncIterator[Shop]:
    async with open_shop(seeded, keys) as opened:
        yield opened


async def ladder(shop: Shop, tool: str) -> dict[str, Any]:
    rows = (await shop.http.get("/v1/ladder", headers=shop.headers["admin"])).json()
    return next(r for r in rows if r["tool"] == tool)


async def test_a_users_move_never_restores_a_lowered_ceiling(database_url: str, shop: Shop) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("SQLite runs one writer at a time: the race needs PostgreSQL")
    user = await shop.key("uma", Role.USER)
    admin = shop.headers["admin"]
    ranks = ["ask", "ask_above", "notify", "auto"]
    for round_ in range(ROUNDS):
        tool = "refund" if round_ % 2 == 0 else "deploy"
        up = await shop.http.put("/v1/ladder", json={"tool": tool, "ceiling": "notify"}, headers=admin)
        assert up.status_code == 200, up.text
        start = await shop.http.put("/v1/ladder", json={"tool": tool, "level": "ask"}, headers=user)
        assert start.status_code == 200, start.text

        lowered, moved = await asyncio.gather(
            shop.http.put("/v1/ladder", json={"tool": tool, "ceiling": "ask"}, headers=admin),
            shop.http.put("/v1/ladder", json={"tool": tool, "level": "notify"}, headers=user),
        )
        assert lowered.status_code == 200, lowered.text
        assert moved.status_code in (200, 403), moved.text
        row = await ladder(shop, tool)
        assert row["ceiling"] == "ask", (round_, row)
        assert row["level"] is None or ranks.index(row["level"]) <= ranks.index("ask"), (round_, row)
