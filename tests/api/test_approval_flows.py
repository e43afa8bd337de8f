"""The approval flows of the core loop, end to end through the real app and a real database."""

from __future__ import annotations

import json
from typing import Any

from litestar.testing import AsyncTestClient

from sursis.domain.identity.keys import IssuedKey
from tests.api.http_calls import conversation, create_conversation, get_run, post_message, resolve, tool_calls
from tests.conftest import call, script

REPLAY_AFTER_LIST = script(
    [call("list_dlq_events")],
    [call("replay_dlq_event", event_id="evt_1001", reason="partner endpoint is back")],
)


def results_of(output: str) -> list[Any]:
    assert output.startswith("RESULTS: "), output
    return list(json.loads(output.removeprefix("RESULTS: ")))


async def test_read_runs_mutate_suspends_then_approve_completes(
    client: AsyncTestClient[Any], admin_key: IssuedKey
) -> None:
    cid = await create_conversation(client)
    run = await post_message(client, cid, REPLAY_AFTER_LIST)

    assert run["status"] == "suspended"
    [pending] = run["pending"]
    assert pending["kind"] == "approval"
    assert pending["tool_name"] == "replay_dlq_event"
    assert pending["effect_description"] == "Replay DLQ event evt_1001"
    assert pending["args_summary"] == {"event_id": "evt_1001", "reason": "partner endpoint is back"}
    assert [t["tool_name"] for t in await tool_calls(client, run["id"])] == ["list_dlq_events"]

    listed = (await client.get("/v1/pending", params={"status": "awaiting"})).json()
    assert [p["correlation_id"] for p in listed["items"]] == [pending["correlation_id"]]

    decided = await resolve(client, pending["correlation_id"], decision="approve")
    assert decided.status_code == 200
    assert decided.json()["status"] == "approved"
    assert decided.json()["resolved_by"] == str(admin_key.key.id)

    done = await get_run(client, run["id"])
    assert done["status"] == "completed"
    [replayed] = results_of(done["output"])
    assert replayed["ok"] is True
    assert replayed["result"]["event_id"] == "evt_1001"
    assert replayed["result"]["replay_count"] == 1
    executed = [t["tool_name"] for t in await tool_calls(client, run["id"])]
    assert executed == ["list_dlq_events", "replay_dlq_event"]
    assert (await client.get("/v1/pending", params={"status": "awaiting"})).json()["items"] == []


async def test_deny_tells_the_model_and_never_runs_the_tool(client: AsyncTestClient[Any]) -> None:
    cid = await create_conversation(client)
    run = await post_message(client, cid, REPLAY_AFTER_LIST)
    correlation_id = run["pending"][0]["correlation_id"]

    decided = await resolve(client, correlation_id, decision="deny", reason="partner still down")
    assert decided.json()["status"] == "denied"

    done = await get_run(client, run["id"])
    assert done["status"] == "completed"
    [denial] = results_of(done["output"])
    assert denial["ok"] is False
    assert denial["error"]["class"] == "ToolPolicyError"
    assert denial["error"]["code"] == "APPROVAL_DENIED"
    assert "partner still down" in denial["error"]["message"]
    assert [t["tool_name"] for t in await tool_calls(client, run["id"])] == ["list_dlq_events"]


async def test_revise_lets_the_model_propose_a_new_gated_call(client: AsyncTestClient[Any]) -> None:
    cid = await create_conversation(client)
    content = script(
        [call("replay_dlq_event", event_id="evt_1001", reason="retry")],
        [call("replay_dlq_event", event_id="evt_1002", reason="retry the newer one")],
        "replayed the newer event",
    )
    run = await post_message(client, cid, content)
    first = run["pending"][0]

    decided = await resolve(
        client, first["correlation_id"], decision="revise", reason="replay evt_1002 instead"
    )
    assert decided.json()["status"] == "revision_requested"

    again = await get_run(client, run["id"])
    assert again["status"] == "suspended"
    [second] = again["pending"]
    assert second["correlation_id"] != first["correlation_id"]
    assert second["args_summary"]["event_id"] == "evt_1002"
    history = json.dumps((await conversation(client, cid))["messages"])
    assert "REVISION_REQUESTED" in history
    assert "replay evt_1002 instead" in history

    await resolve(client, second["correlation_id"], decision="approve")
    done = await get_run(client, run["id"])
    assert done["status"] == "completed"
    assert done["output"] == "replayed the newer event"
    replays = [t for t in await tool_calls(client, run["id"]) if t["tool_name"] == "replay_dlq_event"]
    assert len(replays) == 1
    assert replays[0]["result"]["result"]["event_id"] == "evt_1002"


