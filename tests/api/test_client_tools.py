"""Client tools: run in the caller's browser, answered by the conversation's user, on both databases."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from sursis.infra.db import tables
from sursis.infra.db.engine import create_engine
from tests.api.conftest import LiveFactory
from tests.api.http_calls import create_conversation, get_run, post_message, resolve
from tests.api.live import EventStream, is_event
from tests.conftest import KeyMaker, bearer, call, eventually, script

LOCATION = {"latitude": 52.52, "longitude": 13.405, "accuracy_m": 25.0}


def results_of(output: str) -> list[Any]:
    assert output.startswith("RESULTS: "), output
    return list(json.loads(output.removeprefix("RESULTS: ")))


async def test_client_tool_is_answered_by_the_subscribed_client(live: LiveFactory) -> None:
    async with live() as app:
        cid = await create_conversation(app.http, agent="assistant")  # type: ignore[arg-type]
        async with EventStream(app.http, cid) as browser:
            run = await post_message(app.http, cid, script([call("get_browser_location")]))  # type: ignore[arg-type]
            [created] = [
                e
                for e in await browser.until(is_event("run.status", "suspended"))
                if e.event == "pending.created"
            ]
            assert created.data["data"]["kind"] == "client_exec"
            assert created.data["data"]["executor"] == "client"
            answered = await resolve(  # type: ignore[arg-type]
                app.http, created.data["data"]["correlation_id"], decision="answer", result=LOCATION
            )
            assert answered.status_code == 200, answered.text
            assert answered.json()["status"] == "answered"
            await browser.until(is_event("run.completed"))
        done = await get_run(app.http, run["id"])  # type: ignore[arg-type]
    assert run["status"] == "suspended"
    assert done["status"] == "completed"
    assert results_of(done["output"]) == [{"ok": True, "result": LOCATION}]


async def test_untrusted_result_is_rejected_with_field_errors(client: AsyncTestClient[Any]) -> None:
    cid = await create_conversation(client, agent="assistant")
    run = await post_message(client, cid, script([call("get_browser_location")]))
    [pending] = run["pending"]

    wrong = await resolve(
        client, pending["correlation_id"], decision="answer", result={"latitude": 200, "longitude": "east"}
    )
    assert wrong.status_code == 422
    assert wrong.json()["code"] == "validation_failed"
    assert {tuple(e["loc"]) for e in wrong.json()["errors"]} == {
        ("result", "latitude"),
        ("result", "longitude"),
        ("result", "accuracy_m"),
    }
    still = await client.get(f"/v1/pending/{pending['correlation_id']}")
    assert still.json()["status"] == "awaiting"

    coerced = {"latitude": "52.52", "longitude": 13.405, "accuracy_m": 25}
    answered = await resolve(client, pending["correlation_id"], decision="answer", result=coerced)
    assert answered.status_code == 200
    assert answered.json()["result"] == LOCATION
    done = await get_run(client, run["id"])
    assert results_of(done["output"]) == [{"ok": True, "result": LOCATION}]


async def test_client_call_expires_without_a_subscriber_and_lives_with_one(live: LiveFactory) -> None:
    # A grace of 1.5 s: the stream extends the call every 0.5 s, so a stream loop held up for up
    # to a second by a busy machine still keeps it (a shorter grace made this test flaky there).
    async with live(client_exec_timeout_seconds=1.5, sweep_seconds=0.1) as app:
        cid = await create_conversation(app.http, agent="assistant")  # type: ignore[arg-type]
        async with EventStream(app.http, cid) as browser:
            run = await post_message(app.http, cid, script([call("get_browser_location")]))  # type: ignore[arg-type]
            [pending] = run["pending"]
            await asyncio.sleep(4.5)  # three times the grace, with a subscriber connected
            kept = (await app.http.get(f"/v1/pending/{pending['correlation_id']}")).json()
            assert kept["status"] == "awaiting"
            # The subscriber was told of the call, and of nothing resolving it.
            seen = await browser.until(is_event("run.status", "suspended"))
            created = [e.data["data"]["correlation_id"] for e in seen if e.event == "pending.created"]
            assert created == [pending["correlation_id"]]
            assert [e for e in seen if e.event == "pending.resolved"] == []

        # The subscriber left: the call expires after the grace and the model is told.
        async def finished() -> Any:
            current = await get_run(app.http, run["id"], wait=0)  # type: ignore[arg-type]
            return current if current["status"] == "completed" else None

        done = await eventually(finished)
        expired = (await app.http.get(f"/v1/pending/{pending['correlation_id']}")).json()

    assert expired["status"] == "expired"
    assert expired["resolved_by"] == "system:sweeper"
    assert done["status"] == "completed"
    [failure] = results_of(done["output"])
    assert failure["ok"] is False
    assert failure["error"]["class"] == "ToolPolicyError"
    assert failure["error"]["code"] == "CLIENT_UNAVAILABLE"


async def test_gated_client_tool_suspends_for_approval_then_for_the_client(live: LiveFactory) -> None:
    async with live() as app:
        cid = await create_conversation(app.http, agent="assistant")  # type: ignore[arg-type]
        content = script([call("open_link_in_browser", url="https://example.com/help", reason="the docs")])
        async with EventStream(app.http, cid) as browser:
            run = await post_message(app.http, cid, content)  # type: ignore[arg-type]
            [approval] = run["pending"]
            assert (approval["kind"], approval["executor"]) == ("approval", "client")
            assert approval["effect_description"] == "Open https://example.com/help in the user's browser"

            not_yet = await resolve(app.http, approval["correlation_id"], decision="answer", result={})  # type: ignore[arg-type]
            assert not_yet.status_code == 422
            assert not_yet.json()["code"] == "invalid_decision"

            await resolve(app.http, approval["correlation_id"], decision="approve")  # type: ignore[arg-type]
            again = await get_run(app.http, run["id"])  # type: ignore[arg-type]
            assert again["status"] == "suspended"
            [execution] = again["pending"]
            assert execution["kind"] == "client_exec"
            assert execution["tool_call_id"] == approval["tool_call_id"]
            assert execution["correlation_id"] != approval["correlation_id"]

            answered = await resolve(  # type: ignore[arg-type]
                app.http, execution["correlation_id"], decision="answer", result={"opened": True}
            )
            assert answered.status_code == 200
            events = await browser.until(is_event("run.completed"))
        done = await get_run(app.http, run["id"])  # type: ignore[arg-type]

    assert done["status"] == "completed"
    assert results_of(done["output"]) == [{"ok": True, "result": {"opened": True, "note": None}}]
    pending_events = [
        (e.event, e.data["data"]["kind"], e.data["data"].get("status"))
        for e in events
        if e.event in ("pending.created", "pending.resolved")
    ]
    assert pending_events == [
        ("pending.created", "approval", None),
        ("pending.resolved", "approval", "approved"),
        ("pending.created", "client_exec", None),
        ("pending.resolved", "client_exec", "answered"),
    ]


async def test_with_two_subscribers_the_second_answer_is_stale(live: LiveFactory) -> None:
    async with live() as app:
        cid = await create_conversation(app.http, agent="assistant")  # type: ignore[arg-type]
        async with EventStream(app.http, cid) as tab_a, EventStream(app.http, cid) as tab_b:
            await post_message(app.http, cid, script([call("get_browser_location")]), wait=0)  # type: ignore[arg-type]
            seen_a = (await tab_a.until(is_event("pending.created")))[-1]
            seen_b = (await tab_b.until(is_event("pending.created")))[-1]
            correlation_id = seen_a.data["data"]["correlation_id"]
            assert seen_b.data["data"]["correlation_id"] == correlation_id

            first = await resolve(app.http, correlation_id, decision="answer", result=LOCATION)  # type: ignore[arg-type]
            second = await resolve(  # type: ignore[arg-type]
                app.http, correlation_id, decision="answer", result={**LOCATION, "accuracy_m": 5.0}
            )
    assert first.status_code == 200
    assert second.status_code == 409
    assert second.json()["code"] == "stale"
    assert second.json()["pending_status"] == "answered"


QUESTIONS: dict[str, tuple[str, dict[str, Any], Any]] = {
    "client_exec": ("assistant", call("get_browser_location"), LOCATION),
    "elicitation": ("ops", call("ask_operator", question="Which partner is down?"), "hooks.example.com"),
}


async def suspend_as(
    client: AsyncTestClient[Any], caller: dict[str, str], kind: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A conversation the caller created, and its run suspended on one call of `kind`."""
    agent, tool_call, _ = QUESTIONS[kind]
    created = await client.post("/v1/conversations", json={"agent": agent}, headers=caller)
    assert created.status_code == 201, created.text
    posted = await client.post(
        f"/v1/conversations/{created.json()['id']}/messages",
        params={"wait": 10},
        json={"content": script([tool_call])},
        headers=caller,
    )
    run = posted.json()
    assert run["status"] == "suspended", run
    assert [p["kind"] for p in run["pending"]] == [kind]
    return created.json(), run


