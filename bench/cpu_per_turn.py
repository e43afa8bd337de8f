"""Process CPU per approval turn through `sursis.Service` in this process (PostgreSQL), for before and
after comparisons: run it alternately with two venvs (one with the other checkout's service on its
path) and compare the JSON lines; CPU time, unlike wall time, barely moves with the machine's load.

    .venv/bin/python bench/cpu_per_turn.py [--turns 100] [--warm 10] [--no-hand-off] [--settled-collector]

`--no-hand-off`: no worker loops in the process; each segment is claimed and run by `run_once`
(the layout of an API process beside worker processes, without their wake-ups).
`--settled-collector`: settle the garbage collector once the service is open, as `sursis serve` and
`sursis worker` do (`sursis.settle_collector`); without it, Python's defaults, as in an app that
embeds the service. `gc_ms_per_turn` is the CPU spent in collections.
`postgres_ms_per_turn` is the CPU of the database's backends over the measured turns (from `/proc`, the
server on this machine), split into the client backends (the service's connections) and the rest
(autovacuum workers and the like, which work off what the turns wrote). The tables are analyzed after the
warm turns, as autovacuum would have done by then (a server may run without it, as this project's CI
machine does): the planner then sees a conversation as long as the warm turns made it.
`--gate`: after the warm turns, print `READY` and wait for a line on standard input before the
measured turns (`bench/profile_native.py` attaches its sampler there, so start-up is not sampled).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import sqlalchemy as sa
from common import engine_for
from http_load import backends, cpu_seconds
from turn_ours import OursSide, log_to_file

DEFAULT_PG_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/bench"


class CollectorTime:
    """A `gc.callbacks` entry: the process CPU time spent in collections, and their count by
    generation."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.collections = [0, 0, 0]
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.process_time()
        else:
            self.seconds += time.process_time() - self._started
            self.collections[info["generation"]] += 1


Readings = dict[int, tuple[str, float]]
"""Backend pid: its type and CPU seconds so far."""


async def analyze(url: str) -> None:
    """Planner statistics for every table, as autovacuum keeps them."""
    engine = engine_for(url)
    try:
        async with engine.connect() as conn:
            await (await conn.execution_options(isolation_level="AUTOCOMMIT")).execute(sa.text("ANALYZE"))
    finally:
        await engine.dispose()


async def backend_cpu(url: str) -> Readings:
    """Every backend of `url`'s database but this query's: its type and CPU seconds so far."""
    found = await backends(url) or {}
    return {pid: (kind, cpu) for pid, kind in found.items() if (cpu := cpu_seconds(pid)) is not None}


def backend_delta(before: Readings, after: Readings) -> dict[str, float]:
    """CPU seconds by backend type between two readings (a backend that came in between from zero)."""
    spent: dict[str, float] = {}
    for pid, (kind, cpu) in after.items():
        start = before.get(pid, (kind, 0.0))[1]
        spent[kind] = spent.get(kind, 0.0) + cpu - start
    return spent


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", type=int, default=100)
    parser.add_argument("--warm", type=int, default=10)
    parser.add_argument("--no-hand-off", dest="hand_off", action="store_false")
    parser.add_argument("--settled-collector", action="store_true")
    parser.add_argument("--gate", action="store_true")
    args = parser.parse_args()
    log_to_file(Path(tempfile.mkdtemp(prefix="sursis-cpu-")) / "service.log")
    url = os.environ.get("BENCH_PG_URL", DEFAULT_PG_URL)
    await OursSide.prepare(url)
    side = OursSide(url, verify=False, hand_off=args.hand_off)
    await side.open()
    if args.settled_collector:
        from sursis import settle_collector

        settle_collector()
    collecting = CollectorTime()
    try:
        conversation = await side.new_conversation()
        for _ in range(args.warm):
            await side.turn(conversation)
        await analyze(url)
        statements = side.statements()
        if args.gate:
            print("READY", flush=True)
            await asyncio.to_thread(sys.stdin.readline)
        backends = await backend_cpu(url)
        gc.callbacks.append(collecting)
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in range(args.turns):
            await side.turn(conversation)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        postgres = backend_delta(backends, await backend_cpu(url))
        gc.callbacks.remove(collecting)
        statements = side.statements() - statements
    finally:
        await side.close()
    print(
        json.dumps(
            {
                "cpu_ms_per_turn": round(cpu * 1000 / args.turns, 2),
                "postgres_ms_per_turn": round(sum(postgres.values()) * 1000 / args.turns, 2),
                "postgres_ms_per_turn_by_backend": {
                    kind: round(spent * 1000 / args.turns, 2) for kind, spent in sorted(postgres.items())
                },
                "wall_ms_per_turn": round(wall * 1000 / args.turns, 2),
                "statements_per_turn": round(statements / args.turns, 2),
                "commits": side.commit_counts(),
                "hand_off": args.hand_off,
                "gc_ms_per_turn": round(collecting.seconds * 1000 / args.turns, 2),
                "collections": collecting.collections,
                "settled_collector": args.settled_collector,
                "load_average": os.getloadavg()[0],
            }
        )
    )


if __name__ == "__main__":
    asyncio.run(main())
