"""Forking a conversation at a turn, through the real app on SQLite and PostgreSQL: what is copied,
that nothing before the fork point runs again, who may fork, and the bodies that are refused."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from litestar.testing import AsyncTestClient

from sursis.infra.db import tables as t
from sursis.infra.db.engine import create_engine
from tests.api.http_calls import conversation, create_conversation, get_run, post_message, resolve, tool_calls
from tests.conftest import KeyMaker, bearer, call, script

GATED = script([call("replay_dlq_event", event_id="evt_1001", reason="retry")], "done")
PROBLEM = "application/problem+json"


async def fork(client: AsyncTestClient[Any], cid: str, at: Any, wait: float = 10, **body: Any) -> Any:
    return await client.post(f"/v1/conversations/{cid}/fork", params={"wait": wait}, json={"at": at, **body})


def turns(detail: dict[str, Any]) -> list[int]:
    """The seqs of the user messages of a conversation's log."""
    return [
        m["seq"]
        for m in detail["messages"]
        if any(p["part_kind"] == "user-prompt" for p in m["message"].get("parts", []))
    ]


def prompts(detail: dict[str, Any]) -> list[str]:
    return [
        p["content"]
        for m in detail["messages"]
        for p in m["message"].get("parts", [])
        if p["part_kind"] == "user-prompt"
    ]


async def effects(database_url: str) -> list[tuple[str, str]]:
    """Every executed tool call of the database (conversation, tool), straight from the table."""
    engine = create_engine(database_url)
    try:
        async with engine.connect() as conn:
            c = t.tool_calls.c
            rows = await conn.execute(sa.select(c.conversation_id, c.tool_name))
            return [(str(r[0]), str(r[1])) for r in rows]
    finally:
        await engine.dispose()


async def approved_then_asked(client: AsyncTestClient[Any]) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """A conversation whose first turn ran an approved gated call and whose second asked about it."""
    cid = await create_conversation(client)
    first = await post_message(client, cid, GATED)
    [pending] = first["pending"]
    assert (await resolve(client, pending["correlation_id"], decision="approve")).status_code == 200
    assert (await get_run(client, first["id"]))["status"] == "completed"
    second = await post_message(client, cid, "what happened?")
    assert second["status"] == "completed", second
    return cid, first, second


async def test_a_fork_without_a_message_runs_the_turn_again_on_the_copied_history(
    client: AsyncTestClient[Any], seeded: str, admin_key: Any
) -> None:
    cid, _, second = await approved_then_asked(client)
    original = await conversation(client, cid)
    at = turns(original)[1]
    before = await effects(seeded)
    assert before == [(cid, "replay_dlq_event")]

    response = await fork(client, cid, at)
    assert response.status_code == 201, response.text
    forked = response.json()
    fid = forked["conversation"]["id"]
    assert fid != cid
    assert forked["conversation"]["forked_from"] == {"conversation_id": cid, "seq": at}
    assert forked["conversation"]["workspace"] == "default"
    assert forked["conversation"]["created_by"] == str(admin_key.key.id)
    assert forked["run"]["status"] == "completed"
    assert forked["run"]["output"] == second["output"]  # the same turn on the same history

    detail = await conversation(client, fid)
    copied = [m["message"] for m in detail["messages"] if m["seq"] < at]
    assert copied == [m["message"] for m in original["messages"] if m["seq"] < at]
    assert prompts(detail) == [GATED, "what happened?"]
    assert await tool_calls(client, forked["run"]["id"]) == []
    assert await effects(seeded) == before  # the approved replay was not run again
    pending = (await client.get("/v1/pending", params={"status": "all"})).json()["items"]
    assert {p["conversation_id"] for p in pending} == {cid}

    shown = await conversation(client, cid)
    assert [(f["id"], f["at"]) for f in shown["forks"]] == [(fid, at)]
    assert shown["forked_from"] is None
    audit = (
        await client.get("/v1/audit", params={"conversation_id": fid, "action": "conversation.forked"})
    ).json()["items"]
    assert [(a["actor"], a["details"]["forked_from"], a["details"]["at"]) for a in audit] == [
        (str(admin_key.key.id), cid, at)
    ]
    assert audit[0]["details"]["message_replaced"] is False


