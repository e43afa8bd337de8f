"""Agents written as their authors would, each its own package under `packages/`, installed with the
built wheel into a fresh venv and served by `sursis serve --agents ...` (SQLite, the worker in the
process): an agent whose tools come from an MCP server over stdio, and the customer supervisor
delegating to an adopted specialist. For each: a gated call approved over HTTP, its effect counted
once; then again with the process SIGKILLed as the run resumes, and a new `serve` finishing it.
"""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.packaging.installing import clean_env

pytestmark = pytest.mark.packaging

PACKAGES = Path(__file__).resolve().parent / "packages"
KILLED = -signal.SIGKILL


@pytest.fixture
def venv(adoption_bin: Path) -> Path:
    """The adoption session's venv: the built wheel with every package, `mcp-desk` and
    `billing-specialist` among them."""
    return adoption_bin


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextlib.contextmanager
def _serving(bin_dir: Path, cwd: Path, agents: list[str], crash_at: str | None, **env: str) -> Iterator[Any]:
    """`sursis serve --agents ...` from the venv, on the SQLite database in `cwd`; yields the process
    and its base URL once healthy."""
    port = _free_port()
    extra = {
        "SURSIS_DATABASE_URL": f"sqlite+aiosqlite:///{cwd / 'sursis.db'}",
        "SURSIS_LOG_JSON": "true",
        "SURSIS_ADMIN_KEY_FILE": str(cwd / "admin.key"),
        "SURSIS_LEASE_SECONDS": "2",
        "SURSIS_SWEEP_SECONDS": "0.5",
        "SURSIS_WORKER_POLL_SECONDS": "0.2",
        **env,
    }
    if crash_at:
        extra["SURSIS_CRASH_AT"] = crash_at
    args = [a for name in agents for a in ("--agents", name)]
    with (cwd / f"serve-{port}.log").open("w") as out:
        process = subprocess.Popen(
            [str(bin_dir / "sursis"), "serve", "--port", str(port), *args],
            cwd=cwd,
            env=clean_env(bin_dir, **extra),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, (cwd / f"serve-{port}.log").read_text()
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{base}/healthz", timeout=2).status_code == 200:
                    break
            assert time.monotonic() < deadline
            time.sleep(0.2)
        yield process, base
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _migrate(bin_dir: Path, cwd: Path) -> None:
    url = f"sqlite+aiosqlite:///{cwd / 'sursis.db'}"
    done = subprocess.run(
        [str(bin_dir / "sursis"), "migrate"],
        cwd=cwd,
        env=clean_env(bin_dir, SURSIS_DATABASE_URL=url),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


def _client(base: str, cwd: Path) -> httpx.Client:
    key = (cwd / "admin.key").read_text().strip()
    return httpx.Client(base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=30)


def _start(http: httpx.Client, agent: str, steps: list[Any]) -> dict[str, Any]:
    conversation = http.post("/v1/conversations", json={"agent": agent})
    assert conversation.status_code == 201, conversation.text
    content = f"please\nSCRIPT: {json.dumps(steps)}"
    run: dict[str, Any] = http.post(
        f"/v1/conversations/{conversation.json()['id']}/messages",
        params={"wait": 30},
        json={"content": content},
    ).json()
    assert run["status"] == "suspended", run
    return run


def _approve(http: httpx.Client, pending: dict[str, Any]) -> None:
    decided = http.post(f"/v1/pending/{pending['correlation_id']}/resolve", json={"decision": "approve"})
    assert decided.status_code == 200, decided.text


def _finish(
    bin_dir: Path, cwd: Path, agents: list[str], run_id: str, process: Any, crash_at: str | None, **env: str
) -> dict[str, Any]:
    """The run once completed: waited for on this process, or, after the crash point killed it, on a
    new `serve` over the same database."""
    if crash_at is None:
        return {}
    deadline = time.monotonic() + 60
    while process.poll() is None:
        assert time.monotonic() < deadline, "the crash point was never reached"
        time.sleep(0.1)
    assert process.returncode == KILLED
    with _serving(bin_dir, cwd, agents, None, **env) as (_, base), _client(base, cwd) as http:
        deadline = time.monotonic() + 60
        while True:
            run: dict[str, Any] = http.get(f"/v1/runs/{run_id}", params={"wait": 2}).json()
            if run["status"] == "completed" or time.monotonic() > deadline:
                return run


@pytest.mark.parametrize("crash_at", [None, "segment_resumed"])
def test_an_mcp_agent_over_stdio(venv: Path, tmp_path: Path, crash_at: str | None) -> None:
    _migrate(venv, tmp_path)
    calls = tmp_path / "desk-calls.jsonl"
    agents = ["adoption_mcp_desk.agents:AGENTS"]
    steps = [
        [{"tool": "lookup_ticket", "args": {"ticket_id": "T1"}}],
        [{"tool": "delete_ticket", "args": {"ticket_id": "T1"}}],
        "Deleted.",
    ]
    with (
        _serving(venv, tmp_path, agents, crash_at, DESK_CALLS=str(calls)) as (process, base),
        _client(base, tmp_path) as http,
    ):
        tools = {t["name"]: t for t in http.get("/v1/agents").json()[0]["tools"]}
        assert (tools["lookup_ticket"]["category"], tools["delete_ticket"]["category"]) == ("read", "mutate")
        assert tools["delete_ticket"]["annotations"]["destructiveHint"] is True
        run = _start(http, "desk", steps)
        [pending] = run["pending"]
        assert (pending["tool_name"], pending["kind"]) == ("delete_ticket", "approval")
        _approve(http, pending)
        if crash_at is None:
            done = http.get(f"/v1/runs/{run['id']}", params={"wait": 30}).json()
    if crash_at is not None:
        done = _finish(venv, tmp_path, agents, run["id"], process, crash_at, DESK_CALLS=str(calls))
    assert (done["status"], done["output"]) == ("completed", "Deleted."), done
    received = [json.loads(line) for line in calls.read_text().splitlines()]
    assert [c["tool"] for c in received if c["tool"] == "delete_ticket"] == ["delete_ticket"]


@pytest.mark.parametrize("crash_at", [None, "delegation_resumed"])
def test_the_customer_supervisor_delegating_to_an_adopted_specialist(
    venv: Path, tmp_path: Path, crash_at: str | None
) -> None:
    _migrate(venv, tmp_path)
    refunds = tmp_path / "refunds"
    refunds.mkdir()
    agents = ["customer", "adoption_billing.agents:AGENTS"]
    inner = json.dumps([[{"tool": "refund", "args": {"invoice_id": "INV-7"}}], "refunded INV-7"])
    steps = [
        [{"tool": "delegate", "args": {"specialist": "billing", "task": f"refund INV-7\nSCRIPT: {inner}"}}],
        "Your refund is done.",
    ]
    with (
        _serving(venv, tmp_path, agents, crash_at, REFUNDS_DIR=str(refunds)) as (process, base),
        _client(base, tmp_path) as http,
    ):
        run = _start(http, "customer", steps)
        [pending] = run["pending"]
        assert (pending["tool_name"], pending["agent"], pending["agent_path"]) == (
            "refund",
            "billing",
            "customer/billing",
        )
        assert list(refunds.glob("refunded-*")) == []
        _approve(http, pending)
        if crash_at is None:
            done = http.get(f"/v1/runs/{run['id']}", params={"wait": 30}).json()
    if crash_at is not None:
        done = _finish(venv, tmp_path, agents, run["id"], process, crash_at, REFUNDS_DIR=str(refunds))
    assert (done["status"], done["output"]) == ("completed", "Your refund is done."), done
    assert [p.name for p in refunds.glob("refunded-*")] == [f"refunded-{pending['tool_call_id']}"]
    assert (refunds / "attempts.log").read_text().split() == [pending["tool_call_id"]]
