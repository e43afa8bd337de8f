"""The claim hand-off under SIGKILL: a `serve` process with its worker, killed before its message's
or decision's transaction commits the lease, after the commit but before its slot took the run, and
as the slot starts the segment. Nothing acknowledged is lost, nothing is done twice."""

from __future__ import annotations

import signal

import httpx
import pytest

from tests.faults.processes import Cluster, check_invariants, wait_exit, wait_status
from tests.faults.test_crash_recovery import TURN

KILLED = -signal.SIGKILL


async def _post_message(client: httpx.AsyncClient, base: str, cid: str) -> httpx.Response:
    return await client.post(f"{base}/v1/conversations/{cid}/messages", json={"content": TURN})


@pytest.mark.parametrize("crash_at", ["run_leased", "run_handed_off"])
async def test_a_process_killed_around_a_message_hand_off(cluster: Cluster, crash_at: str) -> None:
    doomed, doomed_base = await cluster.embedded(crash_at=crash_at)
    async with httpx.AsyncClient(timeout=30, headers=cluster.headers) as client:
        cid = (await client.post(f"{doomed_base}/v1/conversations", json={"agent": "ops"})).json()["id"]
        try:
            answer = await _post_message(client, doomed_base, cid)
            acknowledged: str | None = answer.json()["id"] if answer.status_code == 202 else None
        except httpx.TransportError:
            acknowledged = None
        assert await wait_exit(doomed) == KILLED
        assert acknowledged is None, "killed before its answer"
        _, base = await cluster.embedded()
        detail = (await client.get(f"{base}/v1/conversations/{cid}")).json()
        if crash_at == "run_leased":
            # Killed inside the transaction: nothing written; the client sends the message again.
            assert detail["active_run"] is None and detail["messages"] == []
            acknowledged = (await _post_message(client, base, cid)).json()["id"]
        else:
            # Committed, leased to the dead process: still leased, or re-queued once its lease ran
            # out (the new process's sweeper may have been first), or already run by then.
            assert detail["active_run"] is not None
            acknowledged = detail["active_run"]["id"]
        assert acknowledged is not None
        # Leased to the dead process: its lease runs out (2 s here), the sweeper re-queues it.
        suspended = await wait_status(client, base, acknowledged, {"suspended"})
        [pending] = suspended["pending"]
        decided = await client.post(
            f"{base}/v1/pending/{pending['correlation_id']}/resolve", json={"decision": "approve"}
        )
        assert decided.status_code == 200
        done = await wait_status(client, base, acknowledged, {"completed"})
        assert done["output"] == "done"
    assert (await check_invariants(cluster.database_url))["replays"] == 1


@pytest.mark.parametrize("crash_at", ["run_leased#2", "run_handed_off#2", "handed_run_started#2"])
async def test_a_process_killed_around_a_decision_hand_off(cluster: Cluster, crash_at: str) -> None:
    doomed, doomed_base = await cluster.embedded(crash_at=crash_at)
    async with httpx.AsyncClient(timeout=30, headers=cluster.headers) as client:
        cid = (await client.post(f"{doomed_base}/v1/conversations", json={"agent": "ops"})).json()["id"]
        run_id = (await _post_message(client, doomed_base, cid)).json()["id"]
        suspended = await wait_status(client, doomed_base, run_id, {"suspended"})
        correlation_id = suspended["pending"][0]["correlation_id"]
        try:
            answer = await client.post(
                f"{doomed_base}/v1/pending/{correlation_id}/resolve", json={"decision": "approve"}
            )
            decided = answer.status_code == 200
        except httpx.TransportError:
            decided = False
        assert await wait_exit(doomed) == KILLED
        _, base = await cluster.embedded()
        status = (await client.get(f"{base}/v1/pending/{correlation_id}")).json()["status"]
        if crash_at.startswith("run_leased"):
            # Killed before the decision committed: the call still awaits it, and gets it now.
            assert not decided and status == "awaiting"
            again = await client.post(
                f"{base}/v1/pending/{correlation_id}/resolve", json={"decision": "approve"}
            )
            assert again.status_code == 200
        else:
            assert status == "approved"
        done = await wait_status(client, base, run_id, {"completed"})
        assert done["output"] == "done"
        tools = [t["tool_name"] for t in (await client.get(f"{base}/v1/runs/{run_id}/tool-calls")).json()]
        assert sorted(tools) == ["list_dlq_events", "replay_dlq_event"]
    assert (await check_invariants(cluster.database_url))["replays"] == 1
