"""Provider tools pass through to the model; streaming tools report progress to the event stream."""

from __future__ import annotations

import json

from tests.api.conftest import LiveFactory
from tests.api.http_calls import conversation, create_conversation, get_run, post_message, tool_calls
from tests.api.live import EventStream, is_event
from tests.conftest import call, script

HITS = [{"title": "Sursis docs", "url": "https://example.com/sursis"}]


async def test_provider_tool_is_recorded_but_never_dispatched_or_gated(live: LiveFactory) -> None:
    search = {"tool": "web_search", "args": {"query": "durable approvals"}, "result": HITS}
    async with live() as app:
        cid = await create_conversation(app.http, agent="assistant")  # type: ignore[arg-type]
        async with EventStream(app.http, cid) as stream:
            run = await post_message(app.http, cid, script([search]))  # type: ignore[arg-type]
            events = await stream.until(is_event("run.completed"))
        log = (await conversation(app.http, cid))["messages"]  # type: ignore[arg-type]
        executed = await tool_calls(app.http, run["id"])  # type: ignore[arg-type]
        awaiting = (await app.http.get("/v1/pending")).json()["items"]

    assert run["status"] == "completed"
    assert run["output"] == "RESULTS: " + json.dumps([HITS], sort_keys=True)
    parts = [p for m in log for p in m["message"]["parts"]]
    native = [p for p in parts if p["part_kind"].startswith("builtin-tool")]
    assert [(p["part_kind"], p["tool_name"]) for p in native] == [
        ("builtin-tool-call", "web_search"),
        ("builtin-tool-return", "web_search"),
    ]
    assert native[0]["args"] == {"query": "durable approvals"}
    assert native[1]["content"] == HITS
    assert executed == []
    assert awaiting == []
    tool_events = [(e.event, e.data["data"]["executor"]) for e in events if e.event.startswith("tool.")]
    assert tool_events == [("tool.call", "provider"), ("tool.result", "provider")]
    # In the order the model returned them: the search, its result, then the text about it.
    assert [e.event for e in events][2:] == ["tool.call", "tool.result", "message.delta", "run.completed"]
    result = next(e for e in events if e.event == "tool.result").data["data"]
    assert result["ok"] is True
    assert result["result"] == HITS


async def test_streaming_tool_progress_reaches_the_event_stream(live: LiveFactory) -> None:
    async with live() as app:
        cid = await create_conversation(app.http, agent="assistant")  # type: ignore[arg-type]
        async with EventStream(app.http, cid) as stream:
            run = await post_message(app.http, cid, script([call("summarize_activity", hours=2)]))  # type: ignore[arg-type]
            events = await stream.until(is_event("run.completed"))
        done = await get_run(app.http, run["id"])  # type: ignore[arg-type]

    tool_events = [e for e in events if e.event.startswith("tool.")]
    assert [e.event for e in tool_events] == ["tool.call", "tool.progress", "tool.result"]
    call_event, progress, result = (e.data["data"] for e in tool_events)
    assert call_event["streaming"] is True
    assert progress["tool_call_id"] == call_event["tool_call_id"] == result["tool_call_id"]
    assert progress["progress"] == {"entries_read": result["result"]["entries"]}
    assert result["result"]["by_action"] == {"key.created": 1, "run.queued": 1, "run.started": 1}
    assert done["status"] == "completed"
