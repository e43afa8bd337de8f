"""A conversation an event starts reaches the workspace's users: the workspace stream and webhooks,
on a real socket."""

from __future__ import annotations

import json

from sursis.domain.access import Role
from tests.api.conftest import LiveFactory
from tests.api.live import EventStream, Receiver, serve
from tests.api.test_platform_events import scan_completed
from tests.conftest import KeyMaker, bearer, new_id


async def test_a_started_conversation_is_streamed_and_sent_to_webhooks(
    live: LiveFactory, keys: KeyMaker
) -> None:
    system = bearer(await keys.make(Role.SYSTEM))
    user = bearer(await keys.make(Role.USER))
    receiver = Receiver()
    async with (
        serve(receiver, lifespan="off") as receiver_url,
        live(webhook_allow_private_hosts=True) as app,
    ):
        hook = await app.http.post(
            "/v1/webhooks", json={"url": receiver_url + "/hooks", "events": ["conversation.started"]}
        )
        assert hook.status_code == 201, hook.text
        async with EventStream(app.http, path="/v1/pending/events", headers=user) as stream:
            assert (await stream.next_message()).comment == "connected"
            event_id = new_id()
            accepted = (
                await app.http.post("/v1/events", json=scan_completed(event_id), headers=system)
            ).json()
            message = await stream.next_message()
            while message.event != "conversation.started":
                message = await stream.next_message()
        await receiver.wait_for(1)

    started = message.data["data"]
    assert started["conversation_id"] == accepted["conversation_id"]
    assert started["initiator"] == "system"
    assert started["event"] == {"id": event_id, "type": "scan.completed"}
    [(headers, body)] = receiver.requests
    delivered = json.loads(body)
    assert headers["sursis-event-type"] == "conversation.started"
    assert delivered["data"]["run_id"] == accepted["run_id"]


async def test_a_nested_call_is_announced_with_its_agent_path(live: LiveFactory) -> None:
    from tests.conftest import call, script
    from tests.customer_scripts import delegation

    turn = script([delegation("troubleshooter", [call("rerun_scan", scan_id="scan_103", reason="timeout")])])
    async with live() as app, EventStream(app.http, path="/v1/pending/events") as stream:
        assert (await stream.next_message()).comment == "connected"
        cid = (await app.http.post("/v1/conversations", json={"agent": "customer"})).json()["id"]
        posted = await app.http.post(f"/v1/conversations/{cid}/messages", json={"content": turn})
        assert posted.status_code in (200, 202), posted.text
        message = await stream.next_message()
        while message.event != "pending.created":
            message = await stream.next_message()

    created = message.data["data"]
    assert created["tool_name"] == "rerun_scan"
    assert created["agent"] == "troubleshooter"
    assert created["agent_path"] == "customer/troubleshooter"
    assert created["effect_description"] == "Re-run scan scan_103"
