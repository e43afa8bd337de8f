"""Hostile and careless input: every answer is a 4xx problem with field errors, never a 5xx."""

from __future__ import annotations

import base64
import secrets
import uuid
from typing import Any

import sqlalchemy as sa
import structlog
from litestar.testing import AsyncTestClient
from structlog.testing import capture_logs

from sursis.app.main import create_app
from sursis.infra.db.engine import create_engine, is_sqlite
from tests.api.conftest import LiveFactory
from tests.api.http_calls import create_conversation, post_message, resolve
from tests.api.live import EventStream
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
            await client.get("/v1/pending", headers={"Authorization": "Bearer srs_guessing-0000000000000000"})
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
    # The card number as written or as digits, and the address (a bare "4111" may be part of an id).
    for secret in ("4111 1111", "4111111111111111", "jane.doe"):
        assert secret not in busy.text
    assert problem["pending"][0]["correlation_id"] == correlation_id
    assert "args" not in problem["pending"][0]


async def test_a_mistyped_stream_choice_is_422_and_queues_nothing(client: AsyncTestClient[Any]) -> None:
    """`stream` is a boolean (read as the API's other booleans are: `true`/`false`, or pydantic's
    boolean spellings such as `"false"` and `0`): anything else is refused before anything is stored."""
    cid = await create_conversation(client)
    for value in ("maybe", "", 2, -1, 0.5, None, [], {"on": True}):
        response = await client.post(
            f"/v1/conversations/{cid}/messages", json={"content": "hi", "stream": value}
        )
        problem = assert_problem(response, 422, "validation_failed")
        assert ["stream"] in [e["loc"] for e in problem["errors"]], (value, problem)
    conversation = (await client.get(f"/v1/conversations/{cid}")).json()
    assert conversation["messages"] == []
    assert conversation["active_run_id"] is None
    accepted = await client.post(f"/v1/conversations/{cid}/messages", json={"content": "hi", "stream": False})
    assert accepted.status_code == 202, accepted.text


async def test_nul_characters_anywhere_in_a_body_are_422_with_field_errors(
    client: AsyncTestClient[Any],
) -> None:
    """PostgreSQL cannot store a NUL character; it is refused up front on both databases."""
    cid = await create_conversation(client)
    message = await client.post(f"/v1/conversations/{cid}/messages", json={"content": "hi\u0000"})
    assert assert_problem(message, 422, "validation_failed")["errors"] == [
        {"loc": ["content"], "msg": "must not contain a NUL character"}
    ]
    conversation = (await client.get(f"/v1/conversations/{cid}")).json()
    assert conversation["messages"] == []
    assert conversation["active_run_id"] is None

    bodies: list[tuple[str, dict[str, Any], list[list[str]]]] = [
        (
            "/v1/authorizations",
            {"tool_name": "replay_dlq_event", "reason": "ok", "args_match": {"event_id": "evt\u0000"}},
            [["args_match", "event_id"]],
        ),
        (
            "/v1/authorizations",
            {"tool_name": "replay_dlq_event", "reason": "ok", "args_match": {"event\u0000id": "x"}},
            [["args_match", "event\\u0000id"]],
        ),
        (
            "/v1/webhooks",
            {"url": "https://hooks.example.com/\u0000", "events": ["run.completed", "run\u0000"]},
            [["url"], ["events", "1"]],
        ),
        ("/v1/conversations", {"agent": "ops\u0000"}, [["agent"]]),
    ]
    for path, body, locs in bodies:
        problem = assert_problem(await client.post(path, json=body), 422, "validation_failed")
        assert [e["loc"] for e in problem["errors"]] == locs, (path, problem)
    assert (await client.get("/v1/authorizations")).json() == []
    assert (await client.get("/v1/webhooks")).json() == []

    pending = await suspended_replay(client)
    resolutions: list[tuple[dict[str, Any], list[str]]] = [
        ({"decision": "deny", "reason": "no\u0000"}, ["reason"]),
        ({"decision": "approve", "args": {"event_id": "evt_1002", "reason": "\u0000"}}, ["args", "reason"]),
        ({"decision": "answer", "result": {"rows": [1, "\u0000"]}}, ["result", "rows", "1"]),
    ]
    for body, loc in resolutions:
        problem = assert_problem(
            await resolve(client, pending["correlation_id"], **body), 422, "validation_failed"
        )
        assert [e["loc"] for e in problem["errors"]] == [loc], (body, problem)
    assert (await client.get(f"/v1/pending/{pending['correlation_id']}")).json()["status"] == "awaiting"

    for path, params in (("/v1/pending", {"tool_name": "x\u0000"}), ("/v1/audit", {"action": "x\u0000"})):
        problem = assert_problem(await client.get(path, params=params), 422, "validation_failed")
        assert problem["errors"][0]["loc"] == ["query", next(iter(params))], problem