async def test_approve_with_edited_args_runs_the_validated_edit(client: AsyncTestClient[Any]) -> None:
    cid = await create_conversation(client)
    run = await post_message(client, cid, REPLAY_AFTER_LIST)
    correlation_id = run["pending"][0]["correlation_id"]

    wrong = await resolve(client, correlation_id, decision="approve", args={"event_id": 1002})
    assert wrong.status_code == 422
    assert wrong.json()["code"] == "validation_failed"
    assert {tuple(e["loc"]) for e in wrong.json()["errors"]} >= {("args", "event_id"), ("args", "reason")}

    edited = {"event_id": "evt_1002", "reason": "operator picked the newer event"}
    decided = await resolve(client, correlation_id, decision="approve", args=edited)
    assert decided.status_code == 200
    assert decided.json()["edited_args"] == edited

    done = await get_run(client, run["id"])
    [replayed] = results_of(done["output"])
    assert replayed["result"]["event_id"] == "evt_1002"
    assert replayed["args_edited_by_operator"] == edited


async def test_ask_operator_is_an_elicitation_answered_by_a_person(client: AsyncTestClient[Any]) -> None:
    cid = await create_conversation(client)
    run = await post_message(client, cid, script([call("ask_operator", question="Which partner is down?")]))
    [pending] = run["pending"]
    assert pending["kind"] == "elicitation"
    assert pending["executor"] == "human"

    wrong = await resolve(client, pending["correlation_id"], decision="approve")
    assert wrong.status_code == 422
    assert wrong.json()["code"] == "invalid_decision"

    answered = await resolve(client, pending["correlation_id"], decision="answer", result="hooks.example.com")
    assert answered.json()["status"] == "answered"
    done = await get_run(client, run["id"])
    assert results_of(done["output"]) == [{"ok": True, "result": "hooks.example.com"}]


async def test_several_gated_calls_resume_once_after_the_last(client: AsyncTestClient[Any]) -> None:
    cid = await create_conversation(client)
    content = script(
        [
            call("list_dlq_events"),
            call("replay_dlq_event", event_id="evt_1001", reason="a"),
            call("replay_dlq_event", event_id="evt_1002", reason="b"),
            call("ask_operator", question="ok to proceed?"),
        ],
        "all handled",
    )
    run = await post_message(client, cid, content)
    assert run["status"] == "suspended"
    assert sorted(p["kind"] for p in run["pending"]) == ["approval", "approval", "elicitation"]
    assert len({p["correlation_id"] for p in run["pending"]}) == 3

    by_kind = sorted(run["pending"], key=lambda p: p["kind"])
    await resolve(client, by_kind[0]["correlation_id"], decision="approve")
    assert (await get_run(client, run["id"], wait=0))["status"] == "suspended"
    await resolve(client, by_kind[1]["correlation_id"], decision="deny", reason="not this one")
    still = await get_run(client, run["id"], wait=0)
    assert still["status"] == "suspended"
    assert [p["kind"] for p in still["pending"]] == ["elicitation"]
    await resolve(client, by_kind[2]["correlation_id"], decision="answer", result="yes")

    done = await get_run(client, run["id"])
    assert done["status"] == "completed"
    assert done["output"] == "all handled"
    executed = [t["tool_name"] for t in await tool_calls(client, run["id"])]
    assert executed.count("list_dlq_events") == 1
    assert executed.count("replay_dlq_event") == 1
