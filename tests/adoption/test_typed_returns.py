"""Tools that return what pydantic-ai tools return (`typed_agent.py`): every value is stored as
pydantic-ai serializes it (sealed where encryption is on), shown as JSON, and replayed to the model as
it was first sent after the worker that stored it was SIGKILLed; a value nothing can store is a tool
error the model reads, naming its type, and the run goes on."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from sursis import Service
from sursis.infra.db.engine import create_engine
from sursis.testing import expect_pending, resolve_and_settle
from tests.adoption.typed_agent import AGENTS, EXPECTED, PNG, RETURNS, seen
from tests.faults.processes import ROOT, Cluster, wait_exit

FILE = seen(RETURNS["a_file"])
METADATA = {
    "source": "geocoder",
    "fetched_on": "2026-03-14",
    "request": "6f1c3a52-1d43-4c1e-9a0b-6b0cde7f2f10",
}
UNSTORABLE = "The tool returned a value of type object, which cannot be stored as JSON"


def requests_seen(directory: Path, prompt: str) -> dict[int, list[Any]]:
    """The parts of each request the model was sent in the conversation started by `prompt`, by the
    number of responses before it (the last one logged for each)."""
    lines = [json.loads(line) for line in (directory / "requests.jsonl").read_text().splitlines()]
    return {line["responses"]: line["parts"] for line in lines if line["prompt"] == prompt}


def as_values(parts: list[Any]) -> list[Any]:
    """Parts with a failure's text read as the JSON it holds, where it holds JSON: PostgreSQL's jsonb
    keeps an object's keys in an order of its own, so a replayed outcome is the same JSON value, not
    the same text."""
    return [
        {**p, "content": _json_or_text(p["content"])} if p.get("outcome") == "failed" else p for p in parts
    ]


def _json_or_text(content: str) -> Any:
    try:
        return json.loads(content)
    except ValueError:
        return content


def check_model_view(parts: list[Any]) -> None:
    """The request after the typed calls, as the model read it."""
    returns = {p["tool"]: p for p in parts if "tool" in p}
    for name, expected in EXPECTED.items():
        assert (returns[name]["outcome"], returns[name]["content"]) == ("success", expected), name
    assert returns["a_file"]["content"] == FILE, "a file is sent to the model as a file"
    assert returns["a_tool_return"]["metadata"] == METADATA
    assert returns["unstorable"]["outcome"] == "failed"
    assert UNSTORABLE in returns["unstorable"]["content"]
    # A ToolReturn's content goes beside the results, its file as a file.
    assert {"prompt": ["The map of the route:", FILE]} in parts


def check_stored(results: dict[str, Any]) -> None:
    """`tool_calls.result` of each typed call, as the API shows it."""
    for name, expected in EXPECTED.items():
        assert results[name]["ok"] is True and results[name]["result"] == expected, name
    stored_file = results["a_file"]["result"]
    assert (stored_file["kind"], stored_file["media_type"]) == ("binary", "image/png")
    assert base64.b64decode(stored_file["data"]) == PNG
    extra = results["a_tool_return"]["tool_return"]
    assert extra["metadata"] == METADATA and extra["content"][0] == "The map of the route:"
    error = results["unstorable"]["error"]
    assert results["unstorable"]["ok"] is False
    assert (error["class"], error["code"]) == ("ToolTerminalError", "UNSTORABLE_RESULT")
    assert UNSTORABLE in error["message"]
    assert results["book_flight"]["result"] == [EXPECTED["a_dataclass"]]


@pytest.mark.parametrize("sealed", [False, True], ids=["plain", "sealed"])
async def test_every_typed_result_is_stored_shown_and_sent_as_json(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sealed: bool
) -> None:
    monkeypatch.setenv("TYPED_DIR", str(tmp_path))
    keys = {"encryption_keys": f"k1:{base64.b64encode(os.urandom(32)).decode()}"} if sealed else {}
    async with Service.open(database_url, agents=AGENTS, **keys) as svc:
        conversation = await svc.start_conversation("traveller")
        await svc.send(conversation.id, "trip in process")
        [call] = await expect_pending(svc, tool_name="book_flight")
        view = await resolve_and_settle(svc, call, "approve")
        assert (view.run.status, view.run.output, view.run.error) == ("completed", "Booked.", None)
        records = await svc.container.runs.list_tool_calls(svc.principal, view.run.id)
        check_stored({r.metadata.tool_name: r.result for r in records})
        events = [e async for e in svc.events(conversation.id, follow=False)]
        results = {e.data["tool_name"]: e.data for e in events if e.type == "tool.result"}
        assert results["a_model"]["result"] == EXPECTED["a_model"]
        assert results["unstorable"]["ok"] is False
    check_model_view(requests_seen(tmp_path, "trip in process")[1])
    engine = create_engine(database_url)
    try:
        async with engine.connect() as conn:
            stored = [str(row) for row in await conn.execute(sa.text("SELECT result FROM tool_calls"))]
    finally:
        await engine.dispose()
    assert ("AF1234" in " ".join(stored)) is not sealed, "results are sealed where encryption is on"


async def test_typed_results_are_replayed_as_stored_after_the_worker_is_killed(
    cluster: Cluster, tmp_path: Path
) -> None:
    """The worker dies once every typed call's outcome is stored, before the model saw them: the next
    worker replays the stored outcomes (no tool runs twice) and the model is sent what a run that was
    never killed sends. Then the gated call is approved and the results are read over HTTP and the CLI."""
    directory = tmp_path / "typed"
    directory.mkdir()
    cluster.settings["SURSIS_AGENTS"] = "tests.adoption.typed_agent:AGENTS"
    _, base = await cluster.api()
    env = {"TYPED_DIR": str(directory)}
    typed = len(RETURNS)
    doomed = cluster.worker(crash_at=f"tool_outcome_recorded#{typed}", **env)
    async with httpx.AsyncClient(base_url=base, timeout=30, headers=cluster.headers) as client:

        async def turn(prompt: str) -> tuple[str, str]:
            cid = (await client.post("/v1/conversations", json={"agent": "traveller"})).json()["id"]
            posted = await client.post(f"/v1/conversations/{cid}/messages", json={"content": prompt})
            return cid, posted.json()["id"]

        async def settle(run_id: str, statuses: set[str]) -> Any:
            deadline = time.monotonic() + 60
            while True:
                run = (await client.get(f"/v1/runs/{run_id}", params={"wait": 1})).json()
                if run["status"] in statuses:
                    return run
                assert time.monotonic() < deadline, run

        cid, run_id = await turn("trip killed")
        assert await wait_exit(doomed, 60) == -signal.SIGKILL, "the crash point was never reached"
        assert sorted((directory / "calls.log").read_text().split()) == sorted(RETURNS)
        assert 1 not in requests_seen(directory, "trip killed"), "the model saw the results before the kill"
        cluster.worker(**env)
        suspended = await settle(run_id, {"suspended", "completed", "failed"})
        assert suspended["status"] == "suspended", suspended
        # Replayed from the stored outcomes: no typed tool ran again.
        assert sorted((directory / "calls.log").read_text().split()) == sorted(RETURNS)
        _, reference_id = await turn("trip never killed")
        assert (await settle(reference_id, {"suspended", "failed"}))["status"] == "suspended"
        replayed = requests_seen(directory, "trip killed")[1]
        check_model_view(replayed)
        assert as_values(replayed) == as_values(requests_seen(directory, "trip never killed")[1])

        [pending] = suspended["pending"]
        shown = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "sursis.app.cli", "pending", "show", pending["correlation_id"]],
            cwd=ROOT,
            env={**cluster.env(), "SURSIS_API_URL": base, "SURSIS_API_KEY": _key(cluster)},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert shown.returncode == 0, shown.stderr
        assert '{"flight_number": "AF1234"}' in shown.stdout
        decided = await client.post(
            f"/v1/pending/{pending['correlation_id']}/resolve", json={"decision": "approve"}
        )
        assert decided.status_code == 200, decided.text
        done = await settle(run_id, {"completed", "failed"})
        assert (done["status"], done["output"]) == ("completed", "Booked."), done

        records = (await client.get(f"/v1/runs/{run_id}/tool-calls")).json()
        check_stored({r["tool_name"]: r["result"] for r in records})
        # What the inbox shows of the conversation: its messages, the results in them as JSON.
        messages = (await client.get(f"/v1/conversations/{cid}")).json()["messages"]
        returned = {
            part["tool_name"]: part["content"]
            for message in messages
            for part in message["message"].get("parts", [])
            if part.get("part_kind") == "tool-return"
        }
        for name, expected in EXPECTED.items():
            assert returned[name] == expected, name
        audit = await client.get("/v1/audit", params={"conversation_id": cid})
        assert audit.status_code == 200
        assert "pending.approved" in [e["action"] for e in audit.json()["items"]]


def _key(cluster: Cluster) -> str:
    return cluster.headers["Authorization"].removeprefix("Bearer ")
