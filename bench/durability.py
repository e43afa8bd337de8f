"""Durability figures on PostgreSQL, real processes: runs/s by worker count, resolve-to-resume latency.

Starts one `sursis serve --no-worker` and N `sursis worker` processes against a scratch database,
drives conversations over HTTP with the `scripted` model, and reads the latencies back from the
database (pending_calls.resolved_at against the worker's `run.resumed` audit row).

    .venv/bin/python bench/durability.py [--workers 1 4] [--conversations 20] [--turns 10]

The database (BENCH_DURABILITY_PG_URL, default .../bench_durability) is emptied and migrated first.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa
from common import (
    CLUSTER_SETTINGS,
    GATED_TURN,
    PLAIN_TURN,
    Processes,
    engine_for,
    fresh_database,
    percentile,
    settle,
)

DEFAULT_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/bench_durability"


async def conversation(client: httpx.AsyncClient, base: str, turns: int, gated: bool) -> None:
    cid = (await client.post(f"{base}/v1/conversations", json={"agent": "ops"})).json()["id"]
    for _ in range(turns):
        posted = await client.post(
            f"{base}/v1/conversations/{cid}/messages", json={"content": GATED_TURN if gated else PLAIN_TURN}
        )
        run = posted.json()
        if gated:
            suspended = await settle(client, base, run["id"], "suspended")
            [pending] = suspended["pending"]
            answer = await client.post(
                f"{base}/v1/pending/{pending['correlation_id']}/resolve", json={"decision": "approve"}
            )
            answer.raise_for_status()
        await settle(client, base, run["id"], "completed")


async def check_invariants(url: str) -> dict[str, int]:
    """What must hold after the runs, read straight from the database; the rows' counts."""
    engine = engine_for(url)
    try:
        async with engine.connect() as conn:

            async def none_of(what: str, sql: str) -> None:
                found = (await conn.execute(sa.text(sql))).all()
                assert found == [], f"{what}: {found}"

            await none_of(
                "message log with gaps",
                "SELECT conversation_id FROM messages GROUP BY conversation_id "
                "HAVING MAX(seq) <> COUNT(*) OR MIN(seq) <> 1",
            )
            await none_of(
                "replays without exactly one tool call record",
                "SELECT source_event_id, COUNT(*) FROM outbox GROUP BY source_event_id "
                "HAVING COUNT(*) <> (SELECT COUNT(*) FROM tool_calls t "
                "WHERE t.tool_name = 'replay_dlq_event' AND t.ok "
                "AND t.result->'result'->>'event_id' = outbox.source_event_id)",
            )
            await none_of(
                "dead letters replayed a different number of times",
                "SELECT d.id FROM dead_letters d WHERE d.replay_count <> "
                "(SELECT COUNT(*) FROM outbox o WHERE o.source_event_id = d.id)",
            )
            await none_of(
                "awaiting calls of runs that are not suspended",
                "SELECT p.correlation_id FROM pending_calls p JOIN runs r ON r.id = p.run_id "
                "WHERE p.status = 'awaiting' AND r.status <> 'suspended'",
            )
            counts = (
                await conn.execute(
                    sa.text(
                        "SELECT (SELECT COUNT(*) FROM runs), (SELECT COUNT(*) FROM pending_calls), "
                        "(SELECT COUNT(*) FROM outbox), (SELECT COUNT(*) FROM tool_calls)"
                    )
                )
            ).one()
            return {"runs": counts[0], "pending": counts[1], "replays": counts[2], "tool_calls": counts[3]}
    finally:
        await engine.dispose()


async def resume_latencies(url: str) -> list[float]:
    engine = engine_for(url)
    async with engine.connect() as conn:
        rows = (
            await conn.execute(
                sa.text(
                    "SELECT p.resolved_at, a.at FROM pending_calls p "
                    "JOIN audit_log a ON a.run_id = p.run_id AND a.action = 'run.resumed' "
                    "WHERE p.resolved_at IS NOT NULL"
                )
            )
        ).all()
    await engine.dispose()
    return [(at - resolved).total_seconds() * 1000 for resolved, at in rows]


async def scenario(url: str, workers: int, conversations: int, turns: int, gated: bool) -> dict[str, Any]:
    headers = await fresh_database(url)
    with tempfile.TemporaryDirectory() as logs:
        processes = Processes(url, Path(logs), settings=CLUSTER_SETTINGS)
        try:
            _, base = await processes.serve(worker=False)
            for _ in range(workers):
                processes.worker(concurrency=4)
            limits = httpx.Limits(max_connections=conversations + 5)
            async with httpx.AsyncClient(timeout=60, headers=headers, limits=limits) as client:
                await conversation(client, base, 1, gated)  # warm-up: every process has connected
                started = time.perf_counter()
                await asyncio.gather(
                    *(conversation(client, base, turns, gated) for _ in range(conversations))
                )
                elapsed = time.perf_counter() - started
        finally:
            processes.stop_all()
    counts = await check_invariants(url)
    latencies = await resume_latencies(url) if gated else []
    runs = conversations * turns
    return {
        "workers": workers,
        "kind": ("approve" if gated else "plain") + ("" if conversations > 1 else "-1conv"),
        "runs": runs,
        "seconds": round(elapsed, 2),
        "runs_per_s": round(runs / elapsed, 1),
        "resume_p50_ms": round(percentile(latencies, 0.5), 1) if latencies else None,
        "resume_p95_ms": round(percentile(latencies, 0.95), 1) if latencies else None,
        "invariants": counts,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--url", default=None)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--conversations", type=int, default=20)
    parser.add_argument("--turns", type=int, default=10)
    args = parser.parse_args()
    url = args.url or os.environ.get("BENCH_DURABILITY_PG_URL", DEFAULT_URL)
    results = []
    print(
        f"{'workers':>7} {'kind':>14} {'runs':>5} {'seconds':>8} {'runs/s':>7} "
        f"{'resume p50':>11} {'resume p95':>11}",
        flush=True,
    )
    for workers in args.workers:
        plan = [
            (args.conversations, args.turns, False),
            (args.conversations, args.turns, True),
            (1, 30, True),  # one conversation at a time: the wake-up latency without queueing
        ]
        for conversations, turns, gated in plan:
            row = await scenario(url, workers, conversations, turns, gated)
            results.append(row)
            p50 = "-" if row["resume_p50_ms"] is None else f"{row['resume_p50_ms']} ms"
            p95 = "-" if row["resume_p95_ms"] is None else f"{row['resume_p95_ms']} ms"
            print(
                f"{row['workers']:>7} {row['kind']:>14} {row['runs']:>5} {row['seconds']:>8} "
                f"{row['runs_per_s']:>7} {p50:>11} {p95:>11}",
                flush=True,
            )
    print(json.dumps({"durability": results}))


if __name__ == "__main__":
    asyncio.run(main())