REFUSING_TRIGGER_PG = """
CREATE FUNCTION test_refuse_conversations() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'refused by the test' USING ERRCODE = TG_ARGV[0]; END $$
"""

# SQLSTATE raised while a conversation is inserted -> what the client gets.
REFUSALS = [
    ("23505", 409, "conflict"),
    ("22001", 422, "validation_failed"),
    ("22021", 422, "validation_failed"),
    ("42501", 500, "internal_error"),
    ("57P03", 503, "database_unavailable"),
]


async def test_a_refused_statement_is_not_reported_as_the_database_being_unavailable(
    client: AsyncTestClient[Any], database_url: str
) -> None:
    engine = create_engine(database_url)
    try:
        if is_sqlite(database_url):
            async with engine.begin() as conn:
                await conn.execute(
                    sa.text(
                        "CREATE TRIGGER test_refuse BEFORE INSERT ON conversations "
                        "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
                    )
                )
            refused = await client.post("/v1/conversations", json={"agent": "ops"})
            assert_problem(refused, 409, "conflict")
            return
        async with engine.begin() as conn:
            await conn.execute(sa.text(REFUSING_TRIGGER_PG))
        for sqlstate, status, code in REFUSALS:
            async with engine.begin() as conn:
                await conn.execute(
                    sa.text(
                        "CREATE TRIGGER test_refuse BEFORE INSERT ON conversations FOR EACH ROW "
                        f"EXECUTE FUNCTION test_refuse_conversations('{sqlstate}')"
                    )
                )
            try:
                refused = await client.post("/v1/conversations", json={"agent": "ops"})
                assert_problem(refused, status, code)
            finally:
                async with engine.begin() as conn:
                    await conn.execute(sa.text("DROP TRIGGER test_refuse ON conversations"))
    finally:
        async with engine.begin() as conn:
            if is_sqlite(database_url):
                await conn.execute(sa.text("DROP TRIGGER IF EXISTS test_refuse"))
            else:
                await conn.execute(sa.text("DROP FUNCTION IF EXISTS test_refuse_conversations CASCADE"))
        await engine.dispose()
    assert (await client.post("/v1/conversations", json={"agent": "ops"})).status_code == 201


