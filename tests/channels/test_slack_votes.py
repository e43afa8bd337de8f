"""Votes from Slack on a call routed to an approver group: an approver's press through its mapped
key counts as its vote (told privately how many are still needed), a non-approver's press is
answered privately and changes nothing, and the press that reaches the quorum decides."""

from __future__ import annotations

import json

from tests.channels.conftest import SlackWorld, SlackWorldFactory
from tests.channels.slack_fake import event_body, press_body
from tests.channels.test_slack_inbound import pending_status
from tests.conftest import call, script

ROUTED = script([call("refund", order_id="L1", amount=900)], "refunded", text="refund L1")
SETTINGS = {"agents": ["tests.routing.kit:CLI_AGENT"], "slack_agent": "payments"}


async def routed_approval_posted(world: SlackWorld, user: str) -> tuple[str, str]:
    ts = "1700000009.000100"
    assert (await world.send_event(event_body("Ev-routed", user, ROUTED, ts))).json()["outcome"] == "queued"
    [approval] = await world.slack.wait_for("chat.postMessage")
    blocks = approval["blocks"] if isinstance(approval["blocks"], list) else json.loads(approval["blocks"])
    [actions] = [b for b in blocks if b["type"] == "actions"]
    posted = [ts for (_, ts), m in world.slack.messages.items() if m["text"] == approval["text"]]
    return actions["elements"][0]["value"], posted[0]


async def test_slack_presses_are_votes_of_the_mapped_keys(slack_world: SlackWorldFactory) -> None:
    async with slack_world(**SETTINGS) as world:
        await world.map_user("U0", "operator")  # asks
        ann = await world.map_user("U1", "operator")
        bob = await world.map_user("U2", "operator")
        await world.map_user("U3", "operator")  # not in finance
        group = {"workspace": "default", "name": "finance", "members": [str(ann.key.id), str(bob.key.id)]}
        assert (await world.http.post("/v1/groups", json=group)).status_code == 201
        correlation_id, ts = await routed_approval_posted(world, "U0")

        outsider = await world.send_press(press_body("U3", correlation_id, "sursis_approve", ts))
        assert outsider.json() == {"ok": True, "outcome": "refused"}
        [notice] = await world.slack.wait_for("chat.postEphemeral")
        assert notice["user"] == "U3" and "none of this call's approvers" in notice["text"]

        voted = await world.send_press(press_body("U1", correlation_id, "sursis_approve", ts))
        assert voted.json() == {"ok": True, "outcome": "voted"}
        [_, counted] = await world.slack.wait_for("chat.postEphemeral", 2)
        assert counted["user"] == "U1" and "1 of 2 approvals, 1 still needed" in counted["text"]
        assert world.slack.of("chat.update") == []  # not decided: the message keeps its buttons

        again = await world.send_press(press_body("U1", correlation_id, "sursis_approve", ts))
        assert again.json() == {"ok": True, "outcome": "refused"}
        [*_, twice] = await world.slack.wait_for("chat.postEphemeral", 3)
        assert "already counted" in twice["text"]

        decided = await world.send_press(press_body("U2", correlation_id, "sursis_approve", ts))
        assert decided.json() == {"ok": True, "outcome": "decided"}
        call_now = await pending_status(world, correlation_id)
        assert call_now["status"] == "approved"
        assert [v["approver"] for v in call_now["votes"]] == [str(ann.key.id), str(bob.key.id)]


async def test_an_escalation_posts_the_call_with_its_buttons_to_another_channel(
    slack_world: SlackWorldFactory,
) -> None:
    async with slack_world(**SETTINGS) as world:
        await world.map_user("U0", "operator")
        pat = await world.map_user("U5", "operator")
        group = {"workspace": "default", "name": "on-call", "members": [str(pat.key.id)]}
        assert (await world.http.post("/v1/groups", json=group)).status_code == 201
        turn = script([call("refund", order_id="L3", amount=900)], "refunded", text="refund L3")
        ts = "1700000010.000100"
        assert (await world.send_event(event_body("Ev-escalated", "U0", turn, ts))).json()[
            "outcome"
        ] == "queued"
        await world.slack.wait_for("chat.postMessage")  # the request, in the conversation's thread
        # After the 1 s escalation, the sweeper puts the call before the on-call channel.
        [_, escalated] = await world.slack.wait_for("chat.postMessage", 2)
        assert escalated["channel"] == "C0ESCAL"
        blocks = (
            escalated["blocks"] if isinstance(escalated["blocks"], list) else json.loads(escalated["blocks"])
        )
        [actions] = [b for b in blocks if b["type"] == "actions"]
        correlation_id = actions["elements"][0]["value"]
        bindings = (await world.http.get("/v1/channels/bindings")).json()
        assert "oncall@example.com" in json.dumps(bindings)  # and the address hears of it by email

        posted = [t for (channel, t), m in world.slack.messages.items() if channel == "C0ESCAL"]
        decided = await world.send_press(press_body("U5", correlation_id, "sursis_approve", posted[0]))
        assert decided.json() == {"ok": True, "outcome": "decided"}
        call_now = await pending_status(world, correlation_id)
        assert (call_now["status"], call_now["escalation_level"]) == ("approved", 1)
