"""`sursis pending ...` against the real app over a socket: list, show, decide, and what the inbox
(which reads `GET /v1/pending`) then shows."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from tests.api.conftest import LiveFactory
from tests.conftest import KeyMaker

STEPS = [[{"tool": "replay_dlq_event", "args": {"event_id": "evt_1001", "reason": "partner is back"}}]]


async def sursis(*args: str, url: str, key: str | None) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SURSIS_")}
    if key is not None:
        env["SURSIS_API_KEY"] = key
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "sursis.app.cli",
        *args,
        "--url",
        url,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


async def suspended_call(http: Any) -> str:
    cid = (await http.post("/v1/conversations", json={"agent": "ops"})).json()["id"]
    content = "Replay it\nSCRIPT: " + json.dumps(STEPS)
    run = (await http.post(f"/v1/conversations/{cid}/messages?wait=10", json={"content": content})).json()
    assert run["status"] == "suspended", run
    return str(run["pending"][0]["correlation_id"])


async def test_an_operator_lists_shows_and_approves_a_call_from_the_command_line(
    live: LiveFactory, keys: KeyMaker
) -> None:
    operator = await keys.make("operator", "default", name="alice")
    async with live() as app:
        correlation_id = await suspended_call(app.http)

        code, out, err = await sursis("pending", "list", url=app.base_url, key=operator)
        assert code == 0, err
        assert err == ""  # no request log around the answer
        assert correlation_id in out
        assert "replay_dlq_event" in out

        code, out, err = await sursis("pending", "list", "--json", url=app.base_url, key=operator)
        assert [c["correlation_id"] for c in json.loads(out)] == [correlation_id]

        code, out, err = await sursis("pending", "show", correlation_id, url=app.base_url, key=operator)
        assert code == 0, err
        assert "Replay DLQ event evt_1001" in out

        code, out, err = await sursis(
            "pending", "approve", correlation_id, "--json", url=app.base_url, key=operator
        )
        assert code == 0, err
        assert json.loads(out)["status"] == "approved"

        # The inbox's "recent decisions" read this listing: the call shows as decided, by alice's key.
        decided = (await app.http.get("/v1/pending", params={"status": "approved"})).json()["items"]
        assert [(c["correlation_id"], c["status"]) for c in decided] == [(correlation_id, "approved")]
        assert decided[0]["resolved_by"] != "cli"

        # A second call, still awaiting: `--status all` (and `status=all`) lists both.
        awaiting = await suspended_call(app.http)
        every = (await app.http.get("/v1/pending", params={"status": "all"})).json()["items"]
        assert {(c["correlation_id"], c["status"]) for c in every} == {
            (correlation_id, "approved"),
            (awaiting, "awaiting"),
        }
        code, out, err = await sursis(
            "pending", "list", "--status", "all", "--json", url=app.base_url, key=operator
        )
        assert code == 0, err
        assert {c["correlation_id"] for c in json.loads(out)} == {correlation_id, awaiting}
        bad = await app.http.get("/v1/pending", params={"status": "everything"})
        assert (bad.status_code, bad.json()["code"]) == (422, "validation_failed"), bad.text

        code, out, err = await sursis(
            "pending", "deny", correlation_id, "--reason", "no", url=app.base_url, key=operator
        )
        assert code == 2
        assert "stale" in err
        assert operator not in out + err


async def test_the_command_line_client_says_what_is_missing(live: LiveFactory) -> None:
    async with live() as app:
        code, _, err = await sursis("pending", "list", url=app.base_url, key=None)
        assert code == 2
        assert "SURSIS_API_KEY" in err
        code, _, err = await sursis("pending", "list", url=app.base_url, key="srs_not_a_key")
        assert code == 2
        assert "unauthenticated" in err
    code, _, err = await sursis("pending", "list", url="http://127.0.0.1:9", key="srs_x")
    assert code == 1
    assert "cannot reach" in err
