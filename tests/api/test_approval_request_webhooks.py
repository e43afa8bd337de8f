"""A filed approval request reaches the webhooks like any pending call (on SQLite and PostgreSQL):
`pending.created` when it waits, `pending.resolved` when it is decided, both signed."""

from __future__ import annotations

import json
import time

from sursis.domain.access import Role
from sursis.domain.events.webhooks import verify
from tests.api.conftest import LiveFactory
from tests.api.live import Receiver, serve
from tests.conftest import KeyMaker, bearer


async def test_a_filed_request_is_announced_and_its_decision_too(live: LiveFactory, keys: KeyMaker) -> None:
    receiver = Receiver()
    async with (
        serve(receiver, lifespan="off") as receiver_url,
        live(webhook_allow_private_hosts=True) as app,
    ):
        hook = {"url": receiver_url + "/hooks", "events": ["pending.created", "pending.resolved"]}
        registered = (await app.http.post("/v1/webhooks", json=hook)).json()
        agent = bearer(await keys.make(Role.USER))
        filing = {"tool_name": "wire_money", "args": {"amount": 5}, "agent": "billing-bot"}
        filed = await app.http.post("/v1/approvals", json=filing, headers=agent)
        assert filed.status_code == 201, filed.text
        cid = filed.json()["correlation_id"]
        await receiver.wait_for(1)
        decided = await app.http.post(f"/v1/pending/{cid}/resolve", json={"decision": "deny", "reason": "no"})
        assert decided.status_code == 200, decided.text
        await receiver.wait_for(2)

    now = int(time.time())
    bodies = []
    for headers, body in receiver.requests:
        assert verify(registered["secret"], headers["sursis-signature"], body, now=now)
        bodies.append(json.loads(body))
    bodies.sort(key=lambda b: b["id"])
    assert [(b["type"], b["data"]["correlation_id"]) for b in bodies] == [
        ("pending.created", cid),
        ("pending.resolved", cid),
    ]
    assert bodies[0]["data"]["tool_name"] == "wire_money" and "args" not in bodies[0]["data"]
    assert bodies[1]["data"]["status"] == "denied"
