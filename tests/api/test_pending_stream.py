"""The workspace-wide stream of pending calls (`GET /v1/pending/events`) on a real socket, on SQLite
and PostgreSQL."""

from __future__ import annotations

from typing import Any

import httpx

from sursis.app.container import build_container
from tests.api.conftest import LiveFactory
from tests.api.http_calls import create_conversation, post_message
from tests.api.live import EventStream, SseMessage, is_event
from tests.conftest import KeyMaker, bearer, call, script

PENDING_EVENTS = "/v1/pending/events"
GATED = script([call("replay_dlq_event", event_id="evt_1001", reason="partner is back")])


async def suspend(http: httpx.AsyncClient, workspace: str = "default") -> dict[str, Any]:
    """A new conversation in `workspace` whose run waits for one approval; that pending call."""
    cid = await create_conversation(http, workspace=workspace)  # type: ignore[arg-type]
    run = await post_message(http, cid, GATED)  # type: ignore[arg-type]
    assert run["status"] == "suspended", run
    [pending] = run["pending"]
    return dict(pending)


async def decide(http: httpx.AsyncClient, pending: dict[str, Any], **headers: str) -> dict[str, Any]:
    response = await http.post(
        f"/v1/pending/{pending['correlation_id']}/resolve", json={"decision": "approve"}, headers=headers
    )
    assert response.status_code == 200, response.text
    return dict(response.json())


def about(events: list[SseMessage]) -> list[tuple[str | None, str]]:
    return [(e.event, e.data["data"]["correlation_id"]) for e in events]


async def connected(*streams: EventStream) -> None:
    for stream in streams:
        assert (await stream.next_message()).comment == "connected"


async def test_each_caller_hears_of_the_pending_calls_of_the_workspaces_it_sees(
    live: LiveFactory, keys: KeyMaker
) -> None:
    alice = await keys.issue("operator", "default", name="alice")
    own = bearer(alice.secret)
    other = bearer(await keys.make("operator", "elsewhere"))
    user = bearer(await keys.make("user", "default"))
    async with (
        live() as app,
        EventStream(app.http, path=PENDING_EVENTS, headers=own) as mine,
        EventStream(app.http, path=PENDING_EVENTS, headers=other) as theirs,
        EventStream(app.http, path=PENDING_EVENTS, headers=user) as users,
        EventStream(app.http, path=PENDING_EVENTS) as admins,
    ):
        await connected(mine, theirs, users, admins)
        here = await suspend(app.http)
        await decide(app.http, here, **own)
        there = await suspend(app.http, "elsewhere")
        await decide(app.http, there)
        last = await suspend(app.http)

        heard_here = await mine.until(lambda e: e.data["data"]["correlation_id"] == last["correlation_id"])
        heard_by_user = await users.until(
            lambda e: e.data["data"]["correlation_id"] == last["correlation_id"]
        )
        heard_there = await theirs.until(is_event("pending.resolved"))
        heard_all = await admins.until(lambda e: e.data["data"]["correlation_id"] == last["correlation_id"])

    expected_here = [
        ("pending.created", here["correlation_id"]),
        ("pending.resolved", here["correlation_id"]),
        ("pending.created", last["correlation_id"]),
    ]
    assert about(heard_here) == expected_here
    assert about(heard_by_user) == expected_here
    assert about(heard_there) == [
        ("pending.created", there["correlation_id"]),
        ("pending.resolved", there["correlation_id"]),
    ]
    assert about(heard_all) == [
        *expected_here[:2],
        ("pending.created", there["correlation_id"]),
        ("pending.resolved", there["correlation_id"]),
        expected_here[2],
    ]

    created, resolved = heard_here[0].data, heard_here[1].data
    assert created["workspace"] == "default"
    assert created["conversation_id"] == here["conversation_id"]
    assert created["data"]["tool_name"] == "replay_dlq_event"
    assert created["data"]["kind"] == "approval"
    assert created["data"]["agent"] == "ops"
    assert created["data"]["effect_description"] == "Replay DLQ event evt_1001"
    assert created["data"]["args_summary"] == {"event_id": "evt_1001", "reason": "partner is back"}
    assert created["data"]["expires_at"]
    assert resolved["data"]["status"] == "approved"
    assert resolved["data"]["resolved_by"] == str(alice.key.id)
    assert heard_here[0].id == created["id"]
    assert heard_all[-1].id is not None
    assert heard_here[0].id is not None
    assert heard_all[-1].id > heard_here[0].id


