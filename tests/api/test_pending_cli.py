"""`sursis pending ...` against the real app over a socket: list, show, decide, and what the inbox
(which reads `GET /v1/pending`) then shows."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from tests.api.conftest import LiveFactory
from tests.channels.test_slack_reviewer import SETTINGS as REVIEWED
from tests.conftest import KeyMaker, bearer, call, eventually, script

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


async def refund_call(app: Any, requester: str, order_id: str) -> str:
    """A refund the payments agent asks for (`R1`: its route's reviewer model answers `yes`, "a large
    refund"; another order: no route, no reviewer)."""
    headers = bearer(requester)
    conversation = (
        await app.http.post("/v1/conversations", json={"agent": "payments"}, headers=headers)
    ).json()
    run = await app.http.post(
        f"/v1/conversations/{conversation['id']}/messages?wait=10",
        json={"content": script(call("refund", order_id=order_id, amount=900))},
        headers=headers,
    )
    [pending] = run.json()["pending"]
    return str(pending["correlation_id"])


async def reviewed_call(app: Any, requester: str) -> str:
    """A refund left to people once its reviewer's verdict (`yes`) is in."""
    correlation_id = await refund_call(app, requester, "R1")

    async def verdict() -> bool:
        shown = (await app.http.get(f"/v1/pending/{correlation_id}")).json()
        return bool((shown.get("review") or {}).get("effect"))

    await eventually(verdict, limit=30)
    return correlation_id


async def test_the_reviewer_verdict_shows_in_the_list_and_in_one_call(
    live: LiveFactory, keys: KeyMaker
) -> None:
    rex = await keys.make("operator", "default", name="rex")
    ann = await keys.make("operator", "default", name="ann")
    async with live(**{k: v for k, v in REVIEWED.items() if k != "slack_agent"}) as app:
        correlation_id = await reviewed_call(app, rex)
        plain = await refund_call(app, rex, "R9")

        code, out, err = await sursis("pending", "list", url=app.base_url, key=ann)
        assert code == 0, err
        row = next(line for line in out.splitlines() if correlation_id in line)
        assert "yes left_to_people" in row
        other = next(line for line in out.splitlines() if plain in line)
        assert "left_to_people" not in other

        code, out, err = await sursis("pending", "show", correlation_id, url=app.base_url, key=ann)
        assert code == 0, err
        review = next(line for line in out.splitlines() if line.startswith("review"))
        assert "yes by scripted (left_to_people) under policy v1 at " in review
        assert review.endswith(": a large refund")

        code, out, err = await sursis("pending", "show", correlation_id, "--json", url=app.base_url, key=ann)
        shown = json.loads(out)["review"]
        assert (shown["model"], shown["verdict"], shown["effect"], shown["reason"]) == (
            "scripted",
            "yes",
            "left_to_people",
            "a large refund",
        )
        code, out, err = await sursis("pending", "show", plain, url=app.base_url, key=ann)
        assert not any(line.startswith("review") for line in out.splitlines())
