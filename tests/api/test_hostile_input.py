"""Hostile and careless input: every answer is a 4xx problem with field errors, never a 5xx."""

from __future__ import annotations

import uuid
from typing import Any

import structlog
from litestar.testing import AsyncTestClient
from structlog.testing import capture_logs

from abeyance.app.main import create_app
from tests.api.helpers import create_conversation, post_message, resolve
from tests.conftest import KeyMaker, bearer, call, make_settings, script

PROBLEM = "application/problem+json"


def assert_problem(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM)
    body: dict[str, Any] = response.json()
    assert body["code"] == code
    assert body["status"] == status
    return body


async def suspended_replay(client: AsyncTestClient[Any]) -> Any:
    conversation_id = await create_conversation(client)
    run = await post_message(
        client,
        conversation_id,
        script([call("replay_dlq_event", event_id="evt_1001", reason="retry")], "done"),
    )
    assert run["status"] == "suspended", run
    return run["pending"][0]


BAD_BODIES: list[tuple[bytes, list[str]]] = [
    (b"{not json", ["body"]),
    (b"", ["body"]),
    (b"[1, 2]", ["body"]),
    (b"[" * 50_000 + b"]" * 50_000, ["body"]),
    (b'{"agent": 5}', ["agent"]),
    (b'{"agent": "ops", "workspace": "no spaces allowed"}', ["workspace"]),
    (b'{"agent": "ops", "owner": "mallory"}', ["owner"]),
    (b'{"agent": "no_such_agent"}', ["agent"]),
]


async def test_bad_bodies_are_422_with_field_errors_and_big_ones_413(client: AsyncTestClient[Any]) -> None:
    cid = await create_conversation(client)
    too_big = await client.post(
        f"/v1/conversations/{cid}/messages",
        content=b'{"content": "' + b"a" * 1_100_000 + b'"}',
        headers={"content-type": "application/json"},
    )
    assert_problem(too_big, 413, "body_too_large")
    too_long = await client.post(f"/v1/conversations/{cid}/messages", json={"content": "a" * 32_001})
    problem = assert_problem(too_long, 422, "validation_failed")
    assert ["content"] in [e["loc"] for e in problem["errors"]]
    blank = await client.post(f"/v1/conversations/{cid}/messages", json={"content": "   "})
    assert_problem(blank, 422, "validation_failed")
    for body, loc in BAD_BODIES:
        response = await client.post(
            "/v1/conversations", content=body, headers={"content-type": "application/json"}
        )
        problem = assert_problem(response, 422, "validation_failed")
        assert loc in [e["loc"] for e in problem["errors"]], (body[:40], problem)


async def test_bad_resolutions_are_422_and_change_nothing(client: AsyncTestClient[Any]) -> None:
    pending = await suspended_replay(client)
    cid = pending["correlation_id"]
    cases: list[tuple[dict[str, Any], str, list[str]]] = [
        ({"decision": "maybe"}, "validation_failed", ["decision"]),
        ({"decision": "approve", "reason": 5}, "validation_failed", ["reason"]),
        ({"decision": "approve", "resolved_by": "mallory"}, "validation_failed", ["resolved_by"]),
        ({"decision": "approve", "args": {"event_id": 7}}, "validation_failed", ["args", "event_id"]),
        ({"decision": "approve", "args_hash": "short"}, "validation_failed", ["args_hash"]),
        ({"decision": "answer", "result": "x"}, "invalid_decision", []),
        (
            {
                "decision": "approve",
                "result": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[0]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]],
            },
            "validation_failed",
            ["result"],
        ),
    ]
    for body, code, loc in cases:
        problem = assert_problem(await resolve(client, cid, **body), 422, code)
        if loc:
            assert loc in [e["loc"] for e in problem["errors"]], (body, problem)
    still = (await client.get(f"/v1/pending/{cid}")).json()
    assert still["status"] == "awaiting"


NOT_UUID_PATHS = [
    ("GET", "/v1/conversations/123"),
    ("POST", "/v1/conversations/not-a-uuid/messages"),
    ("GET", "/v1/runs/%00"),
    ("GET", "/v1/runs/' OR 1=1 --/tool-calls"),
    ("POST", "/v1/runs/../cancel"),
    ("GET", "/v1/pending/123e4567-e89b-12d3-a456-42661417400"),
    ("POST", "/v1/pending/{}/resolve"),
    ("DELETE", "/v1/authorizations/1"),
    ("DELETE", "/v1/keys/abc"),
]


async def test_ids_that_are_not_uuids_or_unknown_are_404(client: AsyncTestClient[Any]) -> None:
    for method, path in NOT_UUID_PATHS:
        response = await client.request(method, path, json={"decision": "deny"} if method == "POST" else None)
        assert_problem(response, 404, "not_found")
    for path in ("/v1/conversations/{}", "/v1/runs/{}", "/v1/pending/{}"):
        assert_problem(await client.get(path.format(uuid.uuid4())), 404, "not_found")


BAD_QUERIES: list[dict[str, str]] = [
    {"limit": "abc"},
    {"limit": "0"},
    {"limit": "100000"},
    {"status": "weird"},
    {"kind": "nope"},
    {"cursor": "!!!"},
    {"cursor": "MjAyNC0wMS0wMXwxMjM="},
]


