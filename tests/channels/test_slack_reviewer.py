"""A reviewer model's verdict in Slack: a call whose route names a reviewer is posted once the reviewer
has left it to people, with the verdict beside its buttons; a call the reviewer approved never pings
anyone, and its run's answer still reaches the thread."""

from __future__ import annotations

import json
from typing import Any

from sursis.domain.policy_decisions import ApprovalRoute
from sursis.domain.reviewer import ReviewerSpec
from tests.channels.conftest import SlackWorldFactory
from tests.channels.slack_fake import event_body
from tests.conftest import call, script
from tests.routing.kit import payments_agent


def scripted(verdict: str, reason: str) -> ReviewerSpec:
    answer = json.dumps({"verdict": verdict, "reason": reason})
    return ReviewerSpec("scripted", f"Is this refund unusual?\nSCRIPT: {json.dumps([answer])}")


AGENT = payments_agent(
    {
        "R1": ApprovalRoute(reviewer=scripted("yes", "a large refund")),
        "R2": ApprovalRoute(reviewer=scripted("no", "routine")),
    }
)
"""Served by name (`tests.channels.test_slack_reviewer:AGENT`)."""
SETTINGS = {
    "agents": ["tests.channels.test_slack_reviewer:AGENT"],
    "slack_agent": "payments",
    "reviewer_poll_seconds": 0.1,
}


def texts(message: dict[str, Any]) -> str:
    blocks = message["blocks"] if isinstance(message["blocks"], list) else json.loads(message["blocks"])
    return json.dumps(blocks)


async def test_a_risky_verdict_is_posted_beside_the_buttons(slack_world: SlackWorldFactory) -> None:
    async with slack_world(**SETTINGS) as world:
        await world.map_user("U0", "operator")
        body = event_body(
            "Ev-r1", "U0", script([call("refund", order_id="R1", amount=900)], "ok"), "1700000001.0001"
        )
        assert (await world.send_event(body)).json()["outcome"] == "queued"
        [approval] = await world.slack.wait_for("chat.postMessage")
        shown = texts(approval)
        assert "Reviewer scripted asked" in shown and "risky (left to people)" in shown
        assert "a large refund" in shown and "sursis_approve" in shown  # the buttons are there
        assert "risky" in approval["text"]


async def test_a_call_the_reviewer_approved_pings_nobody(slack_world: SlackWorldFactory) -> None:
    async with slack_world(**SETTINGS) as world:
        await world.map_user("U0", "operator")
        body = event_body(
            "Ev-r2", "U0", script([call("refund", order_id="R2", amount=5)], "all done"), "1700000002.0001"
        )
        assert (await world.send_event(body)).json()["outcome"] == "queued"
        [answer] = await world.slack.wait_for("chat.postMessage")
        assert answer["text"] == "all done"  # the run's answer: no approval was ever posted
        assert world.slack.of("chat.update") == []
