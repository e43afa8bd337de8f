"""Property: near-valid variants of Slack's requests, correctly signed, with their real content types
(JSON for the Events API, a form-encoded `payload` for interactivity), answer 2xx or a 4xx
problem+json that stored nothing; never a 5xx. Malformed signature headers are a 401."""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlencode

import pytest
import sqlalchemy as sa
from hypothesis import given
from hypothesis import strategies as st

from sursis.infra.db import channel_tables as ch
from sursis.infra.db import tables as t
from sursis.infra.db.engine import create_engine
from tests.channels.conftest import SlackWorld, SlackWorldFactory
from tests.channels.slack_fake import CHANNEL, TEAM, sign
from tests.near_valid import EDGE, TIMESTAMPS, Variant, every_variant, near_valid

PROBLEM = "application/problem+json"
# The fake Slack is served from another thread, whose use of `random` hypothesis would take for
# the strategy's own (the strategies here use none).
pytestmark = pytest.mark.filterwarnings("ignore::hypothesis.errors.HypothesisDeprecationWarning")
TABLES = (
    t.conversations,
    t.runs,
    t.messages,
    ch.slack_events,
    ch.channel_bindings,
    t.outbox,
    t.pending_calls,
)

# Slack's documented shapes: a message event and a block_actions press (api.slack.com).
MESSAGE_EVENT = {
    "token": "legacy-verification-token",
    "team_id": TEAM,
    "api_app_id": "A0APP",
    "type": "event_callback",
    "event_id": "Ev0PV7S0P4",
    "event_time": 1700000000,
    "event": {
        "type": "message",
        "channel": CHANNEL,
        "user": "U1",
        "text": "a &lt; b &amp;&amp; c <@U0USER>",
        "ts": "1700000001.000100",
        "thread_ts": "1700000000.000100",
    },
}
PRESS = {
    "type": "block_actions",
    "team": {"id": TEAM, "domain": "example"},
    "user": {"id": "U1", "team_id": TEAM},
    "channel": {"id": CHANNEL},
    "trigger_id": "13345224609.738474920.8088930838d88f008e0",
    "container": {"type": "message", "message_ts": "1.0", "channel_id": CHANNEL},
    "response_url": "https://hooks.slack.invalid/actions/1",
    "actions": [
        {
            "type": "button",
            "action_id": "sursis_approve",
            "block_id": "sursis:x",
            "value": "00000000-0000-4000-8000-000000000000",
            "action_ts": "1700000001.000200",
        }
    ],
}


SUBMISSION = {
    "type": "view_submission",
    "team": {"id": TEAM, "domain": "example"},
    "user": {"id": "U1", "team_id": TEAM},
    "view": {
        "id": "V0VIEW",
        "type": "modal",
        "callback_id": "sursis_decision",
        "private_metadata": json.dumps(
            {
                "correlation_id": "00000000-0000-4000-8000-000000000000",
                "decision": "revise",
                "channel_id": CHANNEL,
                "message_ts": "1700000001.000100",
            }
        ),
        "state": {"values": {"reason": {"reason": {"type": "plain_text_input", "value": "shorter"}}}},
    },
}
FRESH_EVENT = {("event_id",): st.uuids().map(lambda u: f"Ev{u.hex[:16].upper()}")}


class Stored:
    def __init__(self, database_url: str) -> None:
        self._engine = create_engine(database_url)

    async def snapshot(self) -> tuple[int, ...]:
        async with self._engine.connect() as conn:
            return tuple(
                [int(await conn.scalar(sa.select(sa.func.count()).select_from(x)) or 0) for x in TABLES]
            )

    async def close(self) -> None:
        await self._engine.dispose()


@pytest.fixture
async def world(slack_world: SlackWorldFactory) -> AsyncIterator[tuple[SlackWorld, Stored]]:
    """The app without a worker: nothing is written in the background between two snapshots."""
    async with slack_world(run_worker=False) as opened:
        await opened.map_user("U1", "operator")
        stored = Stored(opened.database_url)
        yield opened, stored
        await stored.close()


async def check(
    world: tuple[SlackWorld, Stored], route: str, content_type: str, body: bytes, **headers: Any
) -> int:
    app, stored = world
    before = await stored.snapshot()
    response = await app.http.post(
        route, content=body, headers={"Content-Type": content_type, **sign(body), **headers}
    )
    assert response.status_code < 500, (body[:300], headers, response.text)
    if response.status_code >= 400:
        assert response.headers["content-type"].startswith(PROBLEM), response.text
        assert response.json()["code"], response.text
        assert await stored.snapshot() == before, (body[:300], headers)
    return response.status_code


@EDGE
@given(variant=near_valid(MESSAGE_EVENT, FRESH_EVENT))
async def test_near_valid_slack_events(world: tuple[SlackWorld, Stored], variant: Variant) -> None:
    await check(world, "/v1/channels/slack/events", "application/json", variant.body)


def as_form(variant: Variant) -> bytes:
    """The payload as Slack sends it: `payload=<url-encoded JSON>` (bytes that are not UTF-8 stay so)."""
    try:
        text = variant.body.decode()
    except UnicodeDecodeError:
        return b"payload=" + variant.body
    return urlencode({"payload": text}).encode()


@EDGE
@given(variant=st.one_of(near_valid(PRESS), near_valid(SUBMISSION)))
async def test_near_valid_slack_interactions(world: tuple[SlackWorld, Stored], variant: Variant) -> None:
    await check(
        world, "/v1/channels/slack/interactions", "application/x-www-form-urlencoded", as_form(variant)
    )


HEADER_VALUES = st.one_of(
    TIMESTAMPS,
    st.integers(min_value=-(10**15), max_value=10**15).map(str),
    st.text(max_size=20).filter(lambda s: s.isascii() and s.isprintable()),
)


@EDGE
@given(timestamp=HEADER_VALUES, route=st.sampled_from(["events", "interactions"]))
async def test_malformed_slack_timestamps_are_a_bad_signature(
    world: tuple[SlackWorld, Stored], timestamp: str, route: str
) -> None:
    app, stored = world
    body = (
        json.dumps(MESSAGE_EVENT).encode()
        if route == "events"
        else as_form(Variant(json.dumps(PRESS).encode(), ""))
    )
    before = await stored.snapshot()
    headers = {**sign(body), "X-Slack-Request-Timestamp": timestamp}
    response = await app.http.post(f"/v1/channels/slack/{route}", content=body, headers=headers)
    now = int(time.time())
    if timestamp.isdigit() and abs(int(timestamp) - now) <= 300:  # pragma: no cover - a lucky draw
        return
    assert response.status_code == 401, (timestamp, response.text)
    assert response.json()["code"] == "bad_signature"
    assert await stored.snapshot() == before


async def test_each_field_of_each_slack_example_dropped_or_mistyped(world: tuple[SlackWorld, Stored]) -> None:
    for index, variant in enumerate(every_variant(MESSAGE_EVENT)):
        body = variant.body.replace(b'"Ev0PV7S0P4"', f'"EvEvery{index}"'.encode())
        await check(world, "/v1/channels/slack/events", "application/json", body)
    for example in (PRESS, SUBMISSION):
        for variant in every_variant(example):
            await check(
                world,
                "/v1/channels/slack/interactions",
                "application/x-www-form-urlencoded",
                as_form(variant),
            )
