"""What an operator's screen needs from the API: who it is, who won a race, recent decisions, the
conversation so far."""

from __future__ import annotations

import json
from typing import Any

from litestar.testing import AsyncTestClient

from sursis.app.main import create_app
from sursis.domain.identity.keys import IssuedKey
from tests.api.http_calls import conversation, create_conversation, get_run, post_message, resolve
from tests.conftest import KeyMaker, admin_headers, bearer, call, eventually, make_settings, script

GATED = script(
    [call("list_dlq_events", limit=2)],
    [call("replay_dlq_event", event_id="evt_1001", reason="partner is back")],
)
DECISIONS = ("pending.approved", "pending.denied", "pending.revision_requested")


async def test_me_describes_the_presented_key(client: AsyncTestClient[Any], keys: KeyMaker) -> None:
    issued = await keys.issue("operator", "default", name="alice")
    response = await client.get("/v1/me", headers=bearer(issued.secret))
    assert response.status_code == 200
    assert response.json() == {
        "id": str(issued.key.id),
        "name": "alice",
        "role": "operator",
        "workspace": "default",
        "permissions": [
            "answer",
            "answer_any",
            "approve",
            "converse",
            "fork_any",
            "manage_authorizations",
            "manage_webhooks",
            "move_ladder",
            "read_audit",
        ],
    }
    user = (await client.get("/v1/me", headers=bearer(await keys.make("user", "default")))).json()
    assert user["role"] == "user"
    assert "approve" not in user["permissions"]


async def test_the_loser_of_a_race_learns_who_decided_and_when(
    client: AsyncTestClient[Any], keys: KeyMaker
) -> None:
    alice = bearer(await keys.make("operator", "default", name="alice"))
    bob = bearer(await keys.make("operator", "default", name="bob"))
    cid = await create_conversation(client)
    run = await post_message(client, cid, GATED)
    correlation_id = run["pending"][0]["correlation_id"]

    won = await client.post(
        f"/v1/pending/{correlation_id}/resolve", json={"decision": "approve"}, headers=alice
    )
    assert won.status_code == 200
    lost = await client.post(
        f"/v1/pending/{correlation_id}/resolve", json={"decision": "deny", "reason": "no"}, headers=bob
    )

    assert lost.status_code == 409
    problem = lost.json()
    assert problem["code"] == "stale"
    assert problem["pending_status"] == "approved"
    assert problem["resolved_by"] == won.json()["resolved_by"]
    assert problem["resolved_by_name"] == "alice"
    assert problem["resolved_at"] == won.json()["resolved_at"].replace("Z", "+00:00")


async def test_a_call_cancelled_with_its_run_names_who_cancelled(
    client: AsyncTestClient[Any], admin_key: IssuedKey
) -> None:
    cid = await create_conversation(client)
    run = await post_message(client, cid, GATED)
    correlation_id = run["pending"][0]["correlation_id"]
    assert (await client.post(f"/v1/runs/{run['id']}/cancel")).status_code == 200

    late = await resolve(client, correlation_id, decision="approve")

    assert late.status_code == 409
    assert late.json()["pending_status"] == "cancelled"
    assert late.json()["resolved_by"] == str(admin_key.key.id)
    assert late.json()["resolved_by_name"] == "test admin"


async def test_an_expired_call_names_no_key(seeded: str) -> None:
    settings = make_settings(seeded, approval_timeout_seconds=0.2, sweep_seconds=0.1)
    async with AsyncTestClient(app=create_app(settings)) as client:
        client.headers.update(await admin_headers(seeded))
        cid = await create_conversation(client)
        run = await post_message(client, cid, GATED)
        correlation_id = run["pending"][0]["correlation_id"]

        async def expired() -> bool:
            found = await client.get(f"/v1/pending/{correlation_id}")
            return bool(found.json()["status"] == "expired")

        await eventually(expired)
        late = await resolve(client, correlation_id, decision="approve")

    assert late.status_code == 409
    assert late.json()["resolved_by"] == "system:sweeper"
    assert late.json()["resolved_by_name"] is None


