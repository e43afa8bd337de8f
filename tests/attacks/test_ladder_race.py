"""Attack: a ladder move raced a ceiling change. The move read the tool's row, the admin lowered the
ceiling, and the move wrote the whole row back, restoring the ceiling the admin had just lowered
(1 run in 5 by hand). Ladder writes are serialised on the tool's row, and a move that sets no
ceiling never writes the ceiling's columns.

The race is made certain here: a transaction of the test holds the tool's row while the admin's
lowering and then the user's move arrive; both wait on the row, and the admin's goes first."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from sursis.domain.access import Role
from sursis.infra.db import policy_tables as p
from sursis.infra.db.engine import create_engine
from tests.attacks.policy_attacks import Shop, open_shop
from tests.conftest import KeyMaker

RANKS = ["ask", "ask_above", "notify", "auto"]


@pytest.fixture
async def shop(seeded: str, keys: KeyMaker) -> AsyncIterator[Shop]:
    async with open_shop(seeded, keys) as opened:
        yield opened


async def waiting(conn: AsyncConnection) -> int:
    """Sessions of this database waiting on a lock to read or write the ladder."""
    query = sa.text(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
        "AND datname = current_database() AND query LIKE '%autonomy_ladder%'"
    )
    return int((await conn.execute(query)).scalar_one())


async def until_waiting(conn: AsyncConnection, count: int) -> None:
    for _ in range(400):
        if await waiting(conn) >= count:
            return
        await asyncio.sleep(0.025)
    raise AssertionError(f"{count} sessions never waited on the ladder's row")


async def put_aside(shop: Shop, body: dict[str, Any], headers: dict[str, str]) -> Any:
    """`PUT /v1/ladder` from a thread of its own: the test client blocks its caller's loop until the
    app answers, and the app's answer waits for this test to let the row go."""

    def put() -> Any:
        return asyncio.run(shop.http.put("/v1/ladder", json=body, headers=headers))

    return await asyncio.to_thread(put)


async def test_a_users_move_never_restores_a_lowered_ceiling(database_url: str, shop: Shop) -> None:
    if not database_url.startswith("postgresql"):
        pytest.skip("SQLite runs one writer at a time: the race needs PostgreSQL")
    user = await shop.key("uma", Role.USER)
    admin = shop.headers["admin"]
    up = await shop.http.put("/v1/ladder", json={"tool": "refund", "ceiling": "notify"}, headers=admin)
    assert up.status_code == 200, up.text
    start = await shop.http.put("/v1/ladder", json={"tool": "refund", "level": "ask"}, headers=user)
    assert start.status_code == 200, start.text

    engine = create_engine(database_url)
    try:
        async with engine.connect() as holder, engine.connect() as watcher:
            await watcher.execution_options(isolation_level="AUTOCOMMIT")
            held = await holder.begin()
            ladder = p.autonomy_ladder.c
            await holder.execute(
                sa.select(ladder.tool)
                .where(ladder.workspace == "default", ladder.tool == "refund")
                .with_for_update()
            )
            lowering = asyncio.create_task(put_aside(shop, {"tool": "refund", "ceiling": "ask"}, admin))
            await until_waiting(watcher, 1)
            moving = asyncio.create_task(put_aside(shop, {"tool": "refund", "level": "notify"}, user))
            await until_waiting(watcher, 2)
            await held.rollback()
            lowered, moved = await lowering, await moving
    finally:
        await engine.dispose()

    assert lowered.status_code == 200, lowered.text
    assert moved.status_code == 403 and moved.json()["code"] == "above_ceiling", moved.text
    rows: list[dict[str, Any]] = (await shop.http.get("/v1/ladder", headers=admin)).json()
    row = next(r for r in rows if r["tool"] == "refund")
    assert row["ceiling"] == "ask", row
    assert row["level"] is None or RANKS.index(row["level"]) <= RANKS.index("ask"), row
