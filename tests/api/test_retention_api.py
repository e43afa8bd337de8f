"""Retention over HTTP: admins only, validated bodies, problem+json codes, and a purged
conversation answering 404 `conversation_purged`."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from litestar.testing import AsyncTestClient

from sursis.domain.clock import utcnow
from sursis.domain.retention.retention import PURGED
from sursis.infra.db import tables as t
from sursis.infra.db.engine import create_engine
from tests.api.http_calls import create_conversation, post_message
from tests.conftest import KeyMaker, bearer, script

PROBLEM = "application/problem+json"


async def test_an_admin_sets_a_policy_and_a_purged_conversation_answers_404_with_its_code(
    client: AsyncTestClient[Any], keys: KeyMaker, database_url: str
) -> None:
    assert (await client.get("/v1/retention/policies/default")).json()["conversation_days"] is None
    conversation_id = await create_conversation(client)
    await post_message(client, conversation_id, script("hello"))
    held = await create_conversation(client)
    response = await client.put("/v1/retention/policies/default", json={"conversation_days": 1})
    assert response.status_code == 200 and response.json()["updated_by"], response.text
    hold = await client.post(
        "/v1/retention/holds", json={"workspace": "default", "conversation_id": held, "reason": "case 7"}
    )
    assert hold.status_code == 201, hold.text
    engine = create_engine(database_url)
    async with engine.begin() as conn:
        await conn.execute(t.conversations.update().values(updated_at=utcnow() - timedelta(days=2)))
    await engine.dispose()

    [plan] = (await client.get("/v1/retention/plan", params={"workspace": "default"})).json()
    assert plan["conversations"] == 1 and plan["rows"]["messages"] >= 2
    [done] = (await client.post("/v1/retention/run", params={"workspace": "default"})).json()
    if done["conversations"] == 0:
        # The worker's retention loop (one batch per tick) may purge it between the plan and the
        # run: one of the two wins, and the loser finds nothing left to purge.
        assert done["rows"] == {}
        purged_by = sa.select(t.audit_log.c.actor).where(
            t.audit_log.c.action == PURGED, t.audit_log.c.conversation_id == uuid.UUID(conversation_id)
        )
        actors: list[str] = []
        for _ in range(50):  # on PostgreSQL the run skips the row the loop holds, maybe before it commits
            async with engine.connect() as conn:
                actors = list((await conn.execute(purged_by)).scalars())
            if actors:
                break
            await asyncio.sleep(0.1)
        await engine.dispose()
        assert actors == ["system:retention"]
    else:
        assert done["conversations"] == 1 and done["rows"] == plan["rows"]
    for path in (f"/v1/conversations/{conversation_id}", f"/v1/conversations/{conversation_id}/messages"):
        gone = await (
            client.get(path) if path.endswith(conversation_id) else client.post(path, json={"content": "hi"})
        )
        assert gone.status_code == 404 and gone.headers["content-type"].startswith(PROBLEM)
        assert gone.json()["code"] == "conversation_purged"
    assert (await client.get(f"/v1/conversations/{held}")).status_code == 200
    holds = (await client.get("/v1/retention/holds")).json()
    assert [h["conversation_id"] for h in holds] == [held]
    assert (await client.delete(f"/v1/retention/holds/{holds[0]['id']}")).status_code == 204
    [chain] = (await client.get("/v1/audit/verify", params={"workspace": "default"})).json()
    assert chain["ok"] and chain["finding"] is None


async def test_only_admins_and_only_valid_bodies(client: AsyncTestClient[Any], keys: KeyMaker) -> None:
    operator = bearer(await keys.make("operator", "default"))
    for method, path in (
        ("GET", "/v1/retention/policies/default"),
        ("PUT", "/v1/retention/policies/default"),
        ("GET", "/v1/retention/plan"),
        ("POST", "/v1/retention/run"),
        ("GET", "/v1/retention/holds"),
        ("GET", "/v1/audit/verify"),
    ):
        response = await client.request(method, path, headers=operator, json={})
        assert response.status_code == 403 and response.json()["code"] == "forbidden", (method, path)
    bad = [
        ({"conversation_days": 0}, "validation_failed"),
        ({"conversation_days": "ten"}, "validation_failed"),
        ({"conversation_days": 30, "extra": 1}, "validation_failed"),
        ({"conversation_days": 30, "audit_days": 10}, "audit_period_too_short"),
        ({"audit_days": 10}, "audit_period_too_short"),
    ]
    for body, code in bad:
        response = await client.put("/v1/retention/policies/default", json=body)
        assert response.status_code == 422 and response.json()["code"] == code, (body, response.text)
    response = await client.post("/v1/retention/holds", json={"workspace": "default", "reason": ""})
    assert response.status_code == 422
    missing = await client.post(
        "/v1/retention/holds",
        json={
            "workspace": "default",
            "conversation_id": "6f0b1c9e-0000-4000-8000-000000000000",
            "reason": "x",
        },
    )
    assert missing.status_code == 422 and missing.json()["code"] == "validation_failed"
    gone = await client.delete("/v1/retention/holds/6f0b1c9e-0000-4000-8000-000000000000")
    assert gone.status_code == 404


async def test_the_sweeper_loop_seals_the_audit_chain(
    client: AsyncTestClient[Any], database_url: str
) -> None:
    """The app's worker runs the maintenance loop: new audit rows get sealed without a command."""
    await create_conversation(client)
    engine = create_engine(database_url)
    try:
        for _ in range(100):
            async with engine.connect() as conn:
                unsealed = (
                    await conn.execute(sa.select(sa.func.count()).where(t.audit_log.c.seq.is_(None)))
                ).scalar_one()
            if unsealed == 0:
                break
            import asyncio

            await asyncio.sleep(0.1)
        assert unsealed == 0
    finally:
        await engine.dispose()
