"""A burst of platform events on PostgreSQL, real processes: events/s, and what the burst left.

Starts one `sursis serve --no-worker` and two `sursis worker` processes against a scratch
database, posts N events at once with a `system` key (a mix of the three types; every fourth a
configuration change that changes nothing, which starts no conversation; one in ten re-sent under
the same id), waits for every run they queued to settle and counts from the database. End to end
is the time from the first post to the moment no run is queued or running (read every 0.5 s).

    .venv/bin/python bench/events_burst.py [--events 1000] [--workers 2]

The database (BENCH_PG_URL, default .../bench) is emptied and migrated first.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa
from common import CLUSTER_SETTINGS, Processes, engine_for, fresh_database
from http_load import CpuMeter, cpu_seconds

from sursis import Service

DEFAULT_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/bench"


def event(i: int, run: str) -> dict[str, Any]:
    """The i-th event of a burst, in the documented shapes (docs/customer-agent.md): scan completed
    (with its `completed_at`), anomaly, config change (with rubrics), or a change to nothing."""
    event_id = f"burst-{run}-{i}"
    match i % 4:
        case 0:
            scan = {
                "id": f"scan-{run}-{i}",
                "status": "completed",
                "verdict": "fail" if i % 8 == 0 else "pass",
                "scores": {"faithfulness": 0.6 + (i % 40) / 100, "relevance": 0.8},
                "changeset": {"commit": f"{i:07x}"},
                "failures": [{"test": "refunds", "error": "cites a policy not in the sources"}]
                if i % 8 == 0
                else [],
                "completed_at": f"2026-11-25T06:{i // 60 % 60:02d}:{i % 60:02d}Z",
            }
            return {"id": event_id, "type": "scan.completed", "data": {"scan": scan}}
        case 1:
            data = {"kind": "cost_spike", "metric": "judge_cost_usd", "baseline": 4.0, "observed": 4.0 + i}
            return {"id": event_id, "type": "anomaly.detected", "data": data}
        case 2:
            rubric = {"name": "faithfulness", "description": "stays in the sources", "threshold": 0.8}
            new = {"score_threshold": 0.71 + (i % 10) / 100, "rubrics": [rubric]}
            data = {"old": {"score_threshold": 0.7}, "new": new}
            return {"id": event_id, "type": "workspace.config_changed", "data": data}
        case _:
            return {
                "id": event_id,
                "type": "workspace.config_changed",
                "data": {"old": {"a": 1}, "new": {"a": 1}},
            }


def worthy(i: int) -> bool:
    return i % 4 != 3


async def system_key(url: str, workspace: str = "default") -> dict[str, str]:
    """The header of a new `system` key: what the rest of the platform posts its events with."""
    async with Service.open(url, actor="bench-setup") as svc:
        issued = await svc.create_api_key("system", workspace=workspace)
    return {"Authorization": f"Bearer {issued.secret}"}


async def post_burst(
    base: str, headers: dict[str, str], events: int, connections: int = 16
) -> dict[str, Any]:
    """Post `events` events at once (and one in ten again); the answers' counts and events/s."""
    run = uuid.uuid4().hex[:8]
    bodies = [event(i, run) for i in range(events)]
    resent = [bodies[i] for i in range(0, events, 10)]
    statuses: dict[int, int] = {}
    retries = {"count": 0}
    limits = httpx.Limits(max_connections=connections)
    # At most one request in flight per connection: httpcore's pool scans its whole queue each time
    # a request ends, so a thousand requests queued in it cost this client seconds of CPU on the
    # service's own cores, where a sender on another machine would cost it none.
    in_flight = asyncio.Semaphore(connections)
    async with httpx.AsyncClient(timeout=120, headers=headers, limits=limits) as client:

        async def post(body: dict[str, Any]) -> None:
            # Like a sender would: a lost connection or a 503 is sent again under the same id.
            status = 0
            for _ in range(20):
                try:
                    async with in_flight:
                        status = (await client.post(f"{base}/v1/events", json=body)).status_code
                except httpx.TransportError:
                    status = -1
                if status not in (-1, 503):
                    break
                retries["count"] += 1
                await asyncio.sleep(0.1)
            statuses[status] = statuses.get(status, 0) + 1

        started = time.perf_counter()
        await asyncio.gather(*(post(b) for b in bodies + resent))
        elapsed = time.perf_counter() - started
    return {
        "posted": len(bodies) + len(resent),
        "statuses": statuses,
        "retries": retries["count"],
        "seconds": round(elapsed, 3),
        "events_per_s": round((len(bodies) + len(resent)) / elapsed, 1),
        "worthy": sum(1 for i in range(events) if worthy(i)),
    }


