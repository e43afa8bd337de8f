"""CPU per authenticated request of a real `sursis serve`, with the credential cache off and on.

Starts `sursis serve --no-worker` against a scratch database, sends `--requests` requests one at a
time with one key to two routes (`GET /v1/me`: authentication alone; `GET /v1/conversations/{id}`:
authentication and one read), and reads the server's CPU (and, on a local PostgreSQL, its
backends') from `/proc` before and after. Each round starts a server with
`SURSIS_CREDENTIAL_CACHE_SECONDS=0` and one with the default, in alternating order, so a change of
the machine's load falls on both; it prints the medians over the rounds and the load average.

    .venv/bin/python bench/request_cpu.py [--databases sqlite pg] [--requests 1000] [--rounds 3]

PostgreSQL uses BENCH_PG_URL (default .../bench), emptied first.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

import httpx
from common import Processes, fresh_database
from http_load import CpuMeter, new_conversation

DEFAULT_PG_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/bench"
MODES = {"off": {"SURSIS_CREDENTIAL_CACHE_SECONDS": "0"}, "on": {}}


async def measure(
    url: str, mode: str, requests: int, log_dir: Path, headers: dict[str, str]
) -> dict[str, Any]:
    """One server in `mode`: CPU ms per request of each route (server, PostgreSQL backends)."""
    processes = Processes(url, log_dir, settings=MODES[mode])
    try:
        server, base = await processes.serve(worker=False)
        async with httpx.AsyncClient(base_url=base, headers=headers, timeout=30) as client:
            conversation = await new_conversation(client, base)
            routes = {"me": "/v1/me", "conversation": f"/v1/conversations/{conversation}"}
            for path in routes.values():  # warm up: imports, pools, the first lookups
                for _ in range(50):
                    (await client.get(path)).raise_for_status()
            figures: dict[str, Any] = {}
            for name, path in routes.items():
                meter = CpuMeter([server.pid], url)
                await meter.start()
                for _ in range(requests):
                    (await client.get(path)).raise_for_status()
                service, _own, postgres, load = await meter.stop()
                figures[f"{name}_server_ms"] = service * 1000 / requests
                figures[f"{name}_postgres_ms"] = None if postgres is None else postgres * 1000 / requests
                figures["load"] = load
            return figures
    finally:
        processes.stop_all()


def median(values: list[Any]) -> float | None:
    known = [v for v in values if v is not None]
    return round(statistics.median(known), 3) if known else None


async def bench(
    name: str, url: str, args: argparse.Namespace, log_dir: Path, summary: dict[str, Any]
) -> None:
    headers = await fresh_database(url)
    rounds: dict[str, list[dict[str, Any]]] = {"off": [], "on": []}
    for i in range(args.rounds):
        for mode in ("off", "on") if i % 2 == 0 else ("on", "off"):
            rounds[mode].append(await measure(url, mode, args.requests, log_dir, headers))
    print(
        f"\n{name}: CPU ms per request ({args.requests} requests a route, one at a time; "
        f"median of {args.rounds})"
    )
    print(f"  {'cache':<6} {'route':<13} {'server':>8} {'postgres':>9}")
    for mode, runs in rounds.items():
        for route in ("me", "conversation"):
            server = median([r[f"{route}_server_ms"] for r in runs])
            postgres = median([r[f"{route}_postgres_ms"] for r in runs])
            print(f"  {mode:<6} {route:<13} {server:>8} {postgres if postgres is not None else '-':>9}")
            summary[f"{name}_{route}_cache_{mode}_server_cpu_ms"] = server
            summary[f"{name}_{route}_cache_{mode}_postgres_cpu_ms"] = postgres
    loads = [r["load"] for runs in rounds.values() for r in runs]
    print(
        f"  load average (1 min) at the end of each route: {min(loads):.2f} to {max(loads):.2f}", flush=True
    )
    summary[f"{name}_load_average_range"] = [round(min(loads), 2), round(max(loads), 2)]


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--databases", nargs="+", choices=["sqlite", "pg"], default=["sqlite", "pg"])
    parser.add_argument("--requests", type=int, default=1000, help="requests per route and server")
    parser.add_argument("--rounds", type=int, default=3, help="servers per mode, alternating")
    args = parser.parse_args()
    log_dir = Path(tempfile.mkdtemp(prefix="sursis-bench-"))
    urls = {
        "sqlite": f"sqlite+aiosqlite:///{log_dir / 'bench.db'}",
        "pg": os.environ.get("BENCH_PG_URL", DEFAULT_PG_URL),
    }
    summary: dict[str, Any] = {}
    for name in args.databases:
        await bench(name, urls[name], args, log_dir, summary)
    print(f"\nprocess logs: {log_dir}")
    print(json.dumps(summary))


if __name__ == "__main__":
    asyncio.run(main())
