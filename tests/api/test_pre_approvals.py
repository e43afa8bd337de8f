"""Pre-approvals: a covered gated call runs without suspending; anything doubtful is gated."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

from litestar.testing import AsyncTestClient
from structlog.testing import capture_logs

from sursis.app.container import build_container
from sursis.app.main import create_app
from sursis.domain.clock import utcnow
from sursis.domain.records.access_records import Authorization
from sursis.infra.agents.policy import StoredPreApprovalPolicy
from sursis.infra.db.engine import create_engine
from sursis.infra.db.uow import SqlUnitOfWorkFactory
from tests.api.http_calls import create_conversation, post_message, tool_calls
from tests.conftest import KeyMaker, bearer, call, make_settings, script


def replay(event_id: str = "evt_1001") -> str:
    return script([call("replay_dlq_event", event_id=event_id, reason="partner is back")], "done")


async def run_replay(client: AsyncTestClient[Any], event_id: str = "evt_1001") -> Any:
    conversation_id = await create_conversation(client)
    return await post_message(client, conversation_id, replay(event_id))


async def pre_approve(client: AsyncTestClient[Any], **body: Any) -> Any:
    response = await client.post("/v1/authorizations", json={"reason": "partner incident 42", **body})
    assert response.status_code == 201, response.text
    return response.json()


async def auto_approvals(client: AsyncTestClient[Any]) -> list[Any]:
    response = await client.get("/v1/audit", params={"action": "pending.auto_approved"})
    assert response.status_code == 200
    return list(response.json()["items"])


async def store(database_url: str, **fields: Any) -> None:
    """Write an authorization row as it may exist in the table, bypassing the API's checks."""
    engine = create_engine(database_url)
    try:
        async with SqlUnitOfWorkFactory(engine)() as uow:
            values: dict[str, Any] = {
                "id": uuid.uuid4(),
                "workspace": "default",
                "tool_name": "replay_dlq_event",
                "args_match": None,
                "reason": "stored",
                "created_by": "test",
                "created_at": utcnow() - timedelta(days=2),
            }
            values.update(fields)
            await uow.authorizations.add(Authorization(**values))
            await uow.commit()
    finally:
        await engine.dispose()


def assert_gated(run: Any) -> None:
    assert run["status"] == "suspended", run
    [pending] = run["pending"]
    assert pending["kind"] == "approval"
    assert pending["tool_name"] == "replay_dlq_event"


async def test_a_covered_call_runs_without_suspending_and_is_audited(
    client: AsyncTestClient[Any], keys: KeyMaker
) -> None:
    operator = await keys.issue("operator", "default", name="on-call")
    response = await client.post(
        "/v1/authorizations",
        json={"tool_name": "replay_dlq_event", "reason": "partner incident 42"},
        headers=bearer(operator.secret),
    )
    assert response.status_code == 201, response.text
    authorization = response.json()
    assert authorization["workspace"] == "default"
    assert authorization["created_by"] == str(operator.key.id)

    run = await run_replay(client)

    assert run["status"] == "completed", run
    assert run["output"] == "done"
    assert run["pending"] == []
    assert [t["tool_name"] for t in await tool_calls(client, run["id"])] == ["replay_dlq_event"]
    assert (await client.get("/v1/pending", params={"status": "awaiting"})).json()["items"] == []
    [audit] = await auto_approvals(client)
    assert audit["actor"] == f"authorization:{authorization['id']}"
    assert audit["run_id"] == run["id"]
    assert audit["correlation_id"] is None
    assert audit["details"]["authorization_id"] == authorization["id"]
    assert audit["details"]["tool_name"] == "replay_dlq_event"
    assert audit["details"]["args_summary"] == {"event_id": "evt_1001", "reason": "partner is back"}
    assert len(audit["details"]["args_hash"]) == 64


async def test_args_match_covers_only_equal_arguments(client: AsyncTestClient[Any]) -> None:
    authorization = await pre_approve(
        client, tool_name="replay_dlq_event", args_match={"event_id": "evt_1001"}
    )

    assert_gated(await run_replay(client, "evt_1002"))
    covered = await run_replay(client, "evt_1001")
    assert covered["status"] == "completed", covered
    [audit] = await auto_approvals(client)
    assert audit["details"]["authorization_id"] == authorization["id"]


