"""Fault injection with real processes on PostgreSQL: SIGKILL at chosen points, then check the database."""

from __future__ import annotations

import asyncio
import random
import signal
import time

import httpx
import pytest

from tests.conftest import call, script
from tests.faults.processes import (
    Cluster,
    check_invariants,
    run_row,
    start_run,
    wait_exit,
    wait_frozen,
    wait_status,
)

KILLED = -signal.SIGKILL
TURN = script(
    [call("list_dlq_events")], [call("replay_dlq_event", event_id="evt_1001", reason="retry")], "done"
)


async def _start_conversation(client: httpx.AsyncClient, base: str, content: str = TURN) -> str:
    _, run_id = await start_run(client, base, content)
    return run_id


async def _tool_calls(client: httpx.AsyncClient, base: str, run_id: str) -> list[str]:
    return [t["tool_name"] for t in (await client.get(f"{base}/v1/runs/{run_id}/tool-calls")).json()]


@pytest.mark.parametrize(
    "crash_at",
    [
        "model_response_persisted",
        "tool_started:list_dlq_events",
        "tool_effect_committed:replay_dlq_event",
        "segment_resumed",
    ],
)
async def test_a_killed_worker_loses_nothing_and_repeats_nothing(cluster: Cluster, crash_at: str) -> None:
    _, base = await cluster.api()
    doomed = cluster.doomed_worker(crash_at)
    async with httpx.AsyncClient(timeout=30, headers=cluster.headers) as client:
        run_id = await _start_conversation(client, base)
        suspended = await doomed.settle(client, base, run_id, {"suspended"})
        [pending] = suspended["pending"]
        decided = await client.post(
            f"{base}/v1/pending/{pending['correlation_id']}/resolve", json={"decision": "approve"}
        )
        assert decided.status_code == 200
        done = await doomed.settle(client, base, run_id, {"completed"})

        assert await wait_exit(doomed.process) == KILLED, "the crash point was never reached"
        assert done["output"] == "done"
        assert sorted(await _tool_calls(client, base, run_id)) == ["list_dlq_events", "replay_dlq_event"]
    counts = await check_invariants(cluster.database_url)
    assert counts["replays"] == 1


async def test_an_api_killed_after_committing_a_resolve_still_resumes(cluster: Cluster) -> None:
    doomed_api, doomed_base = await cluster.api(crash_at="notify_queued#2")
    cluster.worker()
    async with httpx.AsyncClient(timeout=30, headers=cluster.headers) as client:
        run_id = await _start_conversation(client, doomed_base)
        suspended = await wait_status(client, doomed_base, run_id, {"suspended"})
        correlation_id = suspended["pending"][0]["correlation_id"]
        with pytest.raises(httpx.TransportError):
            await client.post(
                f"{doomed_base}/v1/pending/{correlation_id}/resolve", json={"decision": "approve"}
            )
        assert await wait_exit(doomed_api) == KILLED

        _, base = await cluster.api()
        assert (await client.get(f"{base}/v1/pending/{correlation_id}")).json()["status"] == "approved"
        done = await wait_status(client, base, run_id, {"completed"})
        assert done["output"] == "done"
    assert (await check_invariants(cluster.database_url))["replays"] == 1


async def test_resolves_racing_across_two_api_processes_have_one_winner(cluster: Cluster) -> None:
    (_, first), (_, second) = await asyncio.gather(cluster.api(), cluster.api())
    cluster.worker()
    async with httpx.AsyncClient(
        timeout=30, headers=cluster.headers, limits=httpx.Limits(max_connections=100)
    ) as client:
        run_id = await _start_conversation(client, first)
        suspended = await wait_status(client, first, run_id, {"suspended"})
        correlation_id = suspended["pending"][0]["correlation_id"]
        responses = await asyncio.gather(
            *(
                client.post(f"{base}/v1/pending/{correlation_id}/resolve", json={"decision": "approve"})
                for base in [first, second] * 25
            )
        )
        assert sorted(r.status_code for r in responses) == [200] + [409] * 49
        done = await wait_status(client, second, run_id, {"completed"})
        assert done["output"] == "done"
    assert (await check_invariants(cluster.database_url))["replays"] == 1


