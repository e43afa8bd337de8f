"""Conflicts, cancellation, restarts, races and the step limit, through the real app."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import timedelta
from typing import Any

from litestar.testing import AsyncTestClient
from sqlalchemy.exc import TimeoutError as PoolTimeout

from sursis.app.container import build_container
from sursis.app.main import create_app
from sursis.domain.clock import utcnow
from sursis.domain.identity.keys import IssuedKey
from sursis.infra.db.tables import pending_calls
from tests.api.http_calls import conversation, create_conversation, get_run, post_message, resolve, tool_calls
from tests.conftest import admin_headers, call, make_settings, script

GATED = script([call("replay_dlq_event", event_id="evt_1001", reason="retry")], "done")


async def test_second_resolve_is_stale_unknown_is_404_and_wrong_decision_422(
    client: AsyncTestClient[Any], admin_key: IssuedKey
) -> None:
    cid = await create_conversation(client)
    run = await post_message(client, cid, GATED)
    correlation_id = run["pending"][0]["correlation_id"]

    misfit = await resolve(client, correlation_id, decision="answer", result="x")
    assert misfit.status_code == 422
    assert misfit.json()["code"] == "invalid_decision"
    assert misfit.headers["content-type"].startswith("application/problem+json")

    assert (await resolve(client, correlation_id, decision="approve")).status_code == 200
    again = await resolve(client, correlation_id, decision="deny", reason="too late")
    assert again.status_code == 409
    assert again.json()["code"] == "stale"
    assert again.json()["pending_status"] == "approved"
    assert again.json()["resolved_by"] == str(admin_key.key.id)

    unknown = await resolve(client, str(uuid.uuid4()), decision="approve")
    assert unknown.status_code == 404
    assert unknown.json()["code"] == "not_found"
    assert (
        await client.post("/v1/pending/not-a-uuid/resolve", json={"decision": "approve"})
    ).status_code == 404
    unknown_decision = await resolve(client, correlation_id, decision="maybe")
    assert unknown_decision.status_code == 422
    assert unknown_decision.json()["code"] == "validation_failed"


async def test_message_while_suspended_is_run_active_and_cancel_frees_the_conversation(
    client: AsyncTestClient[Any],
) -> None:
    cid = await create_conversation(client)
    run = await post_message(client, cid, GATED)
    correlation_id = run["pending"][0]["correlation_id"]

    busy = await client.post(f"/v1/conversations/{cid}/messages", json={"content": "hello?"})
    assert busy.status_code == 409
    assert busy.json()["code"] == "run_active"
    assert busy.json()["run_id"] == run["id"]
    assert [p["correlation_id"] for p in busy.json()["pending"]] == [correlation_id]

    cancelled = await client.post(f"/v1/runs/{run['id']}/cancel")
    assert cancelled.status_code == 200
    assert cancelled.json()["status"] == "cancelled"
    pending = (await client.get(f"/v1/pending/{correlation_id}")).json()
    assert pending["status"] == "cancelled"
    assert (await resolve(client, correlation_id, decision="approve")).status_code == 409
    assert (await client.post(f"/v1/runs/{run['id']}/cancel")).status_code == 409

    follow_up = await post_message(client, cid, "what happened?")
    assert follow_up["status"] == "completed"
    told = json.loads(follow_up["output"].removeprefix("RESULTS: "))
    assert told[0]["error"]["code"] == "CANCELLED"
    assert [t["tool_name"] for t in await tool_calls(client, run["id"])] == []
    assert (await conversation(client, cid))["active_run"] is None


async def test_restart_keeps_the_pending_call_and_approval_completes_the_run(seeded: str) -> None:
    headers = await admin_headers(seeded)
    async with AsyncTestClient(app=create_app(make_settings(seeded))) as first:
        first.headers.update(headers)
        cid = await create_conversation(first)
        run = await post_message(first, cid, GATED)
        correlation_id = run["pending"][0]["correlation_id"]

    async with AsyncTestClient(app=create_app(make_settings(seeded))) as second:
        second.headers.update(headers)
        assert (await second.get(f"/v1/pending/{correlation_id}")).json()["status"] == "awaiting"
        detail = await conversation(second, cid)
        assert detail["active_run"]["id"] == run["id"]
        assert detail["active_run"]["status"] == "suspended"
        assert (await resolve(second, correlation_id, decision="approve")).status_code == 200
        done = await get_run(second, run["id"])
        assert done["status"] == "completed"
        assert done["output"] == "done"
        assert [t["tool_name"] for t in await tool_calls(second, run["id"])] == ["replay_dlq_event"]


async def test_concurrent_double_approve_has_exactly_one_winner(client: AsyncTestClient[Any]) -> None:
    cid = await create_conversation(client)
    run = await post_message(client, cid, GATED)
    correlation_id = run["pending"][0]["correlation_id"]

    responses = await asyncio.gather(
        *(resolve(client, correlation_id, decision="approve") for _ in range(8)),
        *(resolve(client, correlation_id, decision="deny", reason="no") for _ in range(4)),
    )
    codes = sorted(r.status_code for r in responses)
    assert codes == [200] + [409] * 11
    assert all(r.json()["code"] == "stale" for r in responses if r.status_code == 409)
    done = await get_run(client, run["id"])
    assert done["status"] == "completed"
    assert len([t for t in await tool_calls(client, run["id"]) if t["tool_name"] == "replay_dlq_event"]) <= 1


async def test_step_limit_fails_the_run_and_the_conversation_stays_usable(seeded: str) -> None:
    app = create_app(make_settings(seeded, step_limit=3))
    async with AsyncTestClient(app=app) as client:
        client.headers.update(await admin_headers(seeded))
        cid = await create_conversation(client)
        looping = script(*[[call("list_dlq_events")] for _ in range(10)])
        run = await post_message(client, cid, looping)
        assert run["status"] == "failed"
        assert run["error"]["code"] == "step_limit"
        assert run["usage"]["requests"] == 3

        after = await post_message(client, cid, "are you still there?")
        assert after["status"] == "completed"


async def test_tool_errors_reach_the_model_as_tool_messages(client: AsyncTestClient[Any]) -> None:
    cid = await create_conversation(client)
    run = await post_message(client, cid, script([call("get_dlq_event_detail", event_id="evt_missing")]))
    assert run["status"] == "completed"
    [error] = json.loads(run["output"].removeprefix("RESULTS: "))
    assert error == {
        "ok": False,
        "error": {
            "class": "ToolUserError",
            "code": "INVALID_INPUT",
            "message": "no dead-lettered event 'evt_missing'",
        },
    }
    [record] = await tool_calls(client, run["id"])
    assert record["ok"] is False
    assert record["error_class"] == "ToolUserError"


async def test_bad_requests_are_problem_responses(client: AsyncTestClient[Any]) -> None:
    unknown_agent = await client.post("/v1/conversations", json={"agent": "nobody"})
    assert unknown_agent.status_code == 422
    assert unknown_agent.json()["code"] == "validation_failed"
    malformed = await client.post(
        "/v1/conversations", content=b"{not json", headers={"content-type": "application/json"}
    )
    assert malformed.status_code in (400, 422)
    assert "code" in malformed.json()
    cid = await create_conversation(client)
    empty = await client.post(f"/v1/conversations/{cid}/messages", json={"content": ""})
    assert empty.status_code == 422
    assert (await client.get(f"/v1/conversations/{uuid.uuid4()}")).status_code == 404
    assert (await client.get(f"/v1/runs/{uuid.uuid4()}")).status_code == 404
    assert (await client.get("/v1/runs/12")).status_code == 404
    assert (await client.get("/v1/pending", params={"cursor": "garbage"})).status_code == 422
    too_big = await client.post(f"/v1/conversations/{cid}/messages", json={"content": "x" * 2_000_000})
    assert too_big.status_code == 413
    assert too_big.json()["code"] == "body_too_large"


async def test_an_overdue_approval_is_stale_before_any_sweeper_ran(seeded: str) -> None:
    """`serve --no-worker` with no worker up: nothing sweeps, yet a late approval is refused."""
    worker = build_container(make_settings(seeded))  # a worker driven by hand: no sweeper runs
    try:
        async with AsyncTestClient(app=create_app(make_settings(seeded, run_worker=False))) as client:
            client.headers.update(await admin_headers(seeded))
            cid = await create_conversation(client)
            content = script([call("replay_dlq_event", event_id="evt_1001", reason="retry")])
            run = await post_message(client, cid, content, wait=0)
            assert await worker.worker.run_once()
            [pending] = (await get_run(client, run["id"], wait=0))["pending"]
            async with worker.uow() as uow:
                await uow.session.execute(
                    pending_calls.update()
                    .where(pending_calls.c.correlation_id == uuid.UUID(pending["correlation_id"]))
                    .values(expires_at=utcnow() - timedelta(seconds=1))
                )
                await uow.commit()

            late = await resolve(client, pending["correlation_id"], decision="approve")
            assert late.status_code == 409
            assert late.json()["code"] == "stale"
            assert "expired" in late.json()["detail"]
            assert late.json()["pending_status"] == "expired"
            assert late.json()["resolved_by"] == "system:sweeper"
            again = await resolve(client, pending["correlation_id"], decision="deny", reason="late")
            assert again.status_code == 409
            assert again.json()["pending_status"] == "expired"

            assert (await get_run(client, run["id"], wait=0))["status"] == "queued"
            assert await worker.worker.run_once()
            done = await get_run(client, run["id"], wait=0)
            assert done["status"] == "completed"
            [told] = json.loads(done["output"].removeprefix("RESULTS: "))
            assert told["error"]["code"] == "APPROVAL_EXPIRED"
            assert await tool_calls(client, run["id"]) == []
    finally:
        await worker.close()


async def test_a_committed_message_is_accepted_even_if_the_wait_cannot_read_the_database(seeded: str) -> None:
    """The pool runs dry right after the message commits: the client learns that its message was
    accepted (202, the queued run), not a 503 whose retry would only meet `run_active`."""
    settings = make_settings(seeded, run_worker=False)
    container = build_container(settings)

    async def pool_exhausted(*_: Any, **__: Any) -> Any:
        raise PoolTimeout("QueuePool limit of size 10 overflow 10 reached, connection timed out")

    container.runs.wait_for_run = pool_exhausted  # type: ignore[method-assign]
    async with AsyncTestClient(app=create_app(settings, container=container)) as client:
        client.headers.update(await admin_headers(seeded))
        cid = await create_conversation(client)
        accepted = await client.post(
            f"/v1/conversations/{cid}/messages", params={"wait": 5}, json={"content": "hello"}
        )
        assert accepted.status_code == 202
        assert accepted.json()["status"] == "queued"
        again = await client.post(f"/v1/conversations/{cid}/messages", json={"content": "hello again"})
        assert again.status_code == 409
        assert again.json()["code"] == "run_active"
        assert again.json()["run_id"] == accepted.json()["id"]
