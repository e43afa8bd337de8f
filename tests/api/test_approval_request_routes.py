"""Filed approval requests meet the same policy point as hosted calls, on SQLite and PostgreSQL: a
quorum-2 rule asks two people of a group (never the agent's own key), a route's reviewer model
approves a routine call, and a stored pre-approval clears a call at once."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from sursis.app.main import create_app
from sursis.domain.access import Role
from sursis.domain.sanitize import args_hash
from tests.conftest import KeyMaker, bearer, make_settings

ANSWER = json.dumps({"verdict": "no", "reason": "a receipt is routine"})
POLICY = {
    "rules": [
        {
            "id": "wires",
            "effect": "ask",
            "when": 'context.tool == "wire_money" && context.channel == "external"',
            "route": {"groups": ["finance"], "quorum": 2},
        },
        {
            "id": "receipts",
            "effect": "ask",
            "when": 'context.tool == "send_receipt"',
            "route": {
                "reviewer": {
                    "model": "scripted",
                    "question": f"Is sending this receipt unusual?\nSCRIPT: {json.dumps([ANSWER])}",
                    "acts": "approve",
                }
            },
        },
    ]
}


@pytest.fixture
async def served(seeded: str) -> AsyncIterator[AsyncTestClient[Any]]:
    """The app with its worker, whose loops include the reviewer's."""
    settings = make_settings(seeded, run_worker=True, reviewer_poll_seconds=0.1)
    async with AsyncTestClient(app=create_app(settings)) as client:
        yield client


def filing(tool: str, **args: Any) -> dict[str, Any]:
    return {"tool_name": tool, "args": args, "agent": "billing-bot", "conversation": "t1"}


async def test_quorum_reviewer_and_pre_approval(served: AsyncTestClient[Any], keys: KeyMaker) -> None:
    client = served
    admin = bearer(await keys.make(Role.ADMIN))
    people = {name: await keys.issue(Role.OPERATOR, name=name) for name in ("ann", "bob")}
    auth = {name: bearer(issued.secret) for name, issued in people.items()}
    members = [str(issued.key.id) for issued in people.values()]
    group = {"workspace": "default", "name": "finance", "members": members}
    assert (await client.post("/v1/groups", json=group, headers=admin)).status_code == 201
    stored = await client.put("/v1/policies", json=POLICY, headers=admin)
    assert stored.status_code == 200, stored.text
    agent = bearer(await keys.make(Role.USER, name="billing-bot"))

    wire = (await client.post("/v1/approvals", json=filing("wire_money", amount=900), headers=agent)).json()
    cid = wire["correlation_id"]
    assert (wire["state"], wire["pending"]["quorum"], wire["pending"]["policy"]["rule"]) == (
        "awaiting",
        2,
        "wires",
    )
    resolve = f"/v1/pending/{cid}/resolve"
    first = await client.post(resolve, json={"decision": "approve"}, headers=auth["ann"])
    assert first.status_code == 200, first.text
    assert (await client.get(f"/v1/approvals/{cid}", headers=agent)).json()["state"] == "awaiting"
    assert (await client.post(resolve, json={"decision": "approve"}, headers=auth["bob"])).status_code == 200
    decided = (await client.get(f"/v1/approvals/{cid}?wait=5", headers=agent)).json()
    assert decided["state"] == "approved"
    assert sorted(decided["answered_by"]) == sorted(members)

    receipt = (
        await client.post("/v1/approvals", json=filing("send_receipt", to="a@b.c"), headers=agent)
    ).json()
    assert receipt["state"] == "awaiting"
    reviewed = (await client.get(f"/v1/approvals/{receipt['correlation_id']}?wait=20", headers=agent)).json()
    assert (reviewed["state"], reviewed["answered_by"]) == ("approved", ["reviewer:scripted"])

    grant = {"tool_name": "replay_dlq_event", "reason": "replays are fine today"}
    assert (await client.post("/v1/authorizations", json=grant, headers=admin)).status_code == 201
    replay = filing("replay_dlq_event", event_id="evt_9", reason="stuck")
    cleared = (await client.post("/v1/approvals", json=replay, headers=agent)).json()
    assert cleared["state"] == "approved"
    assert cleared["answered_by"][0].startswith("authorization:")
    consumed = await client.post(
        f"/v1/approvals/{cleared['correlation_id']}/consume",
        json={"digest": args_hash("replay_dlq_event", replay["args"])},
        headers=agent,
    )
    assert consumed.status_code == 200, consumed.text
