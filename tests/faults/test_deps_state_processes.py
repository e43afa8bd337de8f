"""The deps state of an adopted agent (`StateDeps`) is restored for the resumed segment by another
worker process: the one that ran the tools is SIGKILLed while the run waits for its approval."""

from __future__ import annotations

import signal

import httpx

from tests.conftest import call, script
from tests.faults.processes import Cluster, start_run, wait_exit

TURN = script(
    [call("load", table="sales")], [call("load", table="costs")], [call("publish", ref="Out[2]")], "done"
)


async def test_the_deps_state_is_restored_by_another_worker_process(cluster: Cluster) -> None:
    cluster.settings["SURSIS_AGENTS"] = "tests.faults.state_agent:AGENTS"
    _, base = await cluster.api()
    first = cluster.worker()
    async with httpx.AsyncClient(timeout=30, headers=cluster.headers) as client:
        _, run_id = await start_run(client, base, TURN, agent="analyst")
        for _ in range(60):
            run = (await client.get(f"{base}/v1/runs/{run_id}", params={"wait": 1})).json()
            if run["status"] == "suspended":
                break
        [pending] = run["pending"]
        assert pending["tool_name"] == "publish"
        first.send_signal(signal.SIGKILL)
        assert await wait_exit(first) == -signal.SIGKILL
        cluster.worker()
        decided = await client.post(
            f"{base}/v1/pending/{pending['correlation_id']}/resolve", json={"decision": "approve"}
        )
        assert decided.status_code == 200, decided.text
        for _ in range(60):
            run = (await client.get(f"{base}/v1/runs/{run_id}", params={"wait": 1})).json()
            if run["status"] == "completed":
                break
        assert run["status"] == "completed", run
        records = (await client.get(f"{base}/v1/runs/{run_id}/tool-calls")).json()
    [published] = [r for r in records if r["tool_name"] == "publish"]
    assert published["result"]["result"] == {"ref": "Out[2]", "loaded": ["sales", "costs"]}