async def test_recent_decisions_come_newest_first_with_who_decided(
    client: AsyncTestClient[Any], keys: KeyMaker
) -> None:
    alice = bearer(await keys.make("operator", "default", name="alice"))
    decided: list[tuple[str, str]] = []
    for decision, body in (
        ("pending.approved", {"decision": "approve"}),
        ("pending.denied", {"decision": "deny", "reason": "not today"}),
        ("pending.revision_requested", {"decision": "revise", "reason": "use evt_1002"}),
    ):
        cid = await create_conversation(client)
        run = await post_message(client, cid, GATED)
        correlation_id = run["pending"][0]["correlation_id"]
        response = await client.post(f"/v1/pending/{correlation_id}/resolve", json=body, headers=alice)
        assert response.status_code == 200, response.text
        await get_run(client, run["id"])
        decided.append((decision, correlation_id))

    params: dict[str, Any] = {"action": list(DECISIONS), "order": "desc", "limit": 2}
    first = (await client.get("/v1/audit", params=params, headers=alice)).json()
    rest = (
        await client.get("/v1/audit", params={**params, "cursor": first["next_cursor"]}, headers=alice)
    ).json()

    rows = first["items"] + rest["items"]
    assert rest["next_cursor"] is None
    assert [(r["action"], r["correlation_id"]) for r in rows] == decided[::-1]
    assert {r["actor_name"] for r in rows} == {"alice"}
    assert rows[1]["details"]["reason"] == "not today"
    assert [r["id"] for r in rows] == sorted((r["id"] for r in rows), reverse=True)

    everything = (await client.get("/v1/audit", headers=alice)).json()["items"]
    by_worker = [r for r in everything if r["actor"] == "system:worker"]
    assert by_worker
    assert {r["actor_name"] for r in by_worker} == {None}
    ascending = [r["id"] for r in everything]
    assert ascending == sorted(ascending)


async def test_audit_filters_refuse_bad_values(client: AsyncTestClient[Any]) -> None:
    for params in ({"order": "sideways"}, {"action": "x" * 101}, {"action": [f"a{i}" for i in range(21)]}):
        response = await client.get("/v1/audit", params=params)
        assert response.status_code == 422, params
        assert response.json()["code"] == "validation_failed"


async def test_an_operator_reads_the_conversation_so_far_with_full_arguments(
    client: AsyncTestClient[Any], keys: KeyMaker
) -> None:
    operator = bearer(await keys.make("operator", "default"))
    cid = await create_conversation(client)
    secret_reason = "token=abc123 partner is back"
    run = await post_message(
        client,
        cid,
        script(
            [call("list_dlq_events", limit=2)],
            [call("replay_dlq_event", event_id="evt_1001", reason=secret_reason)],
        ),
    )
    assert run["status"] == "suspended"

    seen = await client.get(f"/v1/conversations/{cid}", headers=operator)

    assert seen.status_code == 200
    parts = [p for m in seen.json()["messages"] for p in m["message"]["parts"]]
    kinds = [p["part_kind"] for p in parts]
    assert kinds.count("user-prompt") == 1
    assert "tool-return" in kinds
    listed = next(p for p in parts if p["part_kind"] == "tool-return")
    assert listed["tool_name"] == "list_dlq_events"
    [gated] = [p for p in parts if p["part_kind"] == "tool-call" and p["tool_name"] == "replay_dlq_event"]
    args = json.loads(gated["args"]) if isinstance(gated["args"], str) else gated["args"]
    assert args == {"event_id": "evt_1001", "reason": secret_reason}
    other = bearer(await keys.make("operator", "elsewhere"))
    assert (await client.get(f"/v1/conversations/{cid}", headers=other)).status_code == 404
    assert (await conversation(client, cid))["id"] == cid
