"""Throughput side by side, on one PostgreSQL server: approval turns per second with `concurrency`
(default 10) conversations at once, each doing its turns one after the other.

- Sursis: 2 `sursis serve --no-worker` + 2 `sursis worker` processes (`http_load.throughput`),
  over HTTP (conversations go round-robin to the two API processes), on BENCH_PG_URL; then the same
  with 4 workers. Workers run the service's default number of segments at once.
- LangGraph: the approval turn of `turn_langgraph.py` (`interrupt()`, then `Command(resume=...)`),
  `AsyncPostgresSaver` on a `psycopg_pool.AsyncConnectionPool` of `concurrency` connections, one
  LangGraph thread per conversation, all in this process, on PEERS_PG_URL.

- pydantic-ai on pgtask and on Absurd (`peer_process.py`): `concurrency` conversations at once in
  the peer's child process (the engine's client and its worker, concurrency 10), on its database.

The order is Sursis (2 workers), LangGraph, pgtask, Absurd, Sursis (4 workers), so the ratio of the
first two compares runs next to each other. Beside each figure: CPU per turn of the service's processes (for
LangGraph this process, which is its service and its load at once), of the PostgreSQL backends of
the side's database, of the HTTP load (this process, Sursis only), and the 1-minute load average.
Each run is bounded: `--throughput-turns` per conversation, and no turn starts after
`--throughput-seconds`. Used by `peers.py` (`--throughput`, the default).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from http_load import (
    THROUGHPUT_HEADER,
    CpuMeter,
    ThroughputRow,
    format_throughput,
    throughput,
)
from peer_process import TOOL_AFTER_CRASH, PeerSpec, peer_throughput
from turn_langgraph import LangGraphSide


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--throughput",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="turns/s at concurrency 10: Sursis (2 API + 2 or 4 workers) against LangGraph (pooled)",
    )
    parser.add_argument("--throughput-concurrency", type=int, default=10, help="conversations at once")
    parser.add_argument("--throughput-turns", type=int, default=20, help="turns per conversation")
    parser.add_argument("--throughput-seconds", type=float, default=120, help="no turn starts after this")


async def langgraph_throughput(
    url: str, durability: str | None, concurrency: int, turns: int, seconds: float
) -> ThroughputRow:
    side = LangGraphSide(url, durability, pool_size=concurrency)
    await side.open()
    try:
        warm = [await side.new_conversation() for _ in range(concurrency)]
        for _ in range(2):
            await asyncio.gather(*(side.turn(config) for config in warm))
        threads = [await side.new_conversation() for _ in range(concurrency)]
        latencies: list[float] = []
        meter = CpuMeter([], url.replace("postgresql://", "postgresql+asyncpg://", 1))
        await meter.start()
        started = time.perf_counter()

        async def thread(config: dict[str, Any]) -> None:
            for _ in range(turns):
                if time.perf_counter() >= started + seconds:
                    return
                suspend, _, resume = await side.turn(config)
                latencies.append(suspend + resume)

        await asyncio.gather(*(thread(config) for config in threads))
        elapsed = time.perf_counter() - started
        _, own, postgres, load = await meter.stop()
    finally:
        await side.close()
    return ThroughputRow.measured(
        f"langgraph pool {concurrency}", concurrency, latencies, elapsed, (own, postgres, None), load
    )


def record(summary: dict[str, Any], key: str, row: ThroughputRow) -> None:
    summary[f"throughput_{key}_turns_per_s"] = row.turns_per_s
    summary[f"throughput_{key}_turns"] = row.turns
    summary[f"throughput_{key}_seconds"] = row.seconds
    summary[f"throughput_{key}_turn_p50_ms"] = row.turn_p50_ms
    summary[f"throughput_{key}_service_cpu_ms_per_turn"] = row.service_cpu_ms_per_turn
    summary[f"throughput_{key}_postgres_cpu_ms_per_turn"] = row.postgres_cpu_ms_per_turn
    summary[f"throughput_{key}_load_average"] = row.load_average
    if row.client_cpu_ms_per_turn is not None:
        summary[f"throughput_{key}_client_cpu_ms_per_turn"] = row.client_cpu_ms_per_turn
        summary[f"throughput_{key}_retried_503"] = row.retried_503


async def run(
    args: argparse.Namespace,
    ours_url: str,
    peers_url: str,
    log_dir: Path,
    summary: dict[str, Any],
    specs: Sequence[PeerSpec] = (),
) -> None:
    concurrency, turns, seconds = args.throughput_concurrency, args.throughput_turns, args.throughput_seconds
    print(
        f"\nthroughput at concurrency {concurrency} (approval turns/s; {turns} turns per conversation, none "
        f"started after {seconds:g} s; Sursis over HTTP with 2 `serve --no-worker`; CPU ms per turn of "
        "the service's processes (LangGraph: this process), of the database's PostgreSQL backends and of "
        "the HTTP load; 1-minute load average at the end)"
    )
    print(THROUGHPUT_HEADER, flush=True)
    plan = [(concurrency, turns)]
    rows: dict[str, ThroughputRow] = {}
    for key, workers in (("sursis_2_workers", 2), (None, 0), ("sursis_4_workers", 4)):
        if key is None:
            rows["langgraph"] = await langgraph_throughput(
                peers_url, args.durability, concurrency, turns, seconds
            )
            print(format_throughput(rows["langgraph"]), flush=True)
            for spec in specs:
                rows[spec.name] = await peer_throughput(
                    spec, log_dir, args.poll_ms, concurrency, turns, seconds
                )
                print(format_throughput(rows[spec.name]), flush=True)
            continue
        mode = f"sursis 2 api+{workers}w"
        [rows[key]], rss = await throughput(ours_url, mode, workers, plan, log_dir, apis=2, seconds=seconds)
        for process, mib in rss.items():
            summary[f"throughput_{key}_{process}_peak_rss_mib"] = mib
    summary["throughput_concurrency"] = concurrency
    for key, row in rows.items():
        record(summary, key, row)
    ours, peer, more = rows["sursis_2_workers"], rows["langgraph"], rows["sursis_4_workers"]
    summary["throughput_sursis_vs_langgraph_ratio"] = round(ours.turns_per_s / peer.turns_per_s, 3)
    for spec in specs:
        summary[f"throughput_sursis_vs_{spec.name}_ratio"] = round(
            ours.turns_per_s / rows[spec.name].turns_per_s, 3
        )
        print(
            f" sursis (2 api + 2 workers) / pydantic-ai on {spec.name} = "
            f"{summary[f'throughput_sursis_vs_{spec.name}_ratio']} ({spec.name}: client and worker in one "
            f"process, {TOOL_AFTER_CRASH[spec.name].split(' (')[0]} tools)",
            flush=True,
        )
    summary["throughput_4_vs_2_workers_ratio"] = round(more.turns_per_s / ours.turns_per_s, 3)
    print(
        f" sursis (2 api + 2 workers) / langgraph = {summary['throughput_sursis_vs_langgraph_ratio']} "
        f"(target >= 2); 4 workers / 2 workers = {summary['throughput_4_vs_2_workers_ratio']} "
        "(target >= 1.7)",
        flush=True,
    )
