"""Adopted agents with real processes killed mid-resume, on SQLite (`sursis serve`, API and worker in
one process, restarted) and PostgreSQL (an API and workers, the worker replaced):

* an MCP call the server received but whose result was not recorded is not sent again: a destructive
  tool's call becomes a pending call "outcome unknown" for a person; a read-only tool's is sent again;
* a gated call inside an agent another agent's tool runs (`run_agent`) is applied once, whether the
  kill comes as the inner agent resumes or after the call ran but before its outcome was stored.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from sursis.domain.clock import utcnow
from sursis.infra.db.engine import create_engine
from sursis.infra.db.uow import SqlUnitOfWorkFactory
from sursis.infra.demo import seed_demo
from tests.agents.mcp.desk import received
from tests.conftest import _truncate_pg, admin_headers, call, script
from tests.faults.processes import Cluster, free_port, wait_exit, wait_ready

KILLED = -signal.SIGKILL
AGENTS = "customer,tests.faults.mcp_nested_agents:AGENTS"


@dataclass
class Deployment:
    """The service in processes: on SQLite one `serve` (restarted after a kill), on PostgreSQL an API
    and a worker (the worker replaced)."""

    cluster: Cluster
    sqlite: bool
    env: dict[str, str]
    base: str = ""
    doomed: subprocess.Popen[bytes] | None = None
    replacement: subprocess.Popen[bytes] | None = field(default=None)

    async def start(self, crash_at: str) -> None:
        if self.sqlite:
            self.doomed, self.base = await self._serve(crash_at)
        else:
            _, self.base = await self.cluster.api()
            self.doomed = self.cluster.worker(crash_at=crash_at, **self.env)

    async def _serve(self, crash_at: str | None) -> tuple[subprocess.Popen[bytes], str]:
        port = free_port()
        process = self.cluster._spawn(
            ["serve", "--port", str(port)], self.cluster.env(crash_at, **self.env), "serve"
        )
        base = f"http://127.0.0.1:{port}"
        await wait_ready(process, base)
        return process, base

    async def replace_when_dead(self) -> None:
        assert self.doomed is not None
        if self.doomed.poll() is None or self.replacement is not None:
            return
        if self.sqlite:
            self.replacement, self.base = await self._serve(None)
        else:
            self.replacement = self.cluster.worker(**self.env)

    async def get(self, client: httpx.AsyncClient, path: str, **params: Any) -> Any:
        await self.replace_when_dead()
        try:
            response = await client.get(f"{self.base}{path}", params=params)
        except httpx.TransportError:
            return None
        return response.json() if response.status_code == 200 else None

    async def settle(self, client: httpx.AsyncClient, run_id: str, statuses: set[str]) -> Any:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            run = await self.get(client, f"/v1/runs/{run_id}", wait=1)
            if run is not None and run["status"] in statuses:
                return run
            if run is None:
                await _pause()
        raise AssertionError(f"run never reached {statuses}")


async def _pause() -> None:
    import asyncio

    await asyncio.sleep(0.2)


@pytest.fixture(params=["sqlite", "postgresql"])
async def deployment(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Deployment]:
    if request.param == "sqlite":
        target = tmp_path / "sursis.db"
        shutil.copy(request.getfixturevalue("sqlite_template"), target)
        url = f"sqlite+aiosqlite:///{target}"
    else:
        url = request.getfixturevalue("pg_migrated")
        await _truncate_pg(url)
    engine = create_engine(url)
    await seed_demo(SqlUnitOfWorkFactory(engine), "default", utcnow())
    await engine.dispose()
    cluster = Cluster(url, tmp_path, headers=await admin_headers(url))
    cluster.settings["SURSIS_AGENTS"] = AGENTS
    effects = tmp_path / "effects"
    effects.mkdir()
    env = {"DESK_CALLS": str(tmp_path / "desk-calls.jsonl"), "ADOPTED_EFFECTS_DIR": str(effects)}
    try:
        yield Deployment(cluster, request.param == "sqlite", env)
    finally:
        cluster.stop_all()


def _refunded(effects: Path) -> list[str]:
    return sorted(p.name for p in effects.glob("refunded-*"))


async def _start_run(deployment: Deployment, client: httpx.AsyncClient, agent: str, turn: str) -> str:
    base = deployment.base
    conversation = (await client.post(f"{base}/v1/conversations", json={"agent": agent})).json()["id"]
    sent = await client.post(f"{base}/v1/conversations/{conversation}/messages", json={"content": turn})
    assert sent.status_code == 202, sent.text
    run_id: str = sent.json()["id"]
    return run_id


async def test_a_destructive_mcp_call_whose_result_was_lost_asks_a_person_instead_of_a_second_call(
    deployment: Deployment,
) -> None:
    calls = Path(deployment.env["DESK_CALLS"])
    await deployment.start("tool_effect_committed:delete_ticket")
    turn = script([call("delete_ticket", ticket_id="T1")], "done")
    async with httpx.AsyncClient(timeout=30, headers=deployment.cluster.headers) as client:
        run_id = await _start_run(deployment, client, "desk", turn)
        suspended = await deployment.settle(client, run_id, {"suspended"})
        [approval] = suspended["pending"]
        assert (approval["tool_name"], approval["kind"]) == ("delete_ticket", "approval")
        decided = await client.post(
            f"{deployment.base}/v1/pending/{approval['correlation_id']}/resolve", json={"decision": "approve"}
        )
        assert decided.status_code == 200, decided.text
        assert deployment.doomed is not None
        assert await wait_exit(deployment.doomed, 60) == KILLED, "the crash point was never reached"
        # The server received the call once; the replacement does not send it again but asks.
        asked = await deployment.settle(client, run_id, {"suspended"})
        [unknown] = [p for p in asked["pending"] if p["status"] == "awaiting"] or asked["pending"]
        assert (unknown["tool_name"], unknown["kind"]) == ("delete_ticket", "elicitation")
        assert unknown["tool_call_id"] == approval["tool_call_id"]
        assert "outcome_unknown" in unknown["args"]["review"]
        assert len(received(calls, "delete_ticket")) == 1
        answered = await client.post(
            f"{deployment.base}/v1/pending/{unknown['correlation_id']}/resolve",
            json={"decision": "answer", "result": "checked: T1 is deleted"},
        )
        assert answered.status_code == 200, answered.text
        done = await deployment.settle(client, run_id, {"completed"})
        assert done["output"] == "done"
    assert len(received(calls, "delete_ticket")) == 1


async def test_a_read_only_mcp_call_whose_result_was_lost_is_sent_again(deployment: Deployment) -> None:
    calls = Path(deployment.env["DESK_CALLS"])
    await deployment.start("tool_effect_committed:lookup_ticket")
    turn = script([call("lookup_ticket", ticket_id="R1")], "done")
    async with httpx.AsyncClient(timeout=30, headers=deployment.cluster.headers) as client:
        run_id = await _start_run(deployment, client, "desk", turn)
        assert deployment.doomed is not None
        assert await wait_exit(deployment.doomed, 60) == KILLED
        done = await deployment.settle(client, run_id, {"completed"})
        assert done["output"] == "done"
        assert done.get("pending", []) == []
    assert [c["args"]["ticket_id"] for c in received(calls, "lookup_ticket")] == ["R1", "R1"]


@pytest.mark.parametrize("crash_at", ["delegation_resumed", "tool_effect_committed:refund"])
@pytest.mark.parametrize("caller", ["concierge", "customer"])
async def test_a_gated_call_inside_an_agent_run_by_another_is_applied_once_after_a_kill(
    deployment: Deployment, crash_at: str, caller: str
) -> None:
    """`concierge` runs `billing` with `run_agent`; the built-in `customer` supervisor consults it as
    an adopted specialist."""
    effects = Path(deployment.env["ADOPTED_EFFECTS_DIR"])
    inner = json.dumps([[call("refund", order_id="A1")], "billing: refunded A1"])
    task = f"refund A1\nSCRIPT: {inner}"
    asks = (
        call("ask_billing", request=task)
        if caller == "concierge"
        else call("delegate", specialist="billing", task=task)
    )
    turn = script([asks], "done")
    await deployment.start(crash_at)
    async with httpx.AsyncClient(timeout=30, headers=deployment.cluster.headers) as client:
        run_id = await _start_run(deployment, client, caller, turn)
        suspended = await deployment.settle(client, run_id, {"suspended"})
        [pending] = suspended["pending"]
        assert (pending["tool_name"], pending["agent"], pending["agent_path"]) == (
            "refund",
            "billing",
            f"{caller}/billing",
        )
        assert _refunded(effects) == []
        decided = await client.post(
            f"{deployment.base}/v1/pending/{pending['correlation_id']}/resolve", json={"decision": "approve"}
        )
        assert decided.status_code == 200, decided.text
        assert deployment.doomed is not None
        assert await wait_exit(deployment.doomed, 60) == KILLED, "the crash point was never reached"
        done = await deployment.settle(client, run_id, {"completed"})
        assert done["output"] == "done"
        records = await deployment.get(client, f"/v1/runs/{run_id}/tool-calls")
        assert sorted(r["tool_name"] for r in records) == sorted([asks["tool"], "refund"])
    [refunded] = _refunded(effects)
    assert refunded == f"refunded-{pending['tool_call_id']}"
    attempts = (effects / "attempts.log").read_text().split()
    assert set(attempts) == {pending["tool_call_id"]}
    assert len(attempts) == (2 if crash_at.startswith("tool_effect_committed") else 1)
