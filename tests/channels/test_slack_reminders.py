"""A route's reminder before the deadline reaches the Slack thread the call was posted to, through
the real deliverer and a fake Slack that speaks Slack's wire format."""

from __future__ import annotations

from tests.channels.conftest import SlackWorldFactory
from tests.channels.slack_fake import event_body
from tests.conftest import call, script

SETTINGS = {"agents": ["tests.routing.kit:CLI_AGENT"], "slack_agent": "payments"}


async def test_a_reminder_is_posted_in_the_calls_thread(slack_world: SlackWorldFactory) -> None:
    async with slack_world(**SETTINGS) as world:
        await world.map_user("U0", "operator")
        turn = script([call("refund", order_id="L4", amount=900)], "refunded", text="refund L4")
        ts = "1700000011.000100"
        assert (await world.send_event(event_body("Ev-reminded", "U0", turn, ts))).json()[
            "outcome"
        ] == "queued"
        [request] = await world.slack.wait_for("chat.postMessage")
        assert request["text"].startswith("Approval needed: refund")
        # A quarter of the way to the 4 s deadline the sweeper reminds, in the same thread.
        [_, reminder] = await world.slack.wait_for("chat.postMessage", 2)
        assert reminder["channel"] == request["channel"]
        assert reminder["thread_ts"] == request["thread_ts"] == ts
        assert reminder["text"].startswith("Reminder: approval still needed: refund")
        assert "25% of its time has passed" in reminder["text"]
        bindings = (await world.http.get("/v1/channels/bindings")).json()
        assert bindings  # the thread the call was posted to
