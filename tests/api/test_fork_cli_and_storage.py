"""Forks from the command line and the Python client, and what storage does with a fork: its copied
messages sealed anew under encryption, its legal holds, and retention purging either side alone."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from litestar.testing import AsyncTestClient

from sursis.client import AsyncClient
from sursis.domain.clock import utcnow
from sursis.domain.identity.keys import IssuedKey
from sursis.infra.db import tables as t
from sursis.infra.db.engine import create_engine
from tests.api.conftest import LiveFactory
from tests.api.http_calls import conversation, create_conversation, post_message
from tests.api.test_encryption_at_rest import SECRET, app_client, approved_turn, new_key, tables_holding
from tests.api.test_fork import effects, fork, turns
from tests.api.test_pending_cli import sursis
from tests.conftest import KeyMaker, script

PROBLEM = "application/problem+json"


async def test_the_command_line_and_the_client_fork_as_the_key_they_send(
    live: LiveFactory, keys: KeyMaker
) -> None:
    operator = await keys.make("operator", "default", name="alice")
    async with live() as app:
        cid = (await app.http.post("/v1/conversations", json={"agent": "ops"})).json()["id"]
        posted = await app.http.post(f"/v1/conversations/{cid}/messages?wait=10", json={"content": "hello"})
        assert posted.json()["status"] == "completed"

        code, out, err = await sursis(
            "conversations", "fork", cid, "--at", "1", "--message", "hi again", url=app.base_url, key=operator
        )
        assert code == 0, err
        assert f"forked from {cid} at message 1" in out
        assert "completed" in out

        code, out, err = await sursis(
            "conversations", "fork", cid, "--at", "1", "--json", url=app.base_url, key=operator
        )
        assert code == 0, err
        shown = json.loads(out)
        assert shown["conversation"]["forked_from"] == {"conversation_id": cid, "seq": 1}
        assert shown["run"]["status"] == "completed"

        code, out, err = await sursis(
            "conversations", "fork", cid, "--at", "9", url=app.base_url, key=operator
        )
        assert code == 2
        assert "fork_point_out_of_range" in err
        code, _, err = await sursis("conversations", "fork", cid, "--at", "0", url=app.base_url, key=operator)
        assert code == 2 and "seq" in err

        async with AsyncClient(app.base_url, operator) as client:
            forked = await client.fork(cid, 1, message="from the client", wait=10)
            assert forked.conversation.forked_from is not None
            assert forked.conversation.forked_from.seq == 1
            assert forked.run.status == "completed"
            detail = await client.get_conversation(cid)
            assert len(detail.forks) == 3
            assert detail.forks[-1].id == forked.conversation.id
            assert all(f.at == 1 for f in detail.forks)
        audit = (await app.http.get("/v1/audit", params={"action": "conversation.forked"})).json()["items"]
        assert len(audit) == 3 and all(row["actor_name"] == "alice" for row in audit)


async def test_a_fork_s_copied_messages_are_sealed_anew_and_read_back(
    seeded: str, admin_key: IssuedKey
) -> None:
    async with app_client(seeded, admin_key, new_key("k1")) as client:
        cid, _ = await approved_turn(client)
        await post_message(client, cid, f"and then {SECRET}?")
        at = turns(await conversation(client, cid))[1]
        response = await fork(client, cid, at, message=f"instead {SECRET}")
        assert response.status_code == 201, response.text
        fid = response.json()["conversation"]["id"]
        shown = await conversation(client, fid)
        assert SECRET in str(shown["messages"])
        assert [m["seq"] for m in shown["messages"]][: at - 1] == list(range(1, at))
    assert await tables_holding(seeded, SECRET) == {}
    engine = create_engine(seeded)
    try:
        async with engine.connect() as conn:
            m = t.messages.c
            stored = await conn.execute(sa.select(m.conversation_id, m.seq, m.body).where(m.seq < at))
            by_row = {(str(r[0]), r[1]): str(r[2]) for r in stored}
    finally:
        await engine.dispose()
    for seq in range(1, at):
        original, copied = by_row[(cid, seq)], by_row[(fid, seq)]
        assert copied.startswith("sursis:enc:1:k1:")
        assert copied != original  # sealed for its own row, not the original's ciphertext copied


async def age_everything(database_url: str) -> None:
    engine = create_engine(database_url)
    try:
        async with engine.begin() as conn:
            await conn.execute(t.conversations.update().values(updated_at=utcnow() - timedelta(days=2)))
    finally:
        await engine.dispose()


async def test_legal_holds_follow_a_fork_and_retention_purges_each_side_on_its_own(
    client: AsyncTestClient[Any], seeded: str
) -> None:
    held = await create_conversation(client)
    await post_message(client, held, script("hello"))
    hold = await client.post(
        "/v1/retention/holds", json={"workspace": "default", "conversation_id": held, "reason": "case 7"}
    )
    assert hold.status_code == 201, hold.text
    held_fork = (await fork(client, held, 1, message="again")).json()["conversation"]["id"]
    holds = (await client.get("/v1/retention/holds")).json()
    assert sorted((h["conversation_id"], h["reason"]) for h in holds) == sorted(
        [(held, "case 7"), (held_fork, "case 7")]
    )
    free = await create_conversation(client)
    await post_message(client, free, script("hi"))
    kept_fork = (await fork(client, free, 1)).json()["conversation"]["id"]
    assert (
        await client.post(
            "/v1/retention/holds",
            json={"workspace": "default", "conversation_id": kept_fork, "reason": "fork only"},
        )
    ).status_code == 201
    assert (
        await client.put("/v1/retention/policies/default", json={"conversation_days": 1})
    ).status_code == 200
    await age_everything(seeded)

    [done] = (await client.post("/v1/retention/run", params={"workspace": "default"})).json()
    assert done["conversations"] == 1  # `free` alone: every other one is held
    gone = await client.get(f"/v1/conversations/{free}")
    assert gone.status_code == 404 and gone.json()["code"] == "conversation_purged"
    survivor = await conversation(client, kept_fork)
    assert survivor["forked_from"] == {"conversation_id": free, "seq": 1}
    assert len(survivor["messages"]) >= 2
    refused = await fork(client, free, 1)
    assert refused.status_code == 404 and refused.json()["code"] == "conversation_purged"
    assert [f["id"] for f in (await conversation(client, held))["forks"]] == [held_fork]
    assert await effects(seeded) == []