async def test_a_fork_with_a_message_replaces_the_turn_and_its_calls_are_new_calls(
    client: AsyncTestClient[Any], seeded: str
) -> None:
    cid, first, _ = await approved_then_asked(client)
    original = await conversation(client, cid)
    first_turn, second_turn = turns(original)

    again = await fork(client, cid, first_turn, message=GATED)
    assert again.status_code == 201, again.text
    run = again.json()["run"]
    fid = again.json()["conversation"]["id"]
    assert run["status"] == "suspended"  # asked again: the original's approval is not reused
    [pending] = run["pending"]
    assert pending["conversation_id"] == fid
    assert pending["correlation_id"] != first["pending"][0]["correlation_id"]
    assert await effects(seeded) == [(cid, "replay_dlq_event")]
    assert (await resolve(client, pending["correlation_id"], decision="approve")).status_code == 200
    assert (await get_run(client, run["id"]))["status"] == "completed"
    assert sorted(await effects(seeded)) == sorted([(cid, "replay_dlq_event"), (fid, "replay_dlq_event")])

    corrected = await fork(client, cid, second_turn, message="and now?")
    assert corrected.status_code == 201, corrected.text
    assert corrected.json()["run"]["status"] == "completed"
    detail = await conversation(client, corrected.json()["conversation"]["id"])
    assert prompts(detail) == [GATED, "and now?"]
    assert [m["seq"] for m in detail["messages"]][: second_turn - 1] == list(range(1, second_turn))
    assert await tool_calls(client, corrected.json()["run"]["id"]) == []
    audit = (
        await client.get(
            "/v1/audit",
            params={
                "conversation_id": corrected.json()["conversation"]["id"],
                "action": "conversation.forked",
            },
        )
    ).json()["items"]
    assert audit[0]["details"]["message_replaced"] is True


async def test_a_fork_after_a_cancelled_call_tells_the_model_it_did_not_run_and_never_runs_it(
    client: AsyncTestClient[Any], seeded: str
) -> None:
    cid = await create_conversation(client)
    run = await post_message(client, cid, GATED)
    assert (await client.post(f"/v1/runs/{run['id']}/cancel")).status_code == 200
    follow_up = await post_message(client, cid, "what happened?")
    assert "CANCELLED" in follow_up["output"]
    original = await conversation(client, cid)
    at = turns(original)[1]  # this request also answers the cancelled call

    response = await fork(client, cid, at)
    assert response.status_code == 201, response.text
    forked = response.json()
    assert forked["run"]["status"] == "completed"
    assert forked["run"]["output"] == follow_up["output"]
    assert await effects(seeded) == []
    detail = await conversation(client, forked["conversation"]["id"])
    answer = next(m["message"] for m in detail["messages"] if m["seq"] == at)
    assert [p["part_kind"] for p in answer["parts"]] == ["tool-return"]  # the answer, not the prompt
    assert prompts(detail) == [GATED, "what happened?"]


async def test_a_fork_of_a_suspended_conversation_copies_only_settled_turns(
    client: AsyncTestClient[Any], seeded: str
) -> None:
    cid = await create_conversation(client)
    done = await post_message(client, cid, "hello")
    assert done["status"] == "completed"
    waiting = await post_message(client, cid, GATED)
    assert waiting["status"] == "suspended"
    original = await conversation(client, cid)
    first_turn, second_turn = turns(original)

    at_waiting = await fork(client, cid, second_turn, message="never mind")
    assert at_waiting.status_code == 201, at_waiting.text
    assert at_waiting.json()["run"]["status"] == "completed"
    replayed = await fork(client, cid, second_turn)
    assert replayed.status_code == 201, replayed.text
    [asked] = replayed.json()["run"]["pending"]
    [kept] = waiting["pending"]
    assert asked["correlation_id"] != kept["correlation_id"]
    assert asked["conversation_id"] == replayed.json()["conversation"]["id"]
    still = await client.get(f"/v1/pending/{kept['correlation_id']}")
    assert still.json()["status"] == "awaiting"
    assert (await conversation(client, cid))["active_run"]["id"] == waiting["id"]
    assert await effects(seeded) == []
    beyond = await fork(client, cid, original["messages"][-1]["seq"] + 1)
    assert beyond.status_code == 422 and beyond.json()["code"] == "fork_point_out_of_range"
    assert first_turn == 1