def b64(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode()


OUT_OF_RANGE: list[tuple[str, dict[str, str], str]] = [
    ("/v1/audit", {"cursor": b64("audit|" + "9" * 30)}, "cursor"),
    ("/v1/audit", {"cursor": b64(f"audit|{2**31}")}, "cursor"),
    ("/v1/audit", {"cursor": b64(f"audit|{2**63}")}, "cursor"),
    ("/v1/audit", {"cursor": b64("audit|-1")}, "cursor"),
    ("/v1/audit", {"cursor": b64("audit|" + "9" * 5000)}, "cursor"),
    ("/v1/audit", {"since": "0001-01-01T00:00:00+14:00"}, "since"),
    ("/v1/audit", {"since": "9999-12-31T23:59:59-14:00"}, "since"),
    ("/v1/pending", {"cursor": b64(f"0001-01-01T00:00:00+14:00|{uuid.uuid4()}")}, "cursor"),
    ("/v1/pending", {"cursor": b64(f"9999-12-31T23:59:59-14:00|{uuid.uuid4()}")}, "cursor"),
]


async def test_out_of_range_cursors_and_times_are_422(client: AsyncTestClient[Any]) -> None:
    for path, params, name in OUT_OF_RANGE:
        problem = assert_problem(await client.get(path, params=params), 422, "validation_failed")
        assert problem["errors"][0]["loc"] == ["query", name], (path, params, problem)
    largest = b64(f"audit|{2**31 - 1}")
    assert (await client.get("/v1/audit", params={"cursor": largest})).json()["items"] == []
    for expires_at in ("9999-12-31T23:59:59-14:00", "0001-01-01T00:00:00+14:00"):
        body = {"tool_name": "replay_dlq_event", "reason": "ok", "expires_at": expires_at}
        problem = assert_problem(await client.post("/v1/authorizations", json=body), 422, "validation_failed")
        assert ["expires_at"] in [e["loc"] for e in problem["errors"]], problem


async def test_out_of_range_resume_ids_are_422_before_a_stream_starts(live: LiveFactory) -> None:
    too_big = str(2**31)
    async with live(events_heartbeat_seconds=0.2) as app:
        cid = await create_conversation(app.http)  # type: ignore[arg-type]
        requests: list[tuple[str, dict[str, str], dict[str, str], list[str]]] = [
            (f"/v1/conversations/{cid}/events", {"Last-Event-ID": too_big}, {}, ["header", "Last-Event-ID"]),
            (
                f"/v1/conversations/{cid}/events",
                {"Last-Event-ID": "9" * 5000},
                {},
                ["header", "Last-Event-ID"],
            ),
            (f"/v1/conversations/{cid}/events", {}, {"after": too_big}, ["query", "after"]),
            ("/v1/pending/events", {"Last-Event-ID": too_big}, {}, ["header", "Last-Event-ID"]),
            ("/v1/pending/events", {}, {"after": too_big}, ["query", "after"]),
        ]
        for path, headers, params, loc in requests:
            async with app.http.stream("GET", path, headers=headers, params=params, timeout=5) as response:
                assert response.status_code == 422, (path, headers, params)
                await response.aread()
                problem = assert_problem(response, 422, "validation_failed")
                assert problem["errors"][0]["loc"] == loc, (path, headers, params, problem)
        # The largest id is accepted, and the stream keeps going past its first read.
        for stream in (
            EventStream(app.http, cid, last_event_id=2**31 - 1),
            EventStream(app.http, path="/v1/pending/events", after=2**31 - 1),
        ):
            async with stream:
                assert (await stream.next_message(within=5)).comment == "connected"
                assert (await stream.next_message(within=5)).comment == "keep-alive"


async def test_made_up_keys_are_limited_per_address_before_any_lookup(seeded: str, keys: KeyMaker) -> None:
    known, unseen = await keys.make("operator"), await keys.make("operator")
    app = create_app(make_settings(seeded, rate_limit_per_minute=3))
    async with AsyncTestClient(app=app) as client:
        assert (await client.get("/v1/pending", headers=bearer(known))).status_code == 200
        for _ in range(3):
            guess = bearer("srs_" + secrets.token_urlsafe(32))
            assert_problem(await client.get("/v1/pending", headers=guess), 401, "unauthenticated")
        flooded = await client.get("/v1/pending", headers=bearer("srs_" + secrets.token_urlsafe(32)))
        problem = assert_problem(flooded, 429, "rate_limited")
        assert 1 <= int(flooded.headers["retry-after"]) <= 60
        assert problem["retry_after"] == int(flooded.headers["retry-after"])
        assert_problem(await client.get("/v1/pending"), 429, "rate_limited")
        # A key that authenticated from here before still gets through; one never seen waits with the flood.
        assert (await client.get("/v1/pending", headers=bearer(known))).status_code == 200
        assert_problem(await client.get("/v1/pending", headers=bearer(unseen)), 429, "rate_limited")