async def test_bad_query_parameters_are_422(client: AsyncTestClient[Any]) -> None:
    for params in BAD_QUERIES:
        problem = assert_problem(await client.get("/v1/pending", params=params), 422, "validation_failed")
        assert problem["errors"][0]["loc"][0] == "query", (params, problem)


async def test_resolver_identity_comes_from_the_key(client: AsyncTestClient[Any], keys: KeyMaker) -> None:
    operator = await keys.issue("operator", "default", name="alice")
    pending = await suspended_replay(client)
    with capture_logs(processors=[structlog.contextvars.merge_contextvars]) as logs:
        decided = await client.post(
            f"/v1/pending/{pending['correlation_id']}/resolve",
            json={"decision": "deny", "reason": "not today"},
            headers=bearer(operator.secret),
        )
    [line] = [e for e in logs if e["event"] == "http.request"]
    assert line["principal_id"] == str(operator.key.id)
    assert decided.status_code == 200, decided.text
    assert decided.json()["resolved_by"] == str(operator.key.id)
    audit = (await client.get("/v1/audit", params={"correlation_id": pending["correlation_id"]})).json()[
        "items"
    ]
    denied = [a for a in audit if a["action"] == "pending.denied"]
    assert [a["actor"] for a in denied] == [str(operator.key.id)]


async def test_approval_is_bound_to_the_arguments_shown(client: AsyncTestClient[Any]) -> None:
    pending = await suspended_replay(client)
    cid = pending["correlation_id"]
    wrong = await resolve(client, cid, decision="approve", args_hash="0" * 64)
    problem = assert_problem(wrong, 409, "args_changed")
    assert problem["args_hash"] == pending["args_hash"]
    assert (await client.get(f"/v1/pending/{cid}")).json()["status"] == "awaiting"

    right = await resolve(client, cid, decision="approve", args_hash=pending["args_hash"])
    assert right.status_code == 200
    assert right.json()["status"] == "approved"


async def test_edited_arguments_are_audited_as_edited(client: AsyncTestClient[Any]) -> None:
    pending = await suspended_replay(client)
    edited = {"event_id": "evt_1002", "reason": "the newer one"}
    decided = await resolve(client, pending["correlation_id"], decision="approve", args=edited)
    assert decided.status_code == 200, decided.text
    audit = (await client.get("/v1/audit", params={"action": "pending.approved"})).json()["items"]
    [approved] = audit
    assert approved["correlation_id"] == pending["correlation_id"]
    assert approved["details"]["edited_args"] == edited
    assert approved["details"]["args_hash"] != pending["args_hash"]


async def test_rate_limit_is_per_key_with_retry_after(seeded: str, keys: KeyMaker) -> None:
    first, second = await keys.make("operator"), await keys.make("operator")
    app = create_app(make_settings(seeded, rate_limit_per_minute=3))
    async with AsyncTestClient(app=app) as client:
        for _ in range(3):
            assert (await client.get("/v1/pending", headers=bearer(first))).status_code == 200
        limited = await client.get("/v1/pending", headers=bearer(first))
        problem = assert_problem(limited, 429, "rate_limited")
        assert 1 <= int(limited.headers["retry-after"]) <= 60
        assert problem["retry_after"] == int(limited.headers["retry-after"])
        assert (await client.get("/v1/pending", headers=bearer(second))).status_code == 200
        assert (await client.get("/healthz")).status_code == 200
        for _ in range(3):
            await client.get("/v1/pending", headers={"Authorization": "Bearer abk_guessing-0000000000000000"})
        assert (await client.get("/v1/pending", headers=bearer(second))).status_code == 200


async def test_users_see_summaries_never_the_full_arguments(
    client: AsyncTestClient[Any], keys: KeyMaker
) -> None:
    user, operator = bearer(await keys.make("user")), bearer(await keys.make("operator"))
    cid = await create_conversation(client)
    secret_reason = "card 4111 1111 1111 1111, mail jane.doe@example.com"
    run = await post_message(
        client, cid, script([call("replay_dlq_event", event_id="evt_1001", reason=secret_reason)], "done")
    )
    correlation_id = run["pending"][0]["correlation_id"]

    as_user = (await client.get(f"/v1/pending/{correlation_id}", headers=user)).json()
    assert as_user["args"] is None
    assert as_user["args_summary"] == {"event_id": "evt_1001", "reason": "card [card], mail [email]"}
    as_operator = (await client.get(f"/v1/pending/{correlation_id}", headers=operator)).json()
    assert as_operator["args"] == {"event_id": "evt_1001", "reason": secret_reason}

    async def tool_call_args(headers: dict[str, str]) -> list[Any]:
        detail = (await client.get(f"/v1/conversations/{cid}", headers=headers)).json()
        parts = [p for m in detail["messages"] for p in m["message"]["parts"]]
        return [p["args"] for p in parts if p["part_kind"] == "tool-call"]

    assert await tool_call_args(user) == [{"event_id": "evt_1001", "reason": "card [card], mail [email]"}]
    [full] = await tool_call_args(operator)
    assert secret_reason in str(full)
    busy = await client.post(f"/v1/conversations/{cid}/messages", json={"content": "again"}, headers=user)
    problem = assert_problem(busy, 409, "run_active")
    assert "4111" not in busy.text
    assert problem["pending"][0]["correlation_id"] == correlation_id
    assert "args" not in problem["pending"][0]