@pytest.mark.parametrize("kind", QUESTIONS)
async def test_only_the_user_who_created_the_conversation_answers_its_calls(
    client: AsyncTestClient[Any], keys: KeyMaker, kind: str
) -> None:
    alice_key = await keys.issue("user", "default", name="alice")
    alice, bob = bearer(alice_key.secret), bearer(await keys.make("user", "default", name="bob"))
    conversation, run = await suspend_as(client, alice, kind)
    assert conversation["created_by"] == str(alice_key.key.id)
    correlation_id = run["pending"][0]["correlation_id"]
    answer = QUESTIONS[kind][2]

    refused = await client.post(
        f"/v1/pending/{correlation_id}/resolve", json={"decision": "answer", "result": answer}, headers=bob
    )
    assert refused.status_code == 403, refused.text
    assert refused.json()["code"] == "forbidden"
    assert refused.json()["required"] == "answer_any"
    seen_by_bob = await client.get(f"/v1/pending/{correlation_id}", headers=bob)
    assert seen_by_bob.json()["status"] == "awaiting"

    answered = await client.post(
        f"/v1/pending/{correlation_id}/resolve", json={"decision": "answer", "result": answer}, headers=alice
    )
    assert answered.status_code == 200, answered.text
    assert answered.json()["status"] == "answered"
    assert answered.json()["resolved_by"] == str(alice_key.key.id)
    done = await get_run(client, run["id"])
    assert done["status"] == "completed"
    assert results_of(done["output"]) == [{"ok": True, "result": answer}]
    read_by_bob = await client.get(f"/v1/conversations/{conversation['id']}", headers=bob)
    assert read_by_bob.json()["created_by"] == str(alice_key.key.id)


