"""The live event stream through the real app on a real socket, on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

from sursis.app.container import build_container
from tests.api.conftest import LiveFactory
from tests.api.http_calls import create_conversation, get_run, post_message, resolve
from tests.api.live import EventStream, SseMessage, is_event
from tests.conftest import call, script

REPLAY_AFTER_LIST = script(
    [call("list_dlq_events")],
    [call("replay_dlq_event", event_id="evt_1001", reason="partner endpoint is back")],
)


def shape(events: list[SseMessage]) -> list[tuple[str | None, Any]]:
    """Each event's type with the detail that tells it apart."""
    out: list[tuple[str | None, Any]] = []
    for e in events:
        detail: Any = None
        if e.event in ("run.status", "pending.resolved"):
            detail = e.status
        elif e.event in ("tool.call", "tool.result", "pending.created", "tool.progress"):
            detail = e.tool
        out.append((e.event, detail))
    return out


async def test_suspend_approve_complete_arrives_in_order(live: LiveFactory) -> None:
    async with live() as app:
        cid = await create_conversation(app.http)  # type: ignore[arg-type]
        async with EventStream(app.http, cid) as stream:
            run = await post_message(app.http, cid, REPLAY_AFTER_LIST)  # type: ignore[arg-type]
            first = await stream.until(is_event("run.status", "suspended"))
            [pending] = run["pending"]
            decided = await resolve(app.http, pending["correlation_id"], decision="approve")  # type: ignore[arg-type]
            assert decided.status_code == 200
            second = await stream.until(is_event("run.completed"))
        done = await get_run(app.http, run["id"])  # type: ignore[arg-type]

    events = first + second
    text = [e for e in events if e.event == "message.delta"]
    assert shape([e for e in events if e.event != "message.delta"]) == [
        ("run.status", "queued"),
        ("run.status", "running"),
        ("tool.call", "list_dlq_events"),
        ("tool.result", "list_dlq_events"),
        ("tool.call", "replay_dlq_event"),
        ("pending.created", "replay_dlq_event"),
        ("run.status", "suspended"),
        ("pending.resolved", "approved"),
        ("run.status", "queued"),
        ("run.status", "running"),
        ("tool.result", "replay_dlq_event"),
        ("run.completed", None),
    ]
    ids = [e.id for e in events]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids)
    # The text streams after the last tool result and before the run completes.
    positions = [events.index(e) for e in text]
    assert text
    assert min(positions) > shape(events).index(("tool.result", "replay_dlq_event"))
    assert max(positions) < len(events) - 1
    assert "".join(e.data["data"]["text"] for e in text) == done["output"]

    created = next(e for e in events if e.event == "pending.created").data
    assert created["conversation_id"] == cid
    assert created["data"]["correlation_id"] == pending["correlation_id"]
    assert created["data"]["kind"] == "approval"
    assert created["data"]["effect_description"] == "Replay DLQ event evt_1001"
    assert created["data"]["links"]["pending"] == f"/v1/pending/{pending['correlation_id']}"
    result = next(e for e in events if e.event == "tool.result" and e.tool == "replay_dlq_event").data
    assert result["data"]["ok"] is True
    assert result["data"]["result"]["event_id"] == "evt_1001"
    completed = events[-1].data["data"]
    assert completed["run_id"] == run["id"]
    assert completed["output"] == done["output"]


async def test_reconnect_with_last_event_id_gets_exactly_the_missing_events(live: LiveFactory) -> None:
    async with live() as app:
        cid = await create_conversation(app.http)  # type: ignore[arg-type]
        async with EventStream(app.http, cid) as stream:
            run = await post_message(app.http, cid, REPLAY_AFTER_LIST)  # type: ignore[arg-type]
            seen = await stream.until(is_event("pending.created"))
        # Disconnected mid-run: the run suspends, is approved and completes meanwhile.
        await resolve(app.http, run["pending"][0]["correlation_id"], decision="approve")  # type: ignore[arg-type]
        assert (await get_run(app.http, run["id"]))["status"] == "completed"  # type: ignore[arg-type]

        async with EventStream(app.http, cid, last_event_id=seen[-1].id) as resumed:
            missed = await resumed.until(is_event("run.completed"))
        async with EventStream(app.http, cid, after=seen[-1].id) as by_query:
            missed_by_query = await by_query.until(is_event("run.completed"))
        async with EventStream(app.http, cid) as replay:
            everything = await replay.until(is_event("run.completed"))

    assert [e.id for e in everything[: len(seen)]] == [e.id for e in seen]
    assert [e.id for e in missed_by_query] == [e.id for e in missed]
    assert [(e.id, e.event, e.data) for e in missed] == [
        (e.id, e.event, e.data) for e in everything[len(seen) :]
    ]
    assert shape(missed)[:3] == [
        ("run.status", "suspended"),
        ("pending.resolved", "approved"),
        ("run.status", "queued"),
    ]


