"""A stored structured output is final: a worker killed after the response that holds it was
stored (and before the run was marked completed) does not ask the model again; the next worker
completes the run with that output."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import httpx

from tests.faults.processes import Cluster, start_run, wait_exit


async def test_a_worker_killed_after_a_structured_output_was_stored_does_not_ask_again(
    cluster: Cluster, tmp_path: Path
) -> None:
    directory = tmp_path / "judge"
    directory.mkdir()
    cluster.settings["SURSIS_AGENTS"] = "tests.faults.structured_agent:AGENTS"
    _, base = await cluster.api()
    doomed = cluster.worker(crash_at="tool_started:record_note", STRUCTURED_DIR=str(directory))
    async with httpx.AsyncClient(timeout=30, headers=cluster.headers) as client:
        _, run_id = await start_run(client, base, "judge it", agent="judge")
        assert await wait_exit(doomed, 60) == -signal.SIGKILL, "the crash point was never reached"
        assert (directory / "requests.log").read_text().split() == ["request"]
        cluster.worker(STRUCTURED_DIR=str(directory))
        deadline = time.monotonic() + 60
        while True:
            run = (await client.get(f"{base}/v1/runs/{run_id}", params={"wait": 2})).json()
            if run["status"] in ("completed", "failed"):
                break
            assert time.monotonic() < deadline, run
        assert run["status"] == "completed", run
        assert run["output"] == {"approved": True, "note": "first answer"}, "the output is JSON, not text"
    assert (directory / "requests.log").read_text().split() == ["request"], "the model was asked again"
    # The note was taken once: the killed dispatch died before the tool ran.
    assert (directory / "notes.log").read_text().split("\n")[:-1] == ["first answer"]