async def test_a_fresh_stream_starts_now_and_a_resumed_one_gets_what_it_missed(live: LiveFactory) -> None:
    async with live(events_settle_seconds=0) as app:
        before = await suspend(app.http)
        async with EventStream(app.http, path=PENDING_EVENTS) as stream:
            await connected(stream)
            later = await suspend(app.http)
            [created] = await stream.until(is_event("pending.created"))
        # Disconnected: a decision and a new call happen meanwhile.
        await decide(app.http, later)
        third = await suspend(app.http)

        async with EventStream(app.http, path=PENDING_EVENTS, last_event_id=created.id) as resumed:
            await connected(resumed)
            missed = [await resumed.next_event(), await resumed.next_event()]
        async with EventStream(app.http, path=PENDING_EVENTS, after=created.id) as by_query:
            await connected(by_query)
            missed_by_query = [await by_query.next_event(), await by_query.next_event()]

    assert about([created]) == [("pending.created", later["correlation_id"])]
    assert before["correlation_id"] != later["correlation_id"]
    assert about(missed) == [
        ("pending.resolved", later["correlation_id"]),
        ("pending.created", third["correlation_id"]),
    ]
    assert [(e.id, e.data) for e in missed_by_query] == [(e.id, e.data) for e in missed]


async def test_resuming_delivers_the_recent_events_again_at_least_once(live: LiveFactory) -> None:
    """Ids are ordered per conversation only, so a resumed stream re-reads the settle window."""
    async with live() as app:
        first = await suspend(app.http)
        second = await suspend(app.http)
        async with EventStream(app.http, path=PENDING_EVENTS, after=0) as replay:
            await connected(replay)
            both = [await replay.next_event(), await replay.next_event()]
        assert both[1].id is not None
        async with EventStream(app.http, path=PENDING_EVENTS, last_event_id=both[1].id) as resumed:
            await connected(resumed)
            again = [await resumed.next_event(), await resumed.next_event()]
            third = await suspend(app.http)
            new = await resumed.next_event()

    assert about(both) == [
        ("pending.created", first["correlation_id"]),
        ("pending.created", second["correlation_id"]),
    ]
    assert [(e.id, e.data) for e in again] == [(e.id, e.data) for e in both]
    assert about([new]) == [("pending.created", third["correlation_id"])]


async def test_pending_events_written_by_another_process_reach_the_stream(
    live: LiveFactory, database_url: str
) -> None:
    """The API process runs no worker; the pending call is created by a worker elsewhere.

    SQLite: the stream polls. PostgreSQL: polling is made too slow to matter, so the event can only
    arrive in time through `NOTIFY sursis_pending`.
    """
    poll = 0.1 if database_url.startswith("sqlite") else 60.0
    async with live(run_worker=False, events_poll_seconds=poll) as app:
        worker = build_container(app.settings)
        worker.worker.start()
        try:
            async with EventStream(app.http, path=PENDING_EVENTS) as stream:
                await connected(stream)
                cid = await create_conversation(app.http)  # type: ignore[arg-type]
                await post_message(app.http, cid, GATED, wait=0)  # type: ignore[arg-type]
                [created] = await stream.until(is_event("pending.created"), within=5)
        finally:
            await worker.close()
    assert created.data["conversation_id"] == cid
    assert created.data["data"]["tool_name"] == "replay_dlq_event"


async def test_an_idle_pending_stream_gets_heartbeats_and_bad_resume_ids_are_refused(
    live: LiveFactory,
) -> None:
    async with live(events_heartbeat_seconds=0.2) as app:
        async with EventStream(app.http, path=PENDING_EVENTS) as stream:
            await connected(stream)
            assert (await stream.next_message(within=2)).comment == "keep-alive"
        bad = await app.http.get(PENDING_EVENTS, headers={"Last-Event-ID": "yesterday"})
        negative = await app.http.get(PENDING_EVENTS, params={"after": -1})
    assert bad.status_code == 422
    assert bad.json()["code"] == "validation_failed"
    assert negative.status_code == 422
