"""An adopted pydantic-ai `Agent` with a `requires_approval=True` tool: it suspends into the table, is
approved over HTTP and resumes exactly once, even when the worker is SIGKILLed mid-resume."""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import call, script
from tests.faults.processes import Cluster, start_run, wait_exit

KILLED = -signal.SIGKILL
TURN = script([call("find_invoice", invoice_id="INV-7")], [call("pay_invoice", invoice_id="INV-7")], "paid")


@pytest.mark.parametrize(
    # Before the approved call runs, and after it ran but before its outcome was stored.
    "crash_at",
    ["segment_resumed", "tool_effect_committed:pay_invoice"],
)
async def test_an_adopted_agents_approval_resumes_once_after_a_kill(
    cluster: Cluster, tmp_path: Path, crash_at: str
) -> None:
    effects = tmp_path / "effects"
    effects.mkdir()
    cluster.settings["SURSIS_AGENTS"] = "tests.faults.adopted_agent:AGENTS"
    _, base = await cluster.api()
    doomed = cluster.doomed_worker(crash_at, ADOPTED_EFFECTS_DIR=str(effects))
    async with httpx.AsyncClient(timeout=30, headers=cluster.headers) as client:
        _, run_id = await start_run(client, base, TURN, agent="payer")
        suspended = await doomed.settle(client, base, run_id, {"suspended"})
        [pending] = suspended["pending"]
        assert (pending["tool_name"], pending["kind"], pending["agent"]) == (
            "pay_invoice",
            "approval",
            "payer",
        )
        assert list(effects.iterdir()) == [], "nothing is paid before the approval"
        decided = await client.post(
            f"{base}/v1/pending/{pending['correlation_id']}/resolve", json={"decision": "approve"}
        )
        assert decided.status_code == 200, decided.text
        done = await doomed.settle(client, base, run_id, {"completed"})
        assert await wait_exit(doomed.process) == KILLED, "the crash point was never reached"
        assert done["output"] == "paid"

        records = (await client.get(f"{base}/v1/runs/{run_id}/tool-calls")).json()
        assert sorted(r["tool_name"] for r in records) == ["find_invoice", "pay_invoice"]
        audit = (
            await client.get(f"{base}/v1/audit", params={"correlation_id": pending["correlation_id"]})
        ).json()
        assert [e["action"] for e in audit["items"]].count("pending.approved") == 1
    [paid] = [p.name for p in effects.glob("paid-*")]
    assert paid == f"paid-{pending['tool_call_id']}"
    attempts = (effects / "attempts.log").read_text().split()
    # Dispatched again only when the kill came after the tool ran, and then with the same call id.
    assert set(attempts) == {pending["tool_call_id"]}
    assert len(attempts) == (2 if crash_at.startswith("tool_effect_committed") else 1)


async def test_a_tool_that_gates_itself_asks_again_after_a_kill_before_it_asked(
    cluster: Cluster, tmp_path: Path
) -> None:
    """The worker dies after the model's call was stored, before the tool asked: the call is dispatched
    again, and the tool must see it as not approved (nobody approved it), so it asks a person."""
    effects = tmp_path / "effects"
    effects.mkdir()
    cluster.settings["SURSIS_AGENTS"] = "tests.faults.adopted_agent:AGENTS"
    _, base = await cluster.api()
    doomed = cluster.worker(crash_at="tool_started:refund_invoice", ADOPTED_EFFECTS_DIR=str(effects))
    turn = script([call("refund_invoice", invoice_id="INV-8")], "refunded")
    async with httpx.AsyncClient(timeout=30, headers=cluster.headers) as client:
        _, run_id = await start_run(client, base, turn, agent="payer")
        assert await wait_exit(doomed) == KILLED, "the crash point was never reached"
        cluster.worker(ADOPTED_EFFECTS_DIR=str(effects))
        deadline = time.monotonic() + 60
        run: Any = None
        while time.monotonic() < deadline:
            run = (await client.get(f"{base}/v1/runs/{run_id}", params={"wait": 1})).json()
            if run["status"] in {"suspended", "completed", "failed"}:
                break
        assert run is not None and run["status"] == "suspended", run
        [pending] = run["pending"]
        assert (pending["tool_name"], pending["kind"]) == ("refund_invoice", "approval")
        assert list(effects.glob("paid-*")) == [], "nothing is refunded before a person approves"
