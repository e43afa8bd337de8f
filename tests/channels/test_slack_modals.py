"""Deciding in Slack beyond a yes or no: a press is acknowledged at once, a denial can carry a reason
and a revision can be asked for, through Slack's modals (`views.open`, `view_submission`)."""

from __future__ import annotations

import json
from typing import Any

from tests.channels.conftest import SlackWorld, SlackWorldFactory
from tests.channels.slack_fake import CHANNEL, press_body, sign, submission_body
from tests.channels.test_slack_inbound import approval_posted, pending_status


async def open_modal(world: SlackWorld, correlation_id: str, ts: str, action: str) -> dict[str, Any]:
    response = await world.send_press(press_body("U1", correlation_id, action, ts, trigger_id="T-1"))
    assert response.json() == {"ok": True, "outcome": "modal_opened"}, response.text
    [opened] = world.slack.of("views.open")[-1:]
    assert opened["trigger_id"] == "T-1"
    view = opened["view"] if isinstance(opened["view"], dict) else json.loads(opened["view"])
    assert view["type"] == "modal" and view["callback_id"] == "sursis_decision"
    return dict(view)


async def submit(world: SlackWorld, view: dict[str, Any], reason: str | None) -> Any:
    body = submission_body("U1", view, reason)
    return await world.http.post(
        "/v1/channels/slack/interactions",
        content=body,
        headers={"Content-Type": "application/x-www-form-urlencoded", **sign(body)},
    )


async def test_an_approve_press_is_acknowledged_on_the_message_at_once(
    slack_world: SlackWorldFactory,
) -> None:
    async with slack_world(over_http=True) as world:
        await world.map_user("U1", "operator")
        correlation_id, ts = await approval_posted(world)
        updates_before = len(world.slack.of("chat.update"))
        response = await world.send_press(press_body("U1", correlation_id, "sursis_approve", ts))
        assert response.json() == {"ok": True, "outcome": "decided"}
        # Updated while the press was answered, not when the worker gets to it.
        [ack] = world.slack.of("chat.update")[updates_before : updates_before + 1]
        assert (ack["channel"], ack["ts"]) == (CHANNEL, ts)
        assert "approved by <@U1>" in json.dumps(ack["blocks"]) and "resuming" in json.dumps(ack["blocks"])
        assert (await pending_status(world, correlation_id))["status"] == "approved"


async def test_deny_with_a_reason_goes_through_a_modal(slack_world: SlackWorldFactory) -> None:
    async with slack_world(over_http=True) as world:
        await world.map_user("U1", "operator")
        correlation_id, ts = await approval_posted(world)
        view = await open_modal(world, correlation_id, ts, "sursis_deny_reason")
        assert (await pending_status(world, correlation_id))["status"] == "awaiting", (
            "opening decides nothing"
        )

        response = await submit(world, view, "  the DLQ is being drained by hand  ")
        assert response.status_code == 200 and response.content == b"", response.text
        call = await pending_status(world, correlation_id)
        assert call["status"] == "denied"
        assert call["reason"] == "the DLQ is being drained by hand"
        assert any("denied by <@U1>" in json.dumps(u["blocks"]) for u in world.slack.of("chat.update"))
        # A second submission of the same modal changes nothing.
        again = await submit(world, view, "other")
        assert again.status_code == 200
        assert (await pending_status(world, correlation_id))["reason"] == "the DLQ is being drained by hand"
        await world.slack.wait_for("chat.postEphemeral")


async def test_a_revision_needs_instructions_and_is_sent_to_the_agent(slack_world: SlackWorldFactory) -> None:
    async with slack_world(over_http=True) as world:
        await world.map_user("U1", "operator")
        correlation_id, ts = await approval_posted(world)
        view = await open_modal(world, correlation_id, ts, "sursis_revise")
        [block] = view["blocks"]
        assert block["optional"] is False

        empty = await submit(world, view, "   ")
        assert empty.json() == {
            "response_action": "errors",
            "errors": {"reason": "Say what the agent should change."},
        }
        assert (await pending_status(world, correlation_id))["status"] == "awaiting"
        too_long = await submit(world, view, "x" * 2001)
        assert too_long.json()["response_action"] == "errors"

        assert (await submit(world, view, "replay only evt_1002")).status_code == 200
        call = await pending_status(world, correlation_id)
        assert call["status"] == "revision_requested"
        assert call["reason"] == "replay only evt_1002"


async def test_a_forged_modal_metadata_is_ignored(slack_world: SlackWorldFactory) -> None:
    async with slack_world(over_http=True) as world:
        await world.map_user("U1", "operator")
        correlation_id, _ = await approval_posted(world)
        for metadata in (
            "",
            "not json",
            json.dumps({"correlation_id": correlation_id, "decision": "approve", "channel_id": CHANNEL}),
        ):
            view = {"callback_id": "sursis_decision", "private_metadata": metadata, "blocks": []}
            response = await submit(world, view, None)
            assert response.json() == {"ok": True, "outcome": "ignored"}, metadata
        assert (await pending_status(world, correlation_id))["status"] == "awaiting"
