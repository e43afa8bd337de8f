"""A reviewer model's verdict in Slack: the approval message gets the verdict beside its buttons when
the reviewer leaves the call to people, and the decided message names the reviewer when its `no`
approved the call."""

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


async def test_a_risky_verdict_is_shown_beside_the_buttons(slack_world: SlackWorldFactory) -> None:
    async with slack_world(**SETTINGS) as world:
        await world.map_user("U0", "operator")
        body = event_body(
            "Ev-r1", "U0", script([call("refund", order_id="R1", amount=900)], "ok"), "1700000001.0001"
        )
        assert (await world.send_event(body)).json()["outcome"] == "queued"
        await world.slack.wait_for("chat.postMessage")
        [update, *_] = await world.slack.wait_for("chat.update")
        shown = texts(update)
        assert "Reviewer scripted asked" in shown and "risky (left to people)" in shown
        assert "a large refund" in shown and "sursis_approve" in shown  # the buttons stay


async def test_a_reviewer_approval_names_the_reviewer(slack_world: SlackWorldFactory) -> None:
    async with slack_world(**SETTINGS) as world:
        await world.map_user("U0", "operator")
        body = event_body(
            "Ev-r2", "U0", script([call("refund", order_id="R2", amount=5)], "ok"), "1700000002.0001"
        )
        assert (await world.send_event(body)).json()["outcome"] == "queued"
        await world.slack.wait_for("chat.postMessage")

        async def decided() -> dict[str, Any]:
            while True:
                found = [u for u in world.slack.of("chat.update") if "approved by" in u["text"]]
                if found:
                    return found[-1]
                await world.slack.wait_for("chat.update", len(world.slack.of("chat.update")) + 1)

        update = await decided()
        assert "approved by reviewer:scripted" in update["text"]
        assert "not risky" in texts(update) and "routine" in texts(update)
        assert "sursis_approve" not in texts(update)