async def test_events_written_by_another_process_reach_the_stream(
    live: LiveFactory, database_url: str
) -> None:
    """The API process runs no worker; a separate container (its own engine and notifier) does.

    SQLite: the stream polls. PostgreSQL: polling is made too slow to matter, so the events can
    only arrive in time through `LISTEN/NOTIFY`.
    """
    poll = 0.1 if database_url.startswith("sqlite") else 60.0
    async with live(run_worker=False, events_poll_seconds=poll) as app:
        worker = build_container(app.settings)
        worker.worker.start()
        try:
            cid = await create_conversation(app.http)  # type: ignore[arg-type]
            async with EventStream(app.http, cid) as stream:
                await post_message(app.http, cid, script("all quiet"), wait=0)  # type: ignore[arg-type]
                events = await stream.until(is_event("run.completed"), within=5)
        finally:
            await worker.close()
    assert shape(events) == [
        ("run.status", "queued"),
        ("run.status", "running"),
        ("message.delta", None),
        ("run.completed", None),
    ]
    assert events[-1].data["data"]["output"] == "all quiet"


async def test_text_streams_as_several_deltas(live: LiveFactory) -> None:
    async with live(events_delta_interval_seconds=0) as app:
        cid = await create_conversation(app.http)  # type: ignore[arg-type]
        async with EventStream(app.http, cid) as stream:
            await post_message(app.http, cid, script("one two three four five"), wait=0)  # type: ignore[arg-type]
            events = await stream.until(is_event("run.completed"))
    deltas = [e.data["data"]["text"] for e in events if e.event == "message.delta"]
    assert len(deltas) == 5
    assert "".join(deltas) == "one two three four five"


async def test_a_message_posted_without_streaming_gets_each_text_as_one_delta(live: LiveFactory) -> None:
    """`"stream": false`: the model is asked for whole responses, in the first segment and in the one
    an approval resumes; the stream shows the same events, each response's text as one delta (with
    no coalescing at all, a streamed response would give one delta per word)."""
    turn = script(
        [call("list_dlq_events")],
        [call("replay_dlq_event", event_id="evt_1001", reason="partner endpoint is back")],
        "the event is replayed now",
        text="please look at the dead letters",
    )
    async with live(events_delta_interval_seconds=0) as app:
        cid = await create_conversation(app.http)  # type: ignore[arg-type]
        async with EventStream(app.http, cid) as stream:
            posted = await app.http.post(
                f"/v1/conversations/{cid}/messages", json={"content": turn, "stream": False}
            )
            assert posted.status_code == 202, posted.text
            first = await stream.until(is_event("run.status", "suspended"))
            [pending] = (await get_run(app.http, posted.json()["id"]))["pending"]  # type: ignore[arg-type]
            decided = await resolve(app.http, pending["correlation_id"], decision="approve")  # type: ignore[arg-type]
            assert decided.status_code == 200
            second = await stream.until(is_event("run.completed"))
        echo = await post_message(app.http, cid, "say it in five words", wait=10)  # type: ignore[arg-type]
        async with EventStream(app.http, cid, after=second[-1].id) as again:
            third = await again.until(is_event("run.completed"))
    assert [e.data["data"]["text"] for e in first if e.event == "message.delta"] == []
    assert [e.data["data"]["text"] for e in second if e.event == "message.delta"] == [
        "the event is replayed now"
    ]
    assert [e.event for e in second if e.event != "message.delta"][-2:] == ["tool.result", "run.completed"]
    # The next message is posted with the default: it streams again, word by word.
    assert echo["status"] == "completed"
    streamed = [e.data["data"]["text"] for e in third if e.event == "message.delta"]
    assert len(streamed) == len(echo["output"].split()) > 1
    assert "".join(streamed) == echo["output"]


async def test_idle_stream_gets_heartbeat_comments(live: LiveFactory) -> None:
    async with live(events_heartbeat_seconds=0.2) as app:
        cid = await create_conversation(app.http)  # type: ignore[arg-type]
        async with EventStream(app.http, cid) as stream:
            first = await stream.next_message(within=2)
            second = await stream.next_message(within=2)
            third = await stream.next_message(within=2)
    assert first.comment == "connected"
    assert (second.comment, third.comment) == ("keep-alive", "keep-alive")
    assert second.event is None
    assert second.data is None


async def test_stream_of_an_unknown_conversation_is_404(live: LiveFactory) -> None:
    async with live() as app:
        response = await app.http.get("/v1/conversations/00000000-0000-0000-0000-000000000000/events")
        bad = await app.http.get(
            f"/v1/conversations/{await create_conversation(app.http)}/events",  # type: ignore[arg-type]
            headers={"Last-Event-ID": "not-a-number"},
        )
    assert response.status_code == 404
    assert response.json()["code"] == "not_found"
    assert bad.status_code == 422


async def test_cancel_and_failure_are_on_the_stream(live: LiveFactory) -> None:
    async with live(step_limit=2) as app:
        cid = await create_conversation(app.http)  # type: ignore[arg-type]
        async with EventStream(app.http, cid) as stream:
            run = await post_message(app.http, cid, REPLAY_AFTER_LIST)  # type: ignore[arg-type]
            cancelled = await app.http.post(f"/v1/runs/{run['id']}/cancel")
            assert cancelled.status_code == 200
            ended = await stream.until(is_event("run.status", "cancelled"))
            looping = script([call("list_dlq_events")], [call("list_dlq_events")], [call("list_dlq_events")])
            failing = await post_message(app.http, cid, looping)  # type: ignore[arg-type]
            failed = await stream.until(is_event("run.failed"))

    assert shape(ended)[-3:] == [
        ("run.status", "suspended"),
        ("pending.resolved", "cancelled"),
        ("run.status", "cancelled"),
    ]
    assert failing["status"] == "failed"
    assert failed[-1].data["data"]["error"]["code"] == "step_limit"
    assert failed[-1].data["data"]["run_id"] == failing["id"]
