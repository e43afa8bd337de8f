"""What an idle service costs: the CPU a second of a `sursis serve` (API and in-process worker) that
nobody talks to, and of the PostgreSQL backends serving it.

    .venv/bin/python bench/idle.py [--settle 20] [--seconds 30] [--rounds 3] [--sqlite]

Each round starts a fresh `serve` on a freshly migrated database, waits `--settle` seconds after it
answers `/readyz` (start-up and first-use work done), then reads the CPU of the process and of its
database's backends over `--seconds` (`server_cpu.py`: user + system time from `/proc`). Prints one
line per round and a JSON line with the medians in milliseconds of CPU a second. With `--sqlite` the
service runs on an SQLite file (no backends; its loops sleep on the watch of the file's
`data_version`, `sursis/infra/db/sqlite_watch.py`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
from pathlib import Path

from common import Processes, fresh_database
from server_cpu import BackendLister, ServerCpu

DEFAULT_PG_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/bench_idle"


async def one_round(url: str, settle: float, seconds: float, log_dir: Path) -> dict[str, float | None]:
    await fresh_database(url)
    processes = Processes(url, log_dir, {"SURSIS_LOG_LEVEL": "WARNING"})
    lister = BackendLister(url) if not url.startswith("sqlite") else None
    try:
        process, _ = await processes.serve(worker=True)
        await asyncio.sleep(settle)
        if lister is not None:
            await lister.open()
            meter = ServerCpu(lister, [process.pid], url.rsplit("/", 1)[1])
        else:
            meter = ServerCpu(_NoBackends(), [process.pid], "")  # type: ignore[arg-type]
        before = await meter.sample()
        await asyncio.sleep(seconds)
        spent = ServerCpu.between(before, await meter.sample())
    finally:
        processes.stop_all()
        if lister is not None:
            await lister.close()
    backends = None if spent.backends is None else round(spent.backends * 1000 / seconds, 2)
    return {"process_ms_per_s": round(spent.processes * 1000 / seconds, 2), "postgres_ms_per_s": backends}


class _NoBackends:
    """An SQLite service has no database backends to count."""

    async def pids(self, _database: str) -> None:
        return None


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--settle", type=float, default=20.0)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--sqlite", action="store_true")
    args = parser.parse_args()
    log_dir = Path(tempfile.mkdtemp(prefix="sursis-idle-"))
    url = (
        f"sqlite+aiosqlite:///{log_dir / 'idle.db'}"
        if args.sqlite
        else os.environ.get("BENCH_PG_URL", DEFAULT_PG_URL)
    )
    rounds = []
    for index in range(args.rounds):
        figures = await one_round(url, args.settle, args.seconds, log_dir)
        rounds.append(figures)
        print(f"round {index + 1}: {figures} (load average {os.getloadavg()[0]:.2f})", flush=True)
    medians = {
        key: None if any(r[key] is None for r in rounds) else statistics.median(r[key] or 0.0 for r in rounds)
        for key in rounds[0]
    }
    print(json.dumps({"idle_serve": medians, "database": "sqlite" if args.sqlite else "postgresql"}))


if __name__ == "__main__":
    asyncio.run(main())
