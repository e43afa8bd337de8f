"""At most once, or a person is asked: an adopted tool that changes things and is not declared
idempotent (`wire_money`) is never run a second time after its worker died (or its database went
away) while it ran; the call becomes an "outcome unknown" pending call a person answers. An
idempotent one (`pay_invoice`, `ToolOptions(idempotent=True)`) runs again with the same
`tool_call_id`: `test_adopted_agent.py`.
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from sqlalchemy.engine import make_url

from sursis.infra.db.engine import create_engine
from tests.conftest import call, script
from tests.faults.processes import Cluster, start_run, wait_exit

KILLED = -signal.SIGKILL
TURN = script([call("wire_money", invoice_id="INV-9")], "wired")


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


async def _settle(client: httpx.AsyncClient, base: str, run_id: str, statuses: set[str]) -> Any:
    deadline = time.monotonic() + 60
    run: Any = None
    while time.monotonic() < deadline:
        run = (await client.get(f"{base}/v1/runs/{run_id}", params={"wait": 1})).json()
        if run["status"] in statuses:
            return run
    raise AssertionError(f"run never reached {statuses}: {run}")


async def _outcome_unknown_then_answered(
    client: httpx.AsyncClient, base: str, run_id: str, wires: Path, tool: str = "wire_money"
) -> None:
    """The run waits on an "outcome unknown" call; answered, it completes, and nothing ran again."""
    run = await _settle(client, base, run_id, {"suspended", "completed", "failed"})
    assert run["status"] == "suspended", run
    [pending] = run["pending"]
    assert (pending["tool_name"], pending["kind"]) == (tool, "elicitation")
    assert "outcome_unknown" in pending["args"]["review"], pending["args"]
    [line] = _lines(wires)
    assert line.split()[0] == pending["tool_call_id"]
    answered = await client.post(
        f"{base}/v1/pending/{pending['correlation_id']}/resolve",
        json={"decision": "answer", "result": {"wired": "INV-9", "checked_by": "a person"}},
    )
    assert answered.status_code == 200, answered.text
    done = await _settle(client, base, run_id, {"completed", "failed"})
    assert done["status"] == "completed", done
    assert _lines(wires) == [line], "the tool ran a second time"
    audit = (await client.get(f"{base}/v1/audit", params={"action": "tool.dispatched"})).json()["items"]
    marks = [e for e in audit if e["action"] == "tool.dispatched"]
    assert [e["details"]["tool_call_id"] for e in marks] == [pending["tool_call_id"]]


async def test_a_non_idempotent_tool_killed_mid_call_asks_a_person(cluster: Cluster, tmp_path: Path) -> None:
    effects = tmp_path / "effects"
    effects.mkdir()
    cluster.settings["SURSIS_AGENTS"] = "tests.faults.adopted_agent:AGENTS"
    _, base = await cluster.api()
    doomed = cluster.worker(crash_at="tool_effect_committed:wire_money", ADOPTED_EFFECTS_DIR=str(effects))
    async with httpx.AsyncClient(timeout=30, headers=cluster.headers) as client:
        _, run_id = await start_run(client, base, TURN, agent="payer")
        assert await wait_exit(doomed, 60) == KILLED, "the crash point was never reached"
        cluster.worker(ADOPTED_EFFECTS_DIR=str(effects))
        await _outcome_unknown_then_answered(client, base, run_id, effects / "wires.log")


@pytest.mark.parametrize("agent", ["capable", "drifting"], ids=["listed", "added at run time"])
async def test_a_capabilitys_non_idempotent_tool_killed_mid_call_asks_a_person(
    cluster: Cluster, tmp_path: Path, agent: str
) -> None:
    effects = tmp_path / "effects"
    effects.mkdir()
    cluster.settings["SURSIS_AGENTS"] = "tests.faults.adopted_agent:AGENTS"
    _, base = await cluster.api()
    doomed = cluster.worker(crash_at="tool_effect_committed:wire_money", ADOPTED_EFFECTS_DIR=str(effects))
    async with httpx.AsyncClient(timeout=30, headers=cluster.headers) as client:
        _, run_id = await start_run(client, base, TURN, agent=agent)
        assert await wait_exit(doomed, 60) == KILLED, "the crash point was never reached"
        cluster.worker(ADOPTED_EFFECTS_DIR=str(effects))
        await _outcome_unknown_then_answered(client, base, run_id, effects / "wires.log")


async def test_a_tool_nobody_declared_killed_mid_call_is_started_once(
    cluster: Cluster, tmp_path: Path
) -> None:
    """`charge_card` has no category and no option: the policy treats it as `read`, but nobody said a
    second run is harmless, so a worker killed while it ran leaves an "outcome unknown" call."""
    effects = tmp_path / "effects"
    effects.mkdir()
    cluster.settings["SURSIS_AGENTS"] = "tests.faults.adopted_agent:AGENTS"
    _, base = await cluster.api()
    doomed = cluster.worker(crash_at="tool_effect_committed:charge_card", ADOPTED_EFFECTS_DIR=str(effects))
    async with httpx.AsyncClient(timeout=30, headers=cluster.headers) as client:
        turn = script([call("charge_card", invoice_id="INV-9")], "charged")
        _, run_id = await start_run(client, base, turn, agent="payer")
        assert await wait_exit(doomed, 60) == KILLED, "the crash point was never reached"
        cluster.worker(ADOPTED_EFFECTS_DIR=str(effects))
        await _outcome_unknown_then_answered(client, base, run_id, effects / "charges.log", "charge_card")


async def test_a_non_idempotent_tool_whose_database_went_away_mid_call_asks_a_person(
    cluster: Cluster, tmp_path: Path
) -> None:
    """The database stops taking connections and drops the worker's while the tool runs: its outcome
    cannot be recorded, the segment is abandoned, and once the database is back the call asks a
    person instead of running again."""
    effects = tmp_path / "effects"
    effects.mkdir()
    cluster.settings["SURSIS_AGENTS"] = "tests.faults.adopted_agent:AGENTS"
    _, base = await cluster.api()
    cluster.worker(ADOPTED_EFFECTS_DIR=str(effects), WIRE_HOLD=str(effects / "release"))
    database = make_url(cluster.database_url).database
    admin = create_engine(make_url(cluster.database_url).set(database="postgres").render_as_string(False))
    try:
        async with httpx.AsyncClient(timeout=30, headers=cluster.headers) as client:
            _, run_id = await start_run(client, base, TURN, agent="payer")
            wires = effects / "wires.log"
            deadline = time.monotonic() + 30
            while not wires.exists():
                assert time.monotonic() < deadline, "the tool never started"
                await asyncio.sleep(0.05)
            async with admin.connect() as conn:
                await conn.execution_options(isolation_level="AUTOCOMMIT")
                await conn.execute(sa.text(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS false'))
                await conn.execute(
                    sa.text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = :db AND pid <> pg_backend_pid()"
                    ),
                    {"db": database},
                )
                (effects / "release").touch()  # the tool returns while the database is away
                await asyncio.sleep(3)
                await conn.execute(sa.text(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true'))
            await _outcome_unknown_then_answered(client, base, run_id, wires)
    finally:
        async with admin.connect() as conn:
            await conn.execution_options(isolation_level="AUTOCOMMIT")
            await conn.execute(sa.text(f'ALTER DATABASE "{database}" ALLOW_CONNECTIONS true'))
        await admin.dispose()
