"""A plain pydantic-ai agent in a process of its own, governed by the real app over HTTP through
`sursis.integrations.pydantic_ai` (on SQLite and PostgreSQL): an approval runs its tool once and
closes the audit trail, a denial reaches the model as a denial, a quorum of two and the reviewer rung
decide as they do for hosted calls, an agent killed while it waits and started again files the same
request and gets its decision (one effect), and one that never returns shows as abandoned."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path
from typing import Any

from sursis.domain.access import Role
from tests.api.conftest import Live, LiveFactory
from tests.attacks.approval_request_attacks import expire
from tests.conftest import KeyMaker, eventually

ROOT = Path(__file__).resolve().parents[2]


async def spawn(live: Live, key: str, conversation: str, effects: Path) -> asyncio.subprocess.Process:
    """The agent process (`tests/external/agent_process.py`), talking to the served app."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "tests.external.agent_process",
        live.base_url,
        key,
        conversation,
        str(effects),
        cwd=ROOT,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )


async def finished(process: asyncio.subprocess.Process) -> dict[str, Any]:
    out, err = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, err.decode()[-3000:]
    report: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return report


async def filed(live: Live, conversation: str) -> dict[str, Any]:
    """The agent's awaiting call, once its process filed it (the inbox shows it)."""

    async def look() -> dict[str, Any] | None:
        items = (await live.http.get("/v1/pending")).json()["items"]
        return next((p for p in items if p["tool_name"] == "wire_money"), None)

    found: dict[str, Any] = await eventually(look, limit=60)
    return found


async def actions(live: Live, cid: str) -> list[str]:
    rows = (await live.http.get(f"/v1/audit?correlation_id={cid}&order=asc")).json()["items"]
    return [row["action"] for row in rows]


async def test_killed_while_waiting_then_approved_runs_once(
    live: LiveFactory, keys: KeyMaker, tmp_path: Path
) -> None:
    effects = tmp_path / "effects.txt"
    async with live() as app:
        key = await keys.make(Role.USER, name="billing-bot")
        first = await spawn(app, key, "thread-1", effects)
        pending = await filed(app, "thread-1")
        first.send_signal(signal.SIGKILL)
        await first.wait()

        second = await spawn(app, key, "thread-1", effects)
        resolve = f"/v1/pending/{pending['correlation_id']}/resolve"
        approved = await app.http.post(resolve, json={"decision": "approve", "reason": "expected"})
        assert approved.status_code == 200, approved.text
        report = await finished(second)

        assert report["output"] == "success: wired 900"
        assert effects.read_text().splitlines() == ["wired 900"]
        me = (await app.http.get("/v1/me")).json()["id"]
        assert report["answered_by"] == {"call-1": me}
        everything = (await app.http.get("/v1/pending?status=all")).json()["items"]
        assert [p["correlation_id"] for p in everything] == [pending["correlation_id"]]  # filed once
        cid = pending["correlation_id"]
        request = (await app.http.get(f"/v1/approvals/{cid}")).json()
        assert (request["state"], request["outcome"]) == ("ran", "ran")
        assert await actions(app, cid) == [
            "approval.requested",
            "pending.approved",
            "approval.consumed",
            "approval.outcome",
        ]


async def test_a_denial_reaches_the_model_as_a_denial(
    live: LiveFactory, keys: KeyMaker, tmp_path: Path
) -> None:
    effects = tmp_path / "effects.txt"
    async with live() as app:
        key = await keys.make(Role.USER, name="billing-bot")
        agent = await spawn(app, key, "thread-2", effects)
        pending = await filed(app, "thread-2")
        resolve = f"/v1/pending/{pending['correlation_id']}/resolve"
        denied = await app.http.post(resolve, json={"decision": "deny", "reason": "over budget"})
        assert denied.status_code == 200, denied.text
        report = await finished(agent)
        assert report["output"] == "denied: Denied by the approvers: over budget"
        assert report["outcomes"] == {"call-1": "denied"}
        assert not effects.exists()
        assert (await app.http.get(f"/v1/approvals/{pending['correlation_id']}")).json()["state"] == "denied"