async def test_sigterm_stops_a_worker_cleanly(cluster: Cluster) -> None:
    _, base = await cluster.api()
    worker = cluster.worker()
    async with httpx.AsyncClient(timeout=30, headers=cluster.headers) as client:
        run_id = await _start_conversation(client, base)
        await wait_status(client, base, run_id, {"suspended"})
    await asyncio.sleep(0.5)
    worker.send_signal(signal.SIGTERM)
    assert await wait_exit(worker, 15) == 0


async def test_sigterm_during_a_segment_gives_the_run_back_and_another_worker_finishes_it(
    cluster: Cluster,
) -> None:
    _, base = await cluster.api()
    # The worker stops itself as the first tool starts; the SIGTERM is handled once it goes on.
    worker = cluster.worker(concurrency=1, SURSIS_FREEZE_AT="tool_started:list_dlq_events")
    async with httpx.AsyncClient(timeout=30, headers=cluster.headers) as client:
        run_id = await _start_conversation(client, base)
        await wait_frozen(worker)
        assert (await run_row(cluster.database_url, run_id))["status"] == "running"
        worker.send_signal(signal.SIGTERM)
        worker.send_signal(signal.SIGCONT)
        assert await wait_exit(worker, 20) == 0

        released = await run_row(cluster.database_url, run_id)
        assert released["status"] == "queued"
        assert released["lease_owner"] is None and released["lease_expires_at"] is None
        # The tool the segment was in finished and its result was stored before the lease went back.
        assert await _tool_calls(client, base, run_id) == ["list_dlq_events"]

        cluster.worker()
        suspended = await wait_status(client, base, run_id, {"suspended"})
        [pending] = suspended["pending"]
        decided = await client.post(
            f"{base}/v1/pending/{pending['correlation_id']}/resolve", json={"decision": "approve"}
        )
        assert decided.status_code == 200
        done = await wait_status(client, base, run_id, {"completed"})
        assert done["output"] == "done"
        assert sorted(await _tool_calls(client, base, run_id)) == ["list_dlq_events", "replay_dlq_event"]
    assert (await check_invariants(cluster.database_url))["replays"] == 1


async def test_a_run_that_kills_every_worker_fails_after_the_attempts(cluster: Cluster) -> None:
    _, base = await cluster.api()
    crash = {"crash_at": "tool_started:list_dlq_events", "SURSIS_MAX_SEGMENT_ATTEMPTS": "2"}
    async with httpx.AsyncClient(timeout=30, headers=cluster.headers) as client:
        cid, run_id = await start_run(client, base, TURN)
        killed = 0
        deadline = time.monotonic() + 120
        while True:
            worker = cluster.worker(**crash)
            while worker.poll() is None:
                run = (await client.get(f"{base}/v1/runs/{run_id}", params={"wait": 1})).json()
                if run["status"] == "failed" or time.monotonic() > deadline:
                    break
            if worker.poll() is None:
                break
            assert await wait_exit(worker) == KILLED
            killed += 1

        assert run["status"] == "failed", f"still {run['status']} after {killed} kills"
        assert killed == 3, "the first segment and two attempts without progress"
        assert run["error"]["code"] == "segment_attempts_exhausted"
        audit = (await client.get(f"{base}/v1/audit", params={"conversation_id": cid})).json()["items"]
        assert [(a["action"], a["details"]) for a in audit][-1] == (
            "run.failed",
            {"error": "segment_attempts_exhausted"},
        )
        assert await _tool_calls(client, base, run_id) == []

        # The conversation stays usable, served by the worker that gave up on the run.
        follow_up = (
            await client.post(f"{base}/v1/conversations/{cid}/messages", json={"content": "still there?"})
        ).json()
        assert (await wait_status(client, base, follow_up["id"], {"completed"}))["status"] == "completed"
    assert (await check_invariants(cluster.database_url))["replays"] == 0


