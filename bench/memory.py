"""Memory of one API + worker process over many approval turns, on PostgreSQL, over HTTP.

One `sursis serve` with its in-process worker; `--concurrency` conversations at once each run
approval turns (message -> suspended -> approve -> completed), a new conversation every 50 turns.
The process's resident set size (VmRSS) is read every `--every` turns (default 500); the report
gives it at the half-way mark (turn 5 000 by default) and at the end (turn 10 000), and the growth
between the two (targets: at most 120 MiB, no growth). This process does no more per turn than the
requests of the turn (three or four, over kept-alive connections); it reads RSS only at the marks.
Beside the end figure: the memory floor (`memory_floor.py`), the RSS of a process that only imports
the libraries the service is built on, and how far `serve` is above it.

    .venv/bin/python bench/memory.py [--turns 10000] [--concurrency 4] [--every 500] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path

import httpx
from common import Processes, fresh_database
from http_load import http_turn, new_conversation
from memory_floor import IMPORTS, floor_mib

DEFAULT_PG_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/bench"
TURNS_PER_CONVERSATION = 50
TARGET_MIB = 120


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def soak(
    url: str, turns: int, concurrency: int, every: int, settings: dict[str, str] | None = None
) -> dict[str, object]:
    headers = await fresh_database(url)
    processes = Processes(url, Path(tempfile.mkdtemp(prefix="sursis-memory-")), dict(settings or {}))
    samples: list[tuple[int, float]] = []
    started_turns = done = 0
    try:
        server, base = await processes.serve(worker=True)
        async with httpx.AsyncClient(headers=headers, timeout=60) as client:
            samples.append((0, rss_mib(server.pid)))
            started = time.perf_counter()

            async def conversation_loop() -> None:
                nonlocal done, started_turns
                conversation = ""
                count = 0
                while started_turns < turns:
                    started_turns += 1
                    if count % TURNS_PER_CONVERSATION == 0:
                        conversation = await new_conversation(client, base)
                    await http_turn(client, base, conversation)
                    count += 1
                    done += 1
                    if done % every == 0:
                        samples.append((done, rss_mib(server.pid)))
                        print(f"  {done:>6} turns  RSS {samples[-1][1]:.1f} MiB", flush=True)

            await asyncio.gather(*(conversation_loop() for _ in range(concurrency)))
            elapsed = time.perf_counter() - started
            if samples[-1][0] != done:
                samples.append((done, rss_mib(server.pid)))
    finally:
        processes.stop_all()
    half = min(samples, key=lambda s: abs(s[0] - turns // 2))
    end = samples[-1]
    return {
        "memory_turns": end[0],
        "memory_concurrency": concurrency,
        "memory_seconds": round(elapsed, 1),
        "memory_rss_start_mib": round(samples[0][1], 1),
        "memory_half_turn": half[0],
        "memory_rss_half_mib": round(half[1], 1),
        "memory_rss_end_mib": round(end[1], 1),
        "memory_growth_half_to_end_mib": round(end[1] - half[1], 1),
        "memory_rss_end_vs_half_ratio": round(end[1] / half[1], 3),
        "memory_rss_end_vs_target_ratio": round(end[1] / TARGET_MIB, 3),
        "memory_load_average": round(os.getloadavg()[0], 2),
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--every", type=int, default=500, help="read RSS every this many turns")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 100 turns, RSS every 25")
    parser.add_argument(
        "--setting",
        action="append",
        default=[],
        metavar="SURSIS_NAME=VALUE",
        help="a setting `serve` gets (repeatable): what it costs in memory, measured",
    )
    args = parser.parse_args()
    if args.quick:
        args.turns, args.every = 100, 25
    url = os.environ.get("BENCH_PG_URL", DEFAULT_PG_URL)
    print(
        f"memory: one `sursis serve` with its worker, PostgreSQL, {args.turns} approval turns over HTTP, "
        f"{args.concurrency} conversations at once; RSS (VmRSS) every {args.every} turns",
        flush=True,
    )
    settings = dict(item.split("=", 1) for item in args.setting)
    summary = await soak(url, args.turns, args.concurrency, args.every, settings)
    summary["memory_floor_mib"] = floor = floor_mib()
    end = summary["memory_rss_end_mib"]
    assert isinstance(end, float)
    summary["memory_rss_end_above_floor_mib"] = round(end - floor, 1)
    print(
        f"  RSS at turn {summary['memory_half_turn']}: {summary['memory_rss_half_mib']} MiB; "
        f"at turn {summary['memory_turns']}: {summary['memory_rss_end_mib']} MiB (target <= {TARGET_MIB}); "
        f"growth between them {summary['memory_growth_half_to_end_mib']:+} MiB (target: none); "
        f"{summary['memory_seconds']} s, load average {summary['memory_load_average']}"
    )
    print(
        f"  floor (a process importing only {', '.join(IMPORTS)}): {floor} MiB; `serve` after "
        f"{summary['memory_turns']} turns: {summary['memory_rss_end_mib']} MiB, "
        f"{summary['memory_rss_end_above_floor_mib']} MiB above it"
    )
    print(json.dumps(summary))


if __name__ == "__main__":
    asyncio.run(main())