async def test_an_agent_that_never_returns_is_shown_as_abandoned(
    live: LiveFactory, keys: KeyMaker, tmp_path: Path
) -> None:
    effects = tmp_path / "effects.txt"
    async with live() as app:
        key = await keys.make(Role.USER, name="billing-bot")
        agent = await spawn(app, key, "thread-3", effects)
        pending = await filed(app, "thread-3")
        agent.send_signal(signal.SIGKILL)
        await agent.wait()
        cid = pending["correlation_id"]
        approved = await app.http.post(f"/v1/pending/{cid}/resolve", json={"decision": "approve"})
        assert approved.status_code == 200, approved.text
        assert (await app.http.get(f"/v1/approvals/{cid}")).json()["state"] == "approved"
        await expire(app.settings.database_url, cid)
        shown = (await app.http.get(f"/v1/approvals/{cid}")).json()
        assert (shown["state"], shown["consumed_at"], shown["outcome"]) == ("abandoned", None, None)
        listed = (await app.http.get("/v1/approvals/abandoned")).json()
        assert [r["correlation_id"] for r in listed] == [cid]
        assert not effects.exists()


async def test_a_quorum_of_two_decides_the_agents_call(
    live: LiveFactory, keys: KeyMaker, tmp_path: Path
) -> None:
    effects = tmp_path / "effects.txt"
    async with live() as app:
        people = {name: await keys.issue(Role.OPERATOR, name=name) for name in ("ann", "bob")}
        members = [str(issued.key.id) for issued in people.values()]
        group = {"workspace": "default", "name": "finance", "members": members}
        assert (await app.http.post("/v1/groups", json=group)).status_code == 201
        rule = {
            "id": "wires",
            "effect": "ask",
            "when": 'context.tool == "wire_money" && context.agent == "billing-bot"',
            "route": {"groups": ["finance"], "quorum": 2},
        }
        assert (await app.http.put("/v1/policies", json={"rules": [rule]})).status_code == 200
        key = await keys.make(Role.USER, name="billing-bot")
        agent = await spawn(app, key, "thread-4", effects)
        pending = await filed(app, "thread-4")
        assert (pending["quorum"], pending["still_needed"]) == (2, 2)
        resolve = f"/v1/pending/{pending['correlation_id']}/resolve"
        for issued in people.values():
            vote = await app.http.post(
                resolve, json={"decision": "approve"}, headers={"Authorization": f"Bearer {issued.secret}"}
            )
            assert vote.status_code == 200, vote.text
        report = await finished(agent)
        assert report["output"] == "success: wired 900"
        assert sorted(report["answered_by"]["call-1"].split(", ")) == sorted(members)
        assert effects.read_text().splitlines() == ["wired 900"]


async def test_the_reviewer_rung_approves_a_routine_call(
    live: LiveFactory, keys: KeyMaker, tmp_path: Path
) -> None:
    effects = tmp_path / "effects.txt"
    answer = json.dumps({"verdict": "no", "reason": "a routine supplier payment"})
    rule = {
        "id": "routine-wires",
        "effect": "ask",
        "when": 'context.tool == "wire_money"',
        "route": {
            "reviewer": {
                "model": "scripted",
                "question": f"Is this payment unusual?\nSCRIPT: {json.dumps([answer])}",
                "acts": "approve",
            }
        },
    }
    async with live(reviewer_poll_seconds=0.1) as app:
        assert (await app.http.put("/v1/policies", json={"rules": [rule]})).status_code == 200
        key = await keys.make(Role.USER, name="billing-bot")
        report = await finished(await spawn(app, key, "thread-5", effects))
        assert report["output"] == "success: wired 900"
        assert report["answered_by"] == {"call-1": "reviewer:scripted"}
        assert effects.read_text().splitlines() == ["wired 900"]
