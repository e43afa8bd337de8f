"""Memory of `sursis serve` and `sursis worker` right after start-up, and after a few turns (seconds,
not the 40 minutes of `memory.py`).

Two layouts on PostgreSQL, each with fresh processes: one `sursis serve` with its in-process worker,
and one `sursis serve --no-worker` beside one `sursis worker`. The resident set size (VmRSS) of each
process is read once start-up has settled (serve: `/readyz` answers; worker: its RSS has not
changed for a second), after the first approval turn (what a turn loads the first time) and after
`--turns` turns over HTTP. `--rounds` repeats everything with new processes and reports medians.

    .venv/bin/python bench/startup_memory.py [--turns 200] [--rounds 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import httpx
from common import Processes, fresh_database
from http_load import http_turn, new_conversation
from memory import TARGET_MIB, rss_mib

DEFAULT_PG_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/bench"
TURNS_PER_CONVERSATION = 50


async def settled_rss(process: subprocess.Popen[bytes], quiet: float = 1.0, limit: float = 30.0) -> float:
    """The process's RSS once it has not changed for `quiet` seconds (at most `limit` seconds)."""
    deadline = time.monotonic() + limit
    last, since = rss_mib(process.pid), time.monotonic()
    while time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        if process.poll() is not None:
            raise RuntimeError(f"{process.args} exited with {process.returncode}")
        now = rss_mib(process.pid)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet:
            break
    return last


async def turns(client: httpx.AsyncClient, base: str, count: int) -> None:
    conversation = ""
    for done in range(count):
        if done % TURNS_PER_CONVERSATION == 0:
            conversation = await new_conversation(client, base)
        await http_turn(client, base, conversation)


async def one_round(url: str, count: int) -> dict[str, float]:
    """RSS in MiB of each process of both layouts: at start-up, after one turn, after `count`."""
    headers = await fresh_database(url)
    figures: dict[str, float] = {}
    for layout in ("embedded", "split"):
        processes = Processes(url, Path(tempfile.mkdtemp(prefix="sursis-startup-")))
        try:
            server, base = await processes.serve(worker=layout == "embedded")
            watched = {"serve": server}
            if layout == "split":
                watched["worker"] = processes.worker()
            for name, process in watched.items():
                figures[f"{layout}_{name}_start"] = await settled_rss(process)
            async with httpx.AsyncClient(headers=headers, timeout=60) as client:
                await turns(client, base, 1)
                for name, process in watched.items():
                    figures[f"{layout}_{name}_turn1"] = rss_mib(process.pid)
                await turns(client, base, count - 1)
                for name, process in watched.items():
                    figures[f"{layout}_{name}_turns"] = rss_mib(process.pid)
        finally:
            processes.stop_all()
    return figures


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", type=int, default=200, help="approval turns per layout (at least 1)")
    parser.add_argument("--rounds", type=int, default=3, help="fresh processes this many times; medians")
    args = parser.parse_args()
    url = os.environ.get("BENCH_PG_URL", DEFAULT_PG_URL)
    count = max(1, args.turns)
    rounds = [await one_round(url, count) for _ in range(args.rounds)]
    median = {key: round(statistics.median(r[key] for r in rounds), 1) for key in rounds[0]}
    load = round(os.getloadavg()[0], 2)
    print(f"RSS (VmRSS, MiB), PostgreSQL, median of {args.rounds} rounds, load average {load}")
    print(f"  {'process':34} {'start-up':>9} {'1 turn':>9} {f'{count} turns':>11}")
    for layout, name, label in (
        ("embedded", "serve", "serve (with its worker)"),
        ("split", "serve", "serve --no-worker"),
        ("split", "worker", "worker"),
    ):
        start, first, last = (median[f"{layout}_{name}_{mark}"] for mark in ("start", "turn1", "turns"))
        print(f"  {label:34} {start:>9} {first:>9} {last:>11}")
    print(f"  (target for serve with its worker after 10 000 turns: <= {TARGET_MIB} MiB; see memory.py)")
    print(json.dumps({"startup_turns": count, "startup_rounds": args.rounds, **median, "load_average": load}))


if __name__ == "__main__":
    asyncio.run(main())