async def test_an_expired_approval_resumes_the_run_with_the_model_told(cluster: Cluster) -> None:
    _, base = await cluster.api()
    cluster._spawn(["worker"], cluster.env(SURSIS_APPROVAL_TIMEOUT_SECONDS="1"), "short-expiry-worker")
    async with httpx.AsyncClient(timeout=30, headers=cluster.headers) as client:
        content = script([call("replay_dlq_event", event_id="evt_1002", reason="retry")])
        run_id = await _start_conversation(client, base, content)
        suspended = await wait_status(client, base, run_id, {"suspended"})
        correlation_id = suspended["pending"][0]["correlation_id"]
        done = await wait_status(client, base, run_id, {"completed"}, seconds=20)
        assert "APPROVAL_EXPIRED" in done["output"]
        assert "the action was not performed" in done["output"]
        late = await client.post(f"{base}/v1/pending/{correlation_id}/resolve", json={"decision": "approve"})
        assert late.status_code == 409
        assert late.json()["code"] == "stale"
        assert late.json()["pending_status"] == "expired"
    assert (await check_invariants(cluster.database_url))["replays"] == 0


async def _random_kills(cluster: Cluster, conversations: int, kills: int, seed: int) -> dict[str, int]:
    rng = random.Random(seed)
    _, base = await cluster.api()
    workers = [cluster.worker(concurrency=2) for _ in range(2)]
    killed = 0
    turns = [
        script(
            [call("list_dlq_events")],
            [call("replay_dlq_event", event_id=f"evt_100{1 + i % 4}", reason="r")],
            "done",
        )
        for i in range(conversations)
    ]
    async with httpx.AsyncClient(timeout=30, headers=cluster.headers) as client:
        cids = [
            (await client.post(f"{base}/v1/conversations", json={"agent": "ops"})).json()["id"] for _ in turns
        ]
        runs = [
            (await client.post(f"{base}/v1/conversations/{cid}/messages", json={"content": turn})).json()[
                "id"
            ]
            for cid, turn in zip(cids, turns, strict=True)
        ]
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            pending = (await client.get(f"{base}/v1/pending", params={"status": "awaiting"})).json()["items"]
            for item in pending:
                await client.post(
                    f"{base}/v1/pending/{item['correlation_id']}/resolve", json={"decision": "approve"}
                )
            statuses = [(await client.get(f"{base}/v1/runs/{r}")).json()["status"] for r in runs]
            if all(s == "completed" for s in statuses):
                break
            if killed < kills:
                victim = rng.choice(workers)
                victim.send_signal(signal.SIGKILL)
                await wait_exit(victim)
                killed += 1
                workers[workers.index(victim)] = cluster.worker(concurrency=2)
            await asyncio.sleep(rng.uniform(0.1, 0.6))
        statuses = [(await client.get(f"{base}/v1/runs/{r}")).json()["status"] for r in runs]
        assert statuses == ["completed"] * len(runs)
        for run_id in runs:
            assert sorted(await _tool_calls(client, base, run_id)) == ["list_dlq_events", "replay_dlq_event"]
    counts = await check_invariants(cluster.database_url)
    assert counts["replays"] == conversations
    return {"kills": killed, **counts}


async def test_random_kills_lose_nothing(cluster: Cluster) -> None:
    result = await _random_kills(cluster, conversations=6, kills=6, seed=7)
    assert result["kills"] == 6


@pytest.mark.slow
async def test_random_kills_soak(cluster: Cluster) -> None:
    result = await _random_kills(cluster, conversations=20, kills=25, seed=11)
    assert result["kills"] == 25