async def test_another_tool_or_workspace_does_not_cover(client: AsyncTestClient[Any]) -> None:
    await pre_approve(client, tool_name="triage_cluster")
    await pre_approve(client, tool_name="replay_dlq_event", workspace="elsewhere")

    assert_gated(await run_replay(client))
    assert await auto_approvals(client) == []


async def test_an_expired_authorization_does_not_cover(
    client: AsyncTestClient[Any], database_url: str
) -> None:
    await store(database_url, expires_at=utcnow() - timedelta(seconds=1))

    assert_gated(await run_replay(client))
    assert await auto_approvals(client) == []
    listed = (await client.get("/v1/authorizations")).json()
    assert listed == []
    assert len((await client.get("/v1/authorizations", params={"include_inactive": True})).json()) == 1


async def test_a_revoked_authorization_does_not_cover(client: AsyncTestClient[Any]) -> None:
    authorization = await pre_approve(client, tool_name="replay_dlq_event")
    revoked = await client.delete(f"/v1/authorizations/{authorization['id']}")
    assert revoked.status_code == 200
    assert revoked.json()["revoked_at"] is not None
    again = await client.delete(f"/v1/authorizations/{authorization['id']}")
    assert again.json()["revoked_at"] == revoked.json()["revoked_at"]

    assert_gated(await run_replay(client))
    assert await auto_approvals(client) == []
    actions = [a["action"] for a in (await client.get("/v1/audit")).json()["items"]]
    assert actions.count("authorization.created") == 1
    assert actions.count("authorization.revoked") == 1


async def test_a_broken_rule_gates_even_next_to_a_covering_one(
    client: AsyncTestClient[Any], database_url: str
) -> None:
    await pre_approve(client, tool_name="replay_dlq_event")
    await store(database_url, args_match=["event_id", "evt_1001"])

    with capture_logs() as logs:
        assert_gated(await run_replay(client))
    assert await auto_approvals(client) == []
    [failure] = [entry for entry in logs if entry["event"] == "pre_approval.unavailable"]
    assert failure["log_level"] == "error"


async def test_a_database_error_in_the_policy_gates_the_call(seeded: str, keys: KeyMaker) -> None:
    admin = await keys.make("admin")
    settings = make_settings(seeded)
    unreachable = create_engine("sqlite+aiosqlite:////nonexistent-directory/sursis.db")
    container = build_container(settings, policy=StoredPreApprovalPolicy(SqlUnitOfWorkFactory(unreachable)))
    try:
        with capture_logs() as logs:
            async with AsyncTestClient(app=create_app(settings, container=container)) as client:
                client.headers.update(bearer(admin))
                await pre_approve(client, tool_name="replay_dlq_event")

                assert_gated(await run_replay(client))
                assert await auto_approvals(client) == []
    finally:
        await unreachable.dispose()
    [failure] = [entry for entry in logs if entry["event"] == "pre_approval.unavailable"]
    assert failure["log_level"] == "error"
    assert failure["tool_name"] == "replay_dlq_event"


async def test_creating_an_authorization_checks_what_it_would_cover(client: AsyncTestClient[Any]) -> None:
    cases = [
        ({"tool_name": "no_such_tool"}, ["tool_name"]),
        ({"tool_name": "list_dlq_events"}, ["tool_name"]),
        ({"tool_name": "replay_dlq_event", "args_match": {"event": "evt_1"}}, ["args_match", "event"]),
        ({"tool_name": "replay_dlq_event", "expires_at": "2001-01-01T00:00:00Z"}, ["expires_at"]),
        ({"tool_name": "replay_dlq_event", "expires_at": "2999-01-01T00:00:00"}, ["expires_at"]),
        ({"tool_name": "replay_dlq_event", "reason": "   "}, ["reason"]),
        (
            {
                "tool_name": "replay_dlq_event",
                "args_match": {"event_id": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]},
            },
            ["args_match"],
        ),
    ]
    for body, loc in cases:
        response = await client.post("/v1/authorizations", json={"reason": "because", **body})
        assert response.status_code == 422, (body, response.text)
        assert loc in [e["loc"] for e in response.json()["errors"]], (body, response.json())
    assert (await client.get("/v1/authorizations")).json() == []