async def burst_counts(url: str) -> dict[str, int]:
    """What the burst left in the database."""
    engine = engine_for(url)
    try:
        async with engine.connect() as conn:

            async def scalar(sql: str) -> int:
                return int((await conn.execute(sa.text(sql))).scalar_one())

            return {
                "events": await scalar("SELECT COUNT(*) FROM platform_events"),
                "events_with_conversation": await scalar(
                    "SELECT COUNT(*) FROM platform_events WHERE conversation_id IS NOT NULL"
                ),
                "conversations": await scalar("SELECT COUNT(*) FROM conversations"),
                "runs": await scalar("SELECT COUNT(*) FROM runs"),
                "runs_completed": await scalar("SELECT COUNT(*) FROM runs WHERE status = 'completed'"),
                "runs_unsettled": await scalar(
                    "SELECT COUNT(*) FROM runs WHERE status IN ('queued', 'running')"
                ),
                "conversations_without_event": await scalar(
                    "SELECT COUNT(*) FROM conversations c WHERE NOT EXISTS "
                    "(SELECT 1 FROM platform_events e WHERE e.conversation_id = c.id)"
                ),
            }
    finally:
        await engine.dispose()


async def runs_not_completed(url: str) -> list[dict[str, Any]]:
    """The settled runs that did not complete (status and error), so a run lost to a failure is
    told apart from one still waiting on a person."""
    engine = engine_for(url)
    try:
        async with engine.connect() as conn:
            rows = await conn.execute(
                sa.text(
                    "SELECT agent, status, error FROM runs "
                    "WHERE status NOT IN ('completed', 'queued', 'running')"
                )
            )
            return [{"agent": agent, "status": status, "error": error} for agent, status, error in rows]
    finally:
        await engine.dispose()


async def wait_settled(url: str, seconds: float = 600) -> tuple[dict[str, int], float]:
    started = time.perf_counter()
    deadline = started + seconds
    while True:
        counts = await burst_counts(url)
        if counts["runs_unsettled"] == 0 or time.perf_counter() > deadline:
            return counts, time.perf_counter() - started
        await asyncio.sleep(0.5)


async def main(url: str, events: int, workers: int) -> dict[str, Any]:
    await fresh_database(url)
    headers = await system_key(url)
    with tempfile.TemporaryDirectory() as logs:
        processes = Processes(url, Path(logs), settings=CLUSTER_SETTINGS)
        try:
            api, base = await processes.serve(worker=False)
            pids = [api.pid] + [processes.worker(concurrency=4).pid for _ in range(workers)]
            await asyncio.sleep(2)  # the workers' start-up is not the burst's
            meter = CpuMeter(pids, url)
            await meter.start()
            before = {pid: cpu_seconds(pid) or 0.0 for pid in pids}
            started = time.perf_counter()
            posted = await post_burst(base, headers, events)
            counts, drained = await wait_settled(url)
            whole = time.perf_counter() - started
            each = [round((cpu_seconds(pid) or 0.0) - before[pid], 1) for pid in pids]
            _, own, postgres, load = await meter.stop()
            others = await runs_not_completed(url)
        finally:
            processes.stop_all()
    return {
        "workers": workers,
        **posted,
        "drain_seconds": round(drained, 1),
        "end_to_end_seconds": round(whole, 1),
        "end_to_end_events_per_s": round(events / whole, 1),
        "counts": counts,
        "runs_not_completed": others,
        "cpu_seconds": {
            "api": each[0],
            "workers": each[1:],
            "bench_client": round(own, 1),
            "postgres": None if postgres is None else round(postgres, 1),
        },
        "load_average": round(load, 2),
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    result = asyncio.run(main(os.environ.get("BENCH_PG_URL", DEFAULT_URL), args.events, args.workers))
    counts = result["counts"]
    print(
        f"events burst: {result['posted']} posts ({args.events} events + resends) in {result['seconds']} s "
        f"= {result['events_per_s']} events/s; answers {result['statuses']}; runs drained in "
        f"{result['drain_seconds']} s with {args.workers} workers"
    )
    print(
        f"end to end (first post to every run settled): {args.events} events in "
        f"{result['end_to_end_seconds']} s = {result['end_to_end_events_per_s']} events/s"
    )
    print(
        f"stored {counts['events']} events, {counts['conversations']} conversations for "
        f"{result['worthy']} conversation-worthy events, runs {counts['runs_completed']}/{counts['runs']} "
        f"completed, {counts['runs_unsettled']} unsettled"
    )
    cpu = result["cpu_seconds"]
    print(
        f"CPU seconds, first post to settled: api {cpu['api']}, workers {cpu['workers']}, "
        f"this client {cpu['bench_client']}, PostgreSQL backends {cpu['postgres']} "
        f"(load average {result['load_average']}, {os.cpu_count()} cores)"
    )
    for run in result["runs_not_completed"]:
        print(f"  not completed: {run['agent']} {run['status']} {run['error']}")
    print(json.dumps(result, default=str))
