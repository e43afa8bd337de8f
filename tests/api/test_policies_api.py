"""`/v1/policies` and `/v1/ladder` over HTTP: versions, Cedar validation, roles, the ladder's
ceiling, decisions shown on pending calls and tool calls, and hostile bodies (4xx, nothing stored)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st
from litestar.testing import AsyncTestClient

from sursis.infra.db import policy_tables as p
from sursis.infra.db.engine import create_engine
from tests.api.http_calls import create_conversation, post_message
from tests.conftest import KeyMaker, bearer, call, script
from tests.near_valid import EDGE, Variant, every_variant, near_valid

PROBLEM = "application/problem+json"
POLICY = {
    "comment": "replays of prod events wait for the SRE group",
    "rules": [
        {
            "id": "prod-replays",
            "effect": "ask",
            "tools": ["replay_dlq_event"],
            "when": 'context.arguments.event_id like "evt_1*"',
            "reason": "a replay changes production",
            "route": {
                "groups": ["sre"],
                "quorum": 2,
                "remind_after_seconds": 600,
                "escalations": [{"after_seconds": 1800, "to": ["group:oncall", "slack:#ops"]}],
                "timeout_seconds": 7200,
                "on_timeout": "deny",
            },
        },
        {"id": "reads", "effect": "allow", "tools": ["list_dlq_events"]},
    ],
}
SIMULATION = {"rules": POLICY["rules"], "since": "2026-01-01T00:00:00Z", "examples": 5}
LADDER = {"tool": "replay_dlq_event", "level": "ask"}


def problem(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM)
    body: dict[str, Any] = response.json()
    assert body["code"] == code, body
    return body


async def test_a_policy_is_stored_as_versions_and_shown(client: AsyncTestClient[Any]) -> None:
    none = await client.get("/v1/policies")
    assert none.status_code == 200 and none.json()["version"] is None and none.json()["rules"] == []
    first = await client.put("/v1/policies", json=POLICY)
    assert first.status_code == 200, first.text
    assert first.json()["version"] == 1
    assert first.json()["rules"][0]["route"]["escalations"] == [
        {"after_seconds": 1800.0, "to": ["group:oncall", "slack:#ops"]}
    ]
    second = await client.put("/v1/policies", json={"rules": [], "expected_version": 1})
    assert second.json()["version"] == 2
    stale = await client.put("/v1/policies", json={"rules": [], "expected_version": 1})
    problem(stale, 409, "stale")
    old = await client.get("/v1/policies/versions/1")
    assert [r["id"] for r in old.json()["rules"]] == ["prod-replays", "reads"]
    problem(await client.get("/v1/policies/versions/9"), 404, "not_found")
    schema = (await client.get("/v1/policies/schema")).json()
    assert "replay_dlq_event" in schema["Sursis"]["actions"]
    tools = {t["name"]: t for t in (await client.get("/v1/policies/tools")).json()}
    assert tools["replay_dlq_event"]["gated"] is True and tools["replay_dlq_event"]["flags"] == []


async def test_a_condition_cedar_refuses_is_422_and_nothing_is_stored(client: AsyncTestClient[Any]) -> None:
    await client.put("/v1/policies", json=POLICY)
    cases = [
        ("context.arguments.event_id > 3", ["rules", "0", "when"]),
        ("context.arguments.amount > 3", ["rules", "0", "when"]),
        ("true }; permit(principal, action, resource) when { true", ["rules", "0", "when"]),
        ("((", ["rules", "0", "when"]),
    ]
    for when, loc in cases:
        body = {"rules": [{"id": "x", "effect": "allow", "tools": ["replay_dlq_event"], "when": when}]}
        refused = problem(await client.put("/v1/policies", json=body), 422, "invalid_policy")
        assert refused["errors"][0]["loc"] == loc, refused
    unknown = {"rules": [{"id": "x", "effect": "allow", "tools": ["nope"]}]}
    problem(await client.put("/v1/policies", json=unknown), 422, "invalid_policy")
    duplicate = {"rules": [{"id": "x", "effect": "allow"}, {"id": "x", "effect": "deny"}]}
    problem(await client.put("/v1/policies", json=duplicate), 422, "invalid_policy")
    assert (await client.get("/v1/policies")).json()["version"] == 1


async def test_only_admins_touch_policies_and_the_role_is_asked_before_the_body(
    client: AsyncTestClient[Any], keys: KeyMaker
) -> None:
    for role in ("user", "operator"):
        headers = bearer(await keys.make(role, "default"))
        problem(await client.get("/v1/policies", headers=headers), 403, "forbidden")
        problem(await client.put("/v1/policies", content=b"{not json", headers=headers), 403, "forbidden")
        problem(await client.post("/v1/policies/simulate", json={}, headers=headers), 403, "forbidden")
    other_admin = bearer(await keys.make("admin", "elsewhere"))
    put = await client.put("/v1/policies", json={**POLICY, "workspace": "elsewhere"}, headers=other_admin)
    assert put.status_code == 200 and put.json()["workspace"] == "elsewhere"
    assert (await client.get("/v1/policies")).json()["version"] is None


async def test_a_user_moves_a_tool_within_the_ceiling_only(
    client: AsyncTestClient[Any], keys: KeyMaker
) -> None:
    user = bearer(await keys.make("user", "default"))
    problem(
        await client.put("/v1/ladder", json={"tool": "replay_dlq_event", "level": "notify"}, headers=user),
        403,
        "above_ceiling",
    )
    problem(
        await client.put("/v1/ladder", json={"tool": "replay_dlq_event", "ceiling": "auto"}, headers=user),
        403,
        "forbidden",
    )
    ceiling = await client.put("/v1/ladder", json={"tool": "replay_dlq_event", "ceiling": "notify"})
    assert ceiling.status_code == 200 and ceiling.json()["ceiling"] == "notify"
    moved = await client.put("/v1/ladder", json={"tool": "replay_dlq_event", "level": "notify"}, headers=user)
    assert moved.status_code == 200, moved.text
    problem(
        await client.put("/v1/ladder", json={"tool": "replay_dlq_event", "level": "auto"}, headers=user),
        403,
        "above_ceiling",
    )
    problem(
        await client.put(
            "/v1/ladder",
            json={"tool": "replay_dlq_event", "level": "ask_above", "condition": "context.arguments.x > 1"},
            headers=user,
        ),
        422,
        "invalid_policy",
    )
    ladder = {e["tool"]: e for e in (await client.get("/v1/ladder", headers=user)).json()}
    assert (ladder["replay_dlq_event"]["level"], ladder["replay_dlq_event"]["ceiling"]) == (
        "notify",
        "notify",
    )
    assert ladder["list_dlq_events"]["level"] is None
    undone = await client.put("/v1/ladder", json={"tool": "replay_dlq_event", "undo": True}, headers=user)
    assert undone.json()["level"] is None and undone.json()["previous_level"] == "notify"
    # Another workspace's customer sees nothing of this one's ladder and cannot move it.
    stranger = bearer(await keys.make("user", "elsewhere"))
    problem(
        await client.put(
            "/v1/ladder",
            json={"tool": "replay_dlq_event", "level": "ask", "workspace": "default"},
            headers=stranger,
        ),
        404,
        "not_found",
    )
    problem(
        await client.get("/v1/ladder", params={"workspace": "default"}, headers=stranger), 404, "not_found"
    )
    theirs = {e["tool"]: e for e in (await client.get("/v1/ladder", headers=stranger)).json()}
    assert theirs["replay_dlq_event"]["ceiling"] == "ask" and theirs["replay_dlq_event"]["level"] is None


async def test_a_sampled_rung_names_its_rate_or_is_refused(
    client: AsyncTestClient[Any], keys: KeyMaker
) -> None:
    user = bearer(await keys.make("user", "default"))
    tool = {"tool": "replay_dlq_event"}
    problem(
        await client.put("/v1/ladder", json={**tool, "level": "sampled", "one_in": 5}, headers=user),
        403,
        "above_ceiling",
    )
    # A sampled ceiling needs the admin's own N.
    body = problem(await client.put("/v1/ladder", json={**tool, "ceiling": "sampled"}), 422, "invalid_policy")
    assert body["errors"][0]["loc"] == ["ceiling_one_in"]
    ceiling = await client.put("/v1/ladder", json={**tool, "ceiling": "sampled", "ceiling_one_in": 10})
    assert (ceiling.json()["ceiling"], ceiling.json()["ceiling_one_in"]) == ("sampled", 10)
    for wrong in ({"level": "sampled"}, {"level": "sampled", "one_in": 1}, {"level": "ask", "one_in": 4}):
        body = problem(
            await client.put("/v1/ladder", json={**tool, **wrong}, headers=user), 422, "invalid_policy"
        )
        assert body["errors"][0]["loc"] == ["one_in"], body
    problem(
        await client.put("/v1/ladder", json={**tool, "level": "sampled", "one_in": [5]}, headers=user),
        422,
        "validation_failed",
    )
    problem(
        await client.put("/v1/ladder", json={**tool, "ceiling_one_in": 3}, headers=user), 403, "forbidden"
    )
    moved = await client.put("/v1/ladder", json={**tool, "level": "sampled", "one_in": 50}, headers=user)
    assert moved.status_code == 200, moved.text
    assert (moved.json()["level"], moved.json()["one_in"], moved.json()["ceiling_one_in"]) == (
        "sampled",
        50,
        10,
    )
    problem(
        await client.put("/v1/ladder", json={**tool, "level": "notify"}, headers=user), 403, "above_ceiling"
    )
    ladder = {e["tool"]: e for e in (await client.get("/v1/ladder", headers=user)).json()}
    assert ladder["replay_dlq_event"]["one_in"] == 50
    back = await client.put("/v1/ladder", json={**tool, "level": "ask"}, headers=user)
    assert back.json()["one_in"] is None and back.json()["previous_level"] == "sampled"
    undone = await client.put("/v1/ladder", json={**tool, "undo": True}, headers=user)
    assert (undone.json()["level"], undone.json()["one_in"]) == ("sampled", 50)


async def test_decisions_show_on_pending_calls_and_tool_calls(client: AsyncTestClient[Any]) -> None:
    await client.put("/v1/policies", json=POLICY)
    conversation = await create_conversation(client, workspace="default")
    run = await post_message(
        client,
        conversation,
        script([call("list_dlq_events"), call("replay_dlq_event", event_id="evt_1001", reason="retry")]),
    )
    assert run["status"] == "suspended", run
    [pending] = run["pending"]
    shown = (await client.get(f"/v1/pending/{pending['correlation_id']}")).json()
    assert shown["policy"]["rule"] == "prod-replays"
    assert shown["policy"]["route"]["groups"] == ["sre"] and shown["policy"]["route"]["quorum"] == 2
    calls = (await client.get(f"/v1/runs/{run['id']}/tool-calls")).json()
    [listed] = [c for c in calls if c["tool_name"] == "list_dlq_events"]
    assert (listed["policy"]["effect"], listed["policy"]["rule"], listed["policy"]["policy_version"]) == (
        "allow",
        "reads",
        1,
    )


async def test_a_denied_call_is_a_tool_error_not_a_failed_run(client: AsyncTestClient[Any]) -> None:
    body = {
        "rules": [{"id": "no-replays", "effect": "deny", "tools": ["replay_dlq_event"], "reason": "frozen"}]
    }
    assert (await client.put("/v1/policies", json=body)).status_code == 200
    conversation = await create_conversation(client, workspace="default")
    run = await post_message(
        client, conversation, script([call("replay_dlq_event", event_id="evt_1001", reason="retry")])
    )
    assert run["status"] == "completed", run
    [record] = (await client.get(f"/v1/runs/{run['id']}/tool-calls")).json()
    assert (record["ok"], record["error_code"], record["policy"]["rule"]) == (
        False,
        "POLICY_DENIED",
        "no-replays",
    )
    assert "frozen" in record["result"]["error"]["message"]


class Stored:
    def __init__(self, database_url: str) -> None:
        self._engine = create_engine(database_url)

    async def snapshot(self) -> tuple[int, ...]:
        async with self._engine.connect() as conn:
            return tuple(
                [
                    await conn.scalar(sa.select(sa.func.count()).select_from(table)) or 0
                    for table in (p.policies, p.autonomy_ladder)
                ]
            )

    async def close(self) -> None:
        await self._engine.dispose()


@pytest.fixture
async def stored(seeded: str) -> AsyncIterator[Stored]:
    rows = Stored(seeded)
    yield rows
    await rows.close()


ENDPOINTS = [
    ("PUT", "/v1/policies", POLICY),
    ("POST", "/v1/policies/simulate", SIMULATION),
    ("PUT", "/v1/ladder", LADDER),
]


async def check(
    client: AsyncTestClient[Any], stored: Stored, method: str, path: str, variant: Variant
) -> None:
    before = await stored.snapshot()
    response = await client.request(
        method, path, content=variant.body, headers={"content-type": "application/json"}
    )
    assert response.status_code < 500, (variant, response.text)
    if response.status_code >= 400:
        assert response.headers["content-type"].startswith(PROBLEM), (variant, response.text)
        assert response.json()["code"], response.text
        assert await stored.snapshot() == before, variant


async def test_every_systematic_variant_is_answered_without_a_5xx(
    client: AsyncTestClient[Any], stored: Stored
) -> None:
    for method, path, example in ENDPOINTS:
        for variant in every_variant(example):
            await check(client, stored, method, path, variant)


@pytest.mark.parametrize("endpoint", range(len(ENDPOINTS)))
@given(data=st.data())
@EDGE
async def test_drawn_near_valid_bodies_are_answered_without_a_5xx(
    client: AsyncTestClient[Any], stored: Stored, endpoint: int, data: st.DataObject
) -> None:
    method, path, example = ENDPOINTS[endpoint]
    await check(client, stored, method, path, data.draw(near_valid(example)))