async def test_a_conversation_without_an_owner_is_answered_by_operators_only(
    client: AsyncTestClient[Any], keys: KeyMaker, database_url: str
) -> None:
    alice = bearer(await keys.make("user", "default", name="alice"))
    operator = bearer(await keys.make("operator", "default", name="olga"))
    conversation, run = await suspend_as(client, alice, "client_exec")
    conversation_id = uuid.UUID(conversation["id"])
    engine = create_engine(database_url)
    try:
        async with engine.begin() as connection:
            stored = await connection.scalar(
                tables.conversations.select()
                .with_only_columns(tables.conversations.c.created_by)
                .where(tables.conversations.c.id == conversation_id)
            )
            assert stored == conversation["created_by"]
            await connection.execute(
                tables.conversations.update()
                .where(tables.conversations.c.id == conversation_id)
                .values(created_by=None)
            )
    finally:
        await engine.dispose()
    correlation_id = run["pending"][0]["correlation_id"]
    assert (await client.get(f"/v1/conversations/{conversation['id']}")).json()["created_by"] is None

    body = {"decision": "answer", "result": LOCATION}
    refused = await client.post(f"/v1/pending/{correlation_id}/resolve", json=body, headers=alice)
    assert refused.status_code == 403
    answered = await client.post(f"/v1/pending/{correlation_id}/resolve", json=body, headers=operator)
    assert answered.status_code == 200, answered.text
    assert (await get_run(client, run["id"]))["status"] == "completed"