async def test_a_user_key_forks_only_its_own_conversations_and_other_workspaces_are_404(
    client: AsyncTestClient[Any], keys: KeyMaker
) -> None:
    alice = bearer(await keys.make("user", "default", name="alice"))
    bob = bearer(await keys.make("user", "default", name="bob"))
    operator = bearer(await keys.make("operator", "default"))
    elsewhere = bearer(await keys.make("operator", "other"))
    made = await client.post("/v1/conversations", json={"agent": "ops"}, headers=alice)
    cid = made.json()["id"]
    posted = await client.post(
        f"/v1/conversations/{cid}/messages", params={"wait": 10}, json={"content": "hi"}, headers=alice
    )
    assert posted.json()["status"] == "completed"
    path = f"/v1/conversations/{cid}/fork"

    refused = await client.post(path, json={"at": 1}, headers=bob)
    assert refused.status_code == 403 and refused.json()["code"] == "forbidden"
    assert (await client.get(f"/v1/conversations/{cid}", headers=bob)).status_code == 200  # may read
    hidden = await client.post(path, json={"at": 1}, headers=elsewhere)
    assert hidden.status_code == 404 and hidden.json()["code"] == "not_found"
    own = await client.post(path, params={"wait": 10}, json={"at": 1, "message": "again"}, headers=alice)
    assert own.status_code == 201, own.text
    assert own.json()["run"]["status"] == "completed"  # its message is logged: a fork point
    assert own.json()["conversation"]["created_by"] == made.json()["created_by"]
    assert (await client.post(path, json={"at": 1}, headers=operator)).status_code == 201
    fork_of_fork = await client.post(
        f"/v1/conversations/{own.json()['conversation']['id']}/fork", json={"at": 1}, headers=alice
    )
    assert fork_of_fork.status_code == 201, fork_of_fork.text


async def test_hostile_bodies_are_refused_with_a_problem_and_its_code(client: AsyncTestClient[Any]) -> None:
    cid = await create_conversation(client)
    await post_message(client, cid, script([call("list_dlq_events")], "ok"))
    response_seq = turns(await conversation(client, cid))[0] + 1
    unknown = "00000000-0000-4000-8000-000000000000"
    cases: list[tuple[str, Any, int, str]] = [
        (cid, {"at": 99}, 422, "fork_point_out_of_range"),
        (cid, {"at": response_seq}, 422, "fork_point_not_a_turn"),
        (cid, {"at": 0}, 422, "validation_failed"),
        (cid, {"at": -1}, 422, "validation_failed"),
        (cid, {"at": 2**31}, 422, "validation_failed"),
        (cid, {"at": "1"}, 422, "validation_failed"),
        (cid, {"at": 1.5}, 422, "validation_failed"),
        (cid, {"at": True}, 422, "validation_failed"),
        (cid, {"at": None}, 422, "validation_failed"),
        (cid, {}, 422, "validation_failed"),
        (cid, [1], 422, "validation_failed"),
        (cid, {"at": 1, "message": 7}, 422, "validation_failed"),
        (cid, {"at": 1, "message": ""}, 422, "validation_failed"),
        (cid, {"at": 1, "message": "   "}, 422, "validation_failed"),
        (cid, {"at": 1, "message": "x" * 32_001}, 422, "validation_failed"),
        (cid, {"at": 1, "message": "a\x00b"}, 422, "validation_failed"),
        (cid, {"at": 1, "extra": 1}, 422, "validation_failed"),
        (unknown, {"at": 1}, 404, "not_found"),
    ]
    for target, body, status, code in cases:
        response = await client.post(f"/v1/conversations/{target}/fork", json=body)
        assert (response.status_code, response.json().get("code")) == (status, code), (body, response.text)
        assert response.headers["content-type"].startswith(PROBLEM)
    not_json = await client.post(
        f"/v1/conversations/{cid}/fork", content=b"at=1", headers={"content-type": "text/plain"}
    )
    assert not_json.status_code in (415, 422) and not_json.json()["code"]
    assert (await conversation(client, cid))["forks"] == []
