"""Slack's Events API and interactivity, signed as Slack signs them, against a local Slack."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import sqlalchemy as sa

from sursis.infra.db import channel_tables as ch
from sursis.infra.db import tables as t
from sursis.infra.db.engine import create_engine
from tests.channels.conftest import SlackWorld, SlackWorldFactory
from tests.channels.slack_fake import CHANNEL, event_body, press_body, sign
from tests.conftest import call, eventually, script


async def count(database_url: str, table: sa.Table) -> int:
    engine = create_engine(database_url)
    try:
        async with engine.connect() as conn:
            return int(await conn.scalar(sa.select(sa.func.count()).select_from(table)) or 0)
    finally:
        await engine.dispose()


async def nothing_stored(world: SlackWorld) -> None:
    for table in (t.conversations, t.runs, ch.slack_events, ch.channel_bindings, t.outbox):
        assert await count(world.database_url, table) == 0, table.name


async def test_url_verification_answers_the_challenge(slack_world: SlackWorldFactory) -> None:
    async with slack_world() as world:
        body = json.dumps({"type": "url_verification", "challenge": "c-123", "token": "x"}).encode()
        response = await world.send_event(body)
        assert response.status_code == 200
        assert response.json() == {"challenge": "c-123"}


async def test_a_bad_signature_is_refused_and_nothing_is_stored(slack_world: SlackWorldFactory) -> None:
    async with slack_world() as world:
        await world.map_user("U1", "operator")
        body = event_body("Ev1", "U1", "hello", "1700000001.000100")
        forged = sign(body, secret="not-the-secret")
        for headers in (forged, {}, {"X-Slack-Request-Timestamp": forged["X-Slack-Request-Timestamp"]}):
            response = await world.http.post(
                "/v1/channels/slack/events",
                content=body,
                headers={"Content-Type": "application/json", **headers},
            )
            assert response.status_code == 401, response.text
            assert response.headers["content-type"].startswith("application/problem+json")
            assert response.json()["code"] == "bad_signature"
        # A body changed after signing fails too.
        tampered = body.replace(b"hello", b"HELLO")
        response = await world.http.post(
            "/v1/channels/slack/events",
            content=tampered,
            headers={"Content-Type": "application/json", **sign(body)},
        )
        assert response.status_code == 401
        press = press_body("U1", str(uuid.uuid4()), "sursis_approve", "1.0")
        response = await world.http.post(
            "/v1/channels/slack/interactions",
            content=press,
            headers={"Content-Type": "application/x-www-form-urlencoded", **sign(press, secret="wrong")},
        )
        assert response.status_code == 401
        await nothing_stored(world)


async def test_a_stale_timestamp_is_refused_and_nothing_is_stored(slack_world: SlackWorldFactory) -> None:
    async with slack_world() as world:
        await world.map_user("U1", "operator")
        body = event_body("Ev1", "U1", "hello", "1700000001.000100")
        for skew in (-301, -3600, 3600):
            response = await world.http.post(
                "/v1/channels/slack/events",
                content=body,
                headers={"Content-Type": "application/json", **sign(body, timestamp=int(time.time()) + skew)},
            )
            assert response.status_code == 401, skew
            assert response.json()["code"] == "bad_signature"
        await nothing_stored(world)


async def test_a_message_starts_a_conversation_and_a_retry_or_replay_changes_nothing(
    slack_world: SlackWorldFactory,
) -> None:
    async with slack_world() as world:
        await world.map_user("U1", "operator")
        body = event_body("Ev1", "U1", "hello from slack", "1700000001.000100")
        first = await world.send_event(body)
        assert first.json() == {"ok": True, "outcome": "queued"}
        retry = await world.send_event(
            body, **{"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"}
        )
        replay = await world.send_event(body)
        assert retry.status_code == replay.status_code == 200
        assert retry.json()["outcome"] == replay.json()["outcome"] == "duplicate"

        [reply] = await world.slack.wait_for("chat.postMessage")
        assert reply["channel"] == CHANNEL
        assert reply["thread_ts"] == "1700000001.000100"
        assert "ECHO: hello from slack" in reply["text"]
        assert await count(world.database_url, t.conversations) == 1
        assert await count(world.database_url, t.runs) == 1
        listed = (await world.http.get("/v1/channels/bindings")).json()
        [binding] = listed
        assert binding["kind"] == "slack"
        assert binding["slack"] == {
            "team_id": "T0TEAM",
            "channel_id": CHANNEL,
            "thread_ts": "1700000001.000100",
        }
        detail = (await world.http.get(f"/v1/conversations/{binding['conversation_id']}")).json()
        assert {m["channel"] for m in detail["messages"]} == {"slack"}

        # A reply in the thread continues the same conversation; the bot's own messages are ignored.
        bot = event_body(
            "Ev2", "U0BOT", "ECHO", "1700000002.000100", thread_ts="1700000001.000100", bot_id="B0BOT"
        )
        assert (await world.send_event(bot)).json()["outcome"] == "ignored"
        more = event_body("Ev3", "U1", "again", "1700000003.000100", thread_ts="1700000001.000100")
        assert (await world.send_event(more)).json()["outcome"] == "queued"
        await world.slack.wait_for("chat.postMessage", 2)
        assert await count(world.database_url, t.conversations) == 1
        assert await count(world.database_url, t.runs) == 2
        assert world.slack.refused == []


async def test_an_unmapped_user_gets_a_notice_and_nothing_runs(slack_world: SlackWorldFactory) -> None:
    async with slack_world() as world:
        body = event_body("Ev9", "U404", "run something", "1700000009.000100")
        response = await world.send_event(body)
        assert response.json() == {"ok": True, "outcome": "unmapped"}
        [notice] = await world.slack.wait_for("chat.postMessage")
        assert notice["thread_ts"] == "1700000009.000100"
        assert "not linked" in notice["text"] and "U404" in notice["text"]
        assert await count(world.database_url, t.conversations) == 0
        assert await count(world.database_url, t.runs) == 0
        assert await count(world.database_url, t.messages) == 0
        # The replay of the same event sends no second notice.
        assert (await world.send_event(body)).json()["outcome"] == "duplicate"


GATED = script([call("replay_dlq_event", event_id="evt_1001", reason="retry")], "replayed", text="replay it")


async def approval_posted(
    world: SlackWorld, user: str = "U0", ts: str = "1700000001.000100"
) -> tuple[str, str]:
    """Start a gated run from Slack as `user` (an operator of its own: the requester, who may not
    decide the call); the correlation id and the `ts` of its approval message."""
    await world.map_user(user, "operator")
    assert (await world.send_event(event_body(f"Ev-{ts}", user, GATED, ts))).json()["outcome"] == "queued"
    [approval] = await world.slack.wait_for("chat.postMessage")
    blocks = approval["blocks"] if isinstance(approval["blocks"], list) else json.loads(approval["blocks"])
    [actions] = [b for b in blocks if b["type"] == "actions"]
    approve, deny, *_ = actions["elements"]
    assert (approve["action_id"], deny["action_id"]) == ("sursis_approve", "sursis_deny")
    assert approve["value"] == deny["value"]
    posted = [ts for (_, ts), m in world.slack.messages.items() if m["text"] == approval["text"]]
    return approve["value"], posted[0]


async def pending_status(world: SlackWorld, correlation_id: str) -> Any:
    return (await world.http.get(f"/v1/pending/{correlation_id}")).json()


async def test_a_press_by_a_user_who_is_not_an_operator_changes_nothing(
    slack_world: SlackWorldFactory,
) -> None:
    async with slack_world() as world:
        await world.map_user("U1", "operator")
        await world.map_user("U2", "user")
        correlation_id, ts = await approval_posted(world)
        response = await world.send_press(press_body("U2", correlation_id, "sursis_approve", ts))
        assert response.json() == {"ok": True, "outcome": "refused"}
        [ephemeral] = await world.slack.wait_for("chat.postEphemeral")
        assert ephemeral["user"] == "U2" and "may not decide" in ephemeral["text"]
        # An unmapped presser, likewise.
        await world.send_press(press_body("U404", correlation_id, "sursis_deny", ts))
        await world.slack.wait_for("chat.postEphemeral", 2)
        assert (await pending_status(world, correlation_id))["status"] == "awaiting"
        assert world.slack.of("chat.update") == []


async def test_a_double_press_resolves_once_and_tells_the_second_presser(
    slack_world: SlackWorldFactory,
) -> None:
    async with slack_world() as world:
        operator = await world.map_user("U1", "operator")
        await world.map_user("U3", "operator")
        correlation_id, ts = await approval_posted(world)
        first = await world.send_press(press_body("U1", correlation_id, "sursis_approve", ts))
        second = await world.send_press(press_body("U3", correlation_id, "sursis_deny", ts))
        assert first.json()["outcome"] == "decided"
        assert second.json()["outcome"] == "refused"
        call = await pending_status(world, correlation_id)
        assert call["status"] == "approved"
        assert call["resolved_by"] == str(operator.key.id)
        [ephemeral] = await world.slack.wait_for("chat.postEphemeral")
        assert ephemeral["user"] == "U3" and "already approved" in ephemeral["text"]
        # Acknowledged at once by the press, then updated by the deliverer with the key's name.
        ack, update = await world.slack.wait_for("chat.update", 2)
        assert ack["ts"] == update["ts"] == ts
        assert "approved by <@U1>" in ack["text"]
        assert "approved by slack U1 (operator)" in update["text"]
        audit = (await world.http.get("/v1/audit", params={"correlation_id": correlation_id})).json()
        assert [row["action"] for row in audit["items"]].count("pending.approved") == 1

        async def answered() -> Any:
            return [m for m in world.slack.of("chat.postMessage") if m["text"] == "replayed"]

        await eventually(answered)


async def test_signed_bodies_that_are_not_what_slack_sends_are_422_and_store_nothing(
    slack_world: SlackWorldFactory,
) -> None:
    async with slack_world() as world:
        for body in (b"not json", b"[1, 2]", b'{"type": "event_callback", "event": "x"}'):
            response = await world.send_event(body)
            if body.startswith(b"{"):
                assert response.json()["outcome"] == "ignored"
            else:
                assert response.status_code == 422, body
                assert response.json()["code"] == "validation_failed"
        for form in (b"", b"payload=not-json", b"other=1"):
            response = await world.send_press(form)
            assert response.status_code == 422, form
        ignored = await world.send_press(b"payload=" + json.dumps({"type": "view_submission"}).encode())
        assert ignored.json()["outcome"] == "ignored"
        await nothing_stored(world)


async def test_an_unbound_thread_starts_a_new_conversation(slack_world: SlackWorldFactory) -> None:
    async with slack_world() as world:
        await world.map_user("U1", "operator")
        thread = "1700000021.000100"
        assert (await world.send_event(event_body("EvA", "U1", "first", thread))).json()[
            "outcome"
        ] == "queued"
        await world.slack.wait_for("chat.postMessage")
        [binding] = (await world.http.get("/v1/channels/bindings")).json()
        assert (await world.http.delete(f"/v1/channels/bindings/{binding['id']}")).status_code == 204
        assert (await world.http.get("/v1/channels/bindings")).json() == []
        again = event_body("EvB", "U1", "second", "1700000022.000100", thread_ts=thread)
        assert (await world.send_event(again)).json()["outcome"] == "queued"
        [fresh] = (await world.http.get("/v1/channels/bindings")).json()
        assert fresh["conversation_id"] != binding["conversation_id"]
        assert fresh["slack"]["thread_ts"] == thread
        assert await count(world.database_url, t.conversations) == 2


async def test_a_conversation_the_service_starts_opens_a_thread_in_the_workspace_channel(
    slack_world: SlackWorldFactory,
) -> None:
    async with slack_world() as world:
        await world.map_user("U1", "operator")
        bound = await world.http.post(
            "/v1/channels/bindings", json={"kind": "slack", "team_id": "T0TEAM", "channel_id": "C0ANNOUNCE"}
        )
        assert bound.status_code == 201, bound.text
        assert bound.json()["slack"] == {"team_id": "T0TEAM", "channel_id": "C0ANNOUNCE", "thread_ts": None}
        for wrong in (
            {"kind": "slack", "team_id": "T0TEAM"},
            {"kind": "slack", "team_id": "T0TEAM", "channel_id": "C1", "email": "a@example.com"},
            {"kind": "email", "team_id": "T0TEAM", "channel_id": "C1"},
        ):
            refused = await world.http.post("/v1/channels/bindings", json=wrong)
            assert refused.status_code == 422, (wrong, refused.text)
            assert refused.json()["code"] == "validation_failed"
        system = await world.keys.make("system", "default")
        posted = await world.http.post(
            "/v1/events",
            json={
                "id": "evt-announce-1",
                "type": "anomaly.detected",
                "data": {"kind": "cost_spike", "metric": "judge_cost_usd", "baseline": 1.0, "observed": 9.0},
            },
            headers={"Authorization": f"Bearer {system}"},
        )
        assert posted.status_code == 202, posted.text
        conversation_id = posted.json()["conversation_id"]

        [opening] = await world.slack.wait_for("chat.postMessage")
        assert opening["channel"] == "C0ANNOUNCE" and not opening.get("thread_ts")
        assert "New conversation (customer) after anomaly.detected evt-announce-1" in opening["text"]
        [thread_ts] = [ts for (channel, ts), m in world.slack.messages.items() if channel == "C0ANNOUNCE"]

        async def answered_in_thread() -> Any:
            return [m for m in world.slack.of("chat.postMessage") if m.get("thread_ts") == thread_ts]

        await eventually(answered_in_thread, 20)
        listed = (
            await world.http.get("/v1/channels/bindings", params={"conversation_id": conversation_id})
        ).json()
        assert [b["slack"]["thread_ts"] for b in listed] == [thread_ts]

        # A reply in that thread continues the conversation the service started.
        async def idle() -> Any:
            return (await world.http.get(f"/v1/conversations/{conversation_id}")).json()["active_run"] is None

        await eventually(idle, 20)
        reply = event_body("EvR", "U1", "thanks", "1700000031.000100", thread_ts=thread_ts)
        reply = reply.replace(CHANNEL.encode(), b"C0ANNOUNCE")
        assert (await world.send_event(reply)).json()["outcome"] == "queued"
        assert await count(world.database_url, t.conversations) == 1
        assert await count(world.database_url, t.runs) == 2

        async def reply_recorded() -> Any:
            detail = (await world.http.get(f"/v1/conversations/{conversation_id}")).json()
            return [m for m in detail["messages"] if m["channel"] == "slack"]

        await eventually(reply_recorded, 20)
