"""A gated call inside a specialist, with real processes on PostgreSQL: SIGKILL the worker while the
run is parked and while it resumes; the change is applied once and the specialist is not re-run."""

from __future__ import annotations

import signal

import httpx
import pytest
import sqlalchemy as sa

from sursis.infra.db.engine import create_engine
from tests.conftest import call, script
from tests.customer_scripts import delegation
from tests.faults.processes import Cluster, check_invariants, start_run, wait_exit

KILLED = -signal.SIGKILL
TURN = script(
    [
        delegation(
            "framework-advisor",
            [call("get_framework_config")],
            [call("apply_framework_change", changes={"score_threshold": 0.8}, reason="stricter gate")],
        )
    ],
    "done",
)


async def _framework_and_audit(database_url: str, conversation_id: str) -> tuple[int, list[str]]:
    engine = create_engine(database_url)
    try:
        async with engine.connect() as conn:
            version = (
                await conn.execute(
                    sa.text("SELECT version FROM framework_configs WHERE workspace = 'default'")
                )
            ).scalar_one()
            actions = (
                await conn.execute(
                    sa.text(
                        "SELECT action FROM audit_log WHERE conversation_id = :cid "
                        "AND action LIKE 'delegation.%' ORDER BY id"
                    ),
                    {"cid": conversation_id},
                )
            ).scalars()
            return int(version), list(actions)
    finally:
        await engine.dispose()


@pytest.mark.parametrize(
    "crash_at",
    [
        "parked",
        "delegation_suspended",
        "segment_resumed",
        "delegation_resumed",
        "tool_effect_committed:apply_framework_change",
        "tool_effect_committed:delegate",
    ],
)
async def test_a_framework_change_approved_after_a_sigkill_is_applied_once(
    cluster: Cluster, crash_at: str
) -> None:
    _, base = await cluster.api()
    doomed = cluster.doomed_worker(None if crash_at == "parked" else crash_at)
    async with httpx.AsyncClient(timeout=30, headers=cluster.headers) as client:
        cid, run_id = await start_run(client, base, TURN, agent="customer")
        suspended = await doomed.settle(client, base, run_id, {"suspended"})
        if crash_at == "parked":
            doomed.process.send_signal(signal.SIGKILL)
        [pending] = suspended["pending"]
        assert pending["agent_path"] == "customer/framework-advisor"
        assert pending["tool_name"] == "apply_framework_change"
        decided = await client.post(
            f"{base}/v1/pending/{pending['correlation_id']}/resolve", json={"decision": "approve"}
        )
        assert decided.status_code == 200, decided.text
        done = await doomed.settle(client, base, run_id, {"completed"})

        assert await wait_exit(doomed.process) == KILLED, "the crash point was never reached"
        assert done["output"] == "done"
        executed = sorted(
            t["tool_name"] for t in (await client.get(f"{base}/v1/runs/{run_id}/tool-calls")).json()
        )
        assert executed == ["apply_framework_change", "delegate", "get_framework_config"]
    version, actions = await _framework_and_audit(cluster.database_url, cid)
    assert version == 2, "the change was applied more than once (or never)"
    assert actions.count("delegation.started") == 1, actions
    assert actions[-1] == "delegation.completed", actions
    await check_invariants(cluster.database_url)
