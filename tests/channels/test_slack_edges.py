"""Slack's requests at the edge: malformed headers and bytes are 4xx and store nothing, message text
reaches the model as a person wrote it, and Slack's `Retry-After` is obeyed."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import pytest

from sursis.app.schemas.slack import mentioned_users, plain_text
from sursis.infra.db import tables as t
from tests.channels.conftest import SlackWorld, SlackWorldFactory
from tests.channels.slack_fake import CHANNEL, event_body, press_body, sign
from tests.channels.test_slack_inbound import count, nothing_stored

ROUTES = {
    "/v1/channels/slack/events": "application/json",
    "/v1/channels/slack/interactions": "application/x-www-form-urlencoded",
}


def sample(route: str) -> bytes:
    if route.endswith("events"):
        return event_body("Ev1", "U1", "hello", "1700000001.000100")
    return press_body("U1", str(uuid.uuid4()), "sursis_approve", "1.0")


async def post(world: SlackWorld, route: str, body: bytes, headers: dict[str, Any]) -> Any:
    return await world.http.post(route, content=body, headers={"Content-Type": ROUTES[route], **headers})


@pytest.mark.parametrize("route", list(ROUTES))
async def test_a_malformed_timestamp_is_a_bad_signature(slack_world: SlackWorldFactory, route: str) -> None:
    async with slack_world(over_http=False) as world:  # odd header bytes, sent as they are
        await world.map_user("U1", "operator")
        body = sample(route)
        signature = sign(body)["X-Slack-Signature"]
        for timestamp in ("abc", "", " 1700000000", "1e9", "-5", "١٢٣".encode(), b"\xff", "9" * 40):
            headers = {"X-Slack-Request-Timestamp": timestamp, "X-Slack-Signature": signature}
            response = await post(world, route, body, headers)
            assert response.status_code == 401, (timestamp, response.text)
            assert response.headers["content-type"].startswith("application/problem+json")
            assert response.json()["code"] == "bad_signature"
        malformed_signature = {**sign(body), "X-Slack-Signature": "v0=zz"}
        assert (await post(world, route, body, malformed_signature)).status_code == 401
        await nothing_stored(world)


@pytest.mark.parametrize("route", list(ROUTES))
async def test_a_signed_body_that_is_not_utf8_is_a_422_and_stores_nothing(
    slack_world: SlackWorldFactory, route: str
) -> None:
    async with slack_world() as world:
        await world.map_user("U1", "operator")
        for body in (b"\xff\xfe{}", sample(route).replace(b"hello", b"h\xc3ello").replace(b"U1", b"U\x80")):
            response = await post(world, route, body, sign(body))
            assert response.status_code == 422, response.text
            assert response.json()["code"] == "validation_failed"
        # Unsigned, the same bytes are a bad signature: nothing is read before the check.
        response = await post(world, route, b"\xff\xfe{}", {})
        assert response.status_code == 401
        await nothing_stored(world)


async def test_an_interaction_form_without_one_payload_is_a_422(slack_world: SlackWorldFactory) -> None:
    route = "/v1/channels/slack/interactions"
    async with slack_world() as world:
        for body in (
            b"",
            b"payload=",
            b"nopayload=1",
            b"payload=1&payload=2",
            b"payload=%7B",
            b"payload=%5B%5D",
        ):
            response = await post(world, route, body, sign(body))
            assert response.status_code == 422, (body, response.text)
        await nothing_stored(world)


def test_slack_text_is_decoded_as_the_person_wrote_it() -> None:
    assert plain_text("a &lt; b &amp;&amp; c &gt; d") == "a < b && c > d"
    assert plain_text("&amp;lt; stays") == "&lt; stays"
    assert plain_text("hi <@U0USER>", {"U0USER": "mara"}) == "hi @mara"
    assert plain_text("hi <@U0USER>") == "hi @U0USER"
    assert plain_text("see <#C0CHAN|ops> <!here>") == "see #ops @here"
    assert (
        plain_text("<https://x.example/a?b=1&amp;c=2|the docs>") == "the docs (https://x.example/a?b=1&c=2)"
    )
    assert plain_text("<https://x.example>") == "https://x.example"
    assert mentioned_users("<@U1> and <@U2> and <@U1>") == ["U1", "U2"]


async def test_a_message_with_entities_reaches_the_model_decoded_and_is_answered_once_escaped(
    slack_world: SlackWorldFactory,
) -> None:
    async with slack_world() as world:
        await world.map_user("U1", "operator")
        body = event_body("Ev1", "U1", "a &lt; b &amp;&amp; c", "1700000001.000100")
        assert (await world.send_event(body)).json()["outcome"] == "queued"
        [reply] = await world.slack.wait_for("chat.postMessage")
        # The scripted model echoes what it was given; Slack's text escapes it exactly once.
        assert "ECHO: a &lt; b &amp;&amp; c" in reply["text"]
        assert "&amp;lt;" not in reply["text"]
        [binding] = (await world.http.get("/v1/channels/bindings")).json()
        detail = (await world.http.get(f"/v1/conversations/{binding['conversation_id']}")).json()
        stored = json.dumps(detail["messages"])
        assert '"a < b && c"' in stored and "&lt;" not in stored and "&amp;" not in stored


async def test_a_429_from_slack_is_retried_after_its_retry_after(slack_world: SlackWorldFactory) -> None:
    async with slack_world() as world:
        await world.map_user("U1", "operator")
        world.slack.rate_limit_next, world.slack.retry_after = 1, 2
        assert (await world.send_event(event_body("Ev1", "U1", "hi", "1700000001.000100"))).status_code == 200
        await world.slack.wait_for("chat.postMessage", within=20)
        (_, limited_at), (_, retried_at) = world.slack.attempted_at[0], world.slack.attempted_at[1]
        assert retried_at - limited_at >= 2.0
        posts = [name for name, _ in world.slack.calls if name.startswith("chat.postMessage")]
        assert posts == ["chat.postMessage:limited", "chat.postMessage"]
        assert world.slack.of("chat.postMessage")[0]["channel"] == CHANNEL
        assert await count(world.database_url, t.runs) == 1


def test_sign_is_slacks_algorithm_over_the_raw_bytes() -> None:
    headers = sign(b"\xff", timestamp=int(time.time()))
    assert headers["X-Slack-Signature"].startswith("v0=")


async def test_mentions_reach_the_model_by_name(slack_world: SlackWorldFactory) -> None:
    async with slack_world() as world:
        await world.map_user("U1", "operator")
        body = event_body("Ev1", "U1", "ask <@U0USER> and <@U0NOBODY> &amp; <!here>", "1700000001.000100")
        assert (await world.send_event(body)).json()["outcome"] == "queued"
        [reply] = await world.slack.wait_for("chat.postMessage")
        assert "ECHO: ask @mara and @U0NOBODY &amp; @here" in reply["text"]
        assert [args["user"] for args in world.slack.of("users.info")] == ["U0USER", "U0NOBODY"]
        # Looked up once: a second mention of the same person is answered from what was kept.
        again = event_body("Ev2", "U1", "thanks <@U0USER>", "1700000002.000100")
        assert (await world.send_event(again)).json()["outcome"] == "queued"
        await world.slack.wait_for("chat.postMessage", 2)
        assert len(world.slack.of("users.info")) == 2
