"""`POST /v1/pending/{id}/resolve?wait=`: the decision and the run's next state in one request."""

from __future__ import annotations

from typing import Any

import pytest
from litestar.testing import AsyncTestClient

from sursis.domain.runs import runs
from sursis.domain.runs.runs import RunService
from tests.api.conftest import LiveFactory
from tests.api.http_calls import create_conversation, post_message, resolve
from tests.api.test_client import client_of
from tests.conftest import call, script

REPLAY = script([call("replay_dlq_event", event_id="evt_1001", reason="partner is back")], "replayed")
TWO_REPLAYS = script(
    [
        call("replay_dlq_event", event_id="evt_1001", reason="first"),
        call("replay_dlq_event", event_id="evt_1002", reason="second"),
    ],
    "both replayed",
)


async def suspended(client: AsyncTestClient[Any], content: str) -> Any:
    run = await post_message(client, await create_conversation(client), content)
    assert run["status"] == "suspended", run
    return run


async def test_a_resolve_that_waits_answers_with_the_run_it_resumed(client: AsyncTestClient[Any]) -> None:
    run = await suspended(client, REPLAY)
    [pending] = run["pending"]

    response = await client.post(
        f"/v1/pending/{pending['correlation_id']}/resolve", params={"wait": 15}, json={"decision": "approve"}
    )

    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["correlation_id"], body["status"]) == (pending["correlation_id"], "approved")
    assert body["run"]["id"] == run["id"]
    assert (body["run"]["status"], body["run"]["output"], body["run"]["pending"]) == (
        "completed",
        "replayed",
        [],
    )


async def test_a_message_and_a_decision_that_wait_each_read_their_run_once(
    client: AsyncTestClient[Any], database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run a commit just queued is not read before something is heard of it: each long-poll
    reads it once, when it has settled (PostgreSQL: a run's waiters hear of its changes alone).
    The once-a-second recheck for a lost notification is pushed out of the way: on a loaded machine
    a turn can outlast it, and its extra read is not what this counts."""
    if database_url.startswith("sqlite"):
        pytest.skip("SQLite's file watch wakes every waiter at any commit: its reads are not fixed")
    monkeypatch.setattr(runs, "RECHECK_SECONDS", 30.0)
    reads: list[str] = []
    get_run = RunService.get_run

    async def counted(self: RunService, principal: Any, run_id: Any) -> Any:
        reads.append(str(run_id))
        return await get_run(self, principal, run_id)

    monkeypatch.setattr(RunService, "get_run", counted)
    run = await suspended(client, REPLAY)
    assert reads == [run["id"]]
    [pending] = run["pending"]

    response = await client.post(
        f"/v1/pending/{pending['correlation_id']}/resolve", params={"wait": 15}, json={"decision": "approve"}
    )

    assert response.json()["run"]["status"] == "completed", response.text
    assert reads == [run["id"], run["id"]]


async def test_without_wait_the_answer_has_no_run(client: AsyncTestClient[Any]) -> None:
    run = await suspended(client, REPLAY)
    [pending] = run["pending"]
    response = await resolve(client, pending["correlation_id"], decision="deny", reason="not now")
    assert response.status_code == 200, response.text
    assert (response.json()["status"], response.json()["run"]) == ("denied", None)


async def test_a_run_still_waiting_for_another_call_comes_back_at_once_suspended(
    client: AsyncTestClient[Any],
) -> None:
    run = await suspended(client, TWO_REPLAYS)
    first, second = run["pending"]

    response = await client.post(
        f"/v1/pending/{first['correlation_id']}/resolve", params={"wait": 30}, json={"decision": "approve"}
    )

    assert response.status_code == 200, response.text
    waiting = response.json()["run"]
    assert waiting["status"] == "suspended"
    assert [p["correlation_id"] for p in waiting["pending"]] == [second["correlation_id"]]
    assert response.elapsed.total_seconds() < 30, "a settled run is answered without waiting out `wait`"

    last = await client.post(
        f"/v1/pending/{second['correlation_id']}/resolve", params={"wait": 15}, json={"decision": "approve"}
    )
    assert (last.json()["run"]["status"], last.json()["run"]["output"]) == ("completed", "both replayed")


async def test_a_wait_out_of_range_is_refused_before_anything_is_decided(
    client: AsyncTestClient[Any],
) -> None:
    run = await suspended(client, REPLAY)
    [pending] = run["pending"]
    for wait in ("-1", "3601", "soon"):
        response = await client.post(
            f"/v1/pending/{pending['correlation_id']}/resolve",
            params={"wait": wait},
            json={"decision": "approve"},
        )
        assert response.status_code == 422, (wait, response.text)
        assert response.headers["content-type"].startswith("application/problem+json")
        assert response.json()["code"] == "validation_failed"
        assert response.json()["errors"][0]["loc"] == ["query", "wait"]
    still = await client.get(f"/v1/pending/{pending['correlation_id']}")
    assert still.json()["status"] == "awaiting"


async def test_the_client_resolves_and_waits_in_one_call(live: LiveFactory) -> None:
    async with live() as app, client_of(app) as sursis:
        conversation = await sursis.create_conversation("ops", workspace="default")
        run = await sursis.send(conversation.id, REPLAY, wait=10)
        [pending] = run.pending
        decided = await sursis.resolve(pending.correlation_id, "approve", wait=15)
        assert decided.status == "approved"
        assert decided.run is not None
        assert (decided.run.id, decided.run.status, decided.run.output) == (run.id, "completed", "replayed")
