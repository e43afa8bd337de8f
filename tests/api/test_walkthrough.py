"""The README walk-through, step by step over HTTP, in `default` and in another workspace."""

from __future__ import annotations

import json
from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from sursis.app.main import create_app
from sursis.domain.clock import utcnow
from sursis.infra.db.engine import create_engine
from sursis.infra.db.uow import SqlUnitOfWorkFactory
from sursis.infra.demo import demo_event_id, demo_event_ids, seed_demo
from tests.conftest import KeyMaker, bearer, make_settings


def test_demo_ids_carry_the_workspace_outside_default() -> None:
    assert demo_event_ids("default") == ["evt_1001", "evt_1002", "evt_1003", "evt_1004"]
    assert demo_event_id("ws1", "evt_1001") == "ws1:evt_1001"


@pytest.mark.parametrize("workspace", ["default", "ws1"])
async def test_the_walkthrough_works_in_any_workspace(seeded: str, keys: KeyMaker, workspace: str) -> None:
    engine = create_engine(seeded)
    await seed_demo(SqlUnitOfWorkFactory(engine), workspace, utcnow())
    await engine.dispose()
    event_id = demo_event_id(workspace, "evt_1001")
    key = await keys.make("operator", workspace)
    # As the README: a user key asks, the operator decides (a key never approves its own call).
    asker = bearer(await keys.make("user", workspace))
    async with AsyncTestClient(app=create_app(make_settings(seeded))) as client:
        client.headers.update(bearer(key))
        cid = (await client.post("/v1/conversations", json={"agent": "ops"}, headers=asker)).json()["id"]
        steps = [
            [{"tool": "list_dlq_events", "args": {}}],
            [{"tool": "replay_dlq_event", "args": {"event_id": event_id, "reason": "partner is back"}}],
        ]
        content = "Replay the timed-out invoice\nSCRIPT: " + json.dumps(steps)
        run: Any = (
            await client.post(
                f"/v1/conversations/{cid}/messages",
                params={"wait": 10},
                json={"content": content},
                headers=asker,
            )
        ).json()
        assert run["status"] == "suspended", run
        # What the README's jq line picks out: `[.id, .pending[0].correlation_id]`.
        run_id, correlation_id = run["id"], run["pending"][0]["correlation_id"]
        assert run["pending"][0]["effect_description"] == f"Replay DLQ event {event_id}"
        awaiting = (await client.get("/v1/pending", params={"status": "awaiting"})).json()["items"]
        assert [p["correlation_id"] for p in awaiting] == [correlation_id]
        approved = await client.post(f"/v1/pending/{correlation_id}/resolve", json={"decision": "approve"})
        assert approved.status_code == 200, approved.text
        done = (await client.get(f"/v1/runs/{run_id}", params={"wait": 10})).json()
        assert done["status"] == "completed", done
        [replay] = [
            t
            for t in (await client.get(f"/v1/runs/{run_id}/tool-calls")).json()
            if t["tool_name"] == "replay_dlq_event"
        ]
        assert replay["ok"] is True
