"""An AG-UI front end drives a hosted agent: a turn, its interrupt, a resume (real app, both databases)."""

from __future__ import annotations

import uuid
from typing import Any

from litestar.testing import AsyncTestClient

from tests.ag_ui.helpers import REPLAY, ag_ui, approve, deny, run_input


async def test_a_turn_ends_in_an_interrupt_and_an_approval_resumes_it(client: AsyncTestClient[Any]) -> None:
    thread = f"thread-{uuid.uuid4()}"
    first = await ag_ui(client, run_input(thread, REPLAY))

    types = [e["type"] for e in first]
    assert types[0] == "RUN_STARTED" and types[-1] == "RUN_FINISHED", types
    assert [t for t in types if t.startswith("TOOL_CALL")] == [
        "TOOL_CALL_START",
        "TOOL_CALL_ARGS",
        "TOOL_CALL_END",
    ]
    outcome = first[-1]["outcome"]
    assert outcome["type"] == "interrupt"
    [interrupt] = outcome["interrupts"]
    start = next(e for e in first if e["type"] == "TOOL_CALL_START")
    assert (interrupt["reason"], interrupt["toolCallId"]) == ("tool_call", start["toolCallId"])
    assert interrupt["responseSchema"]["required"] == ["approved"]
    assert interrupt["metadata"]["args"] == {"event_id": "evt_1001", "reason": "partner is back"}
    pending = (await client.get(f"/v1/pending/{interrupt['id']}")).json()
    assert (pending["status"], pending["tool_call_id"]) == ("awaiting", start["toolCallId"])
    assert interrupt["expiresAt"].startswith(pending["expires_at"][:19])

    second = await ag_ui(client, run_input(thread, resume=[approve(interrupt)]))

    assert second[-1]["type"] == "RUN_FINISHED", second
    assert second[-1]["outcome"] == {"type": "success"}
    assert second[-1]["result"] == "replayed"
    assert any(e["type"] == "TOOL_CALL_RESULT" and e["toolCallId"] == start["toolCallId"] for e in second)
    assert "".join(e["delta"] for e in second if e["type"] == "TEXT_MESSAGE_CONTENT") == "replayed"
    assert (await client.get(f"/v1/pending/{interrupt['id']}")).json()["status"] == "approved"

    replay = await ag_ui(client, run_input(thread, resume=[approve(interrupt)]))
    assert replay[-1]["type"] == "RUN_FINISHED" and replay[-1]["outcome"] == {"type": "success"}, replay
    calls = (await client.get(f"/v1/runs/{pending['run_id']}/tool-calls")).json()
    assert len([c for c in calls if c["tool_name"] == "replay_dlq_event"]) == 1, calls


async def test_a_deny_reaches_the_model_and_the_run_finishes(client: AsyncTestClient[Any]) -> None:
    thread = f"thread-{uuid.uuid4()}"
    [interrupt] = (await ag_ui(client, run_input(thread, REPLAY)))[-1]["outcome"]["interrupts"]

    events = await ag_ui(client, run_input(thread, resume=[deny(interrupt, "partner still down")]))

    assert events[-1]["type"] == "RUN_FINISHED", events
    pending = (await client.get(f"/v1/pending/{interrupt['id']}")).json()
    assert (pending["status"], pending["reason"]) == ("denied", "partner still down")
    [result] = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert "partner still down" in result["content"]


async def test_new_input_while_an_interrupt_is_open_is_a_run_error(client: AsyncTestClient[Any]) -> None:
    thread = f"thread-{uuid.uuid4()}"
    [interrupt] = (await ag_ui(client, run_input(thread, REPLAY)))[-1]["outcome"]["interrupts"]

    events = await ag_ui(client, run_input(thread, "something else"))

    assert [e["type"] for e in events] == ["RUN_STARTED", "RUN_ERROR"]
    assert events[-1]["code"] == "interrupts_open"
    resumed = await ag_ui(client, run_input(thread, "something else", resume=[]))
    assert (resumed[-1]["type"], resumed[-1]["code"]) == ("RUN_ERROR", "interrupts_open")
    assert (await client.get(f"/v1/pending/{interrupt['id']}")).json()["status"] == "awaiting"


async def test_a_thread_id_that_is_a_conversation_id_continues_that_conversation(
    client: AsyncTestClient[Any],
) -> None:
    created = await client.post("/v1/conversations", json={"agent": "ops"})
    conversation = created.json()["id"]
    events = await ag_ui(client, run_input(conversation, "hello"))
    assert events[-1]["type"] == "RUN_FINISHED", events
    detail = (await client.get(f"/v1/conversations/{conversation}")).json()
    assert len(detail["messages"]) >= 2
