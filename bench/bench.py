"""Per-turn cost, throughput, storage and memory of the service, on SQLite and on PostgreSQL.

Everything runs with the offline `scripted` model (zero model latency), so only the service's own
cost is measured. One turn is one approval round trip: a user message makes the model propose a
gated `replay_dlq_event`, the run suspends, an operator approves, the tool runs and the model
answers.

- per turn, end to end over HTTP: POST message -> `suspended`; resolve; resolve -> `completed`;
  on one conversation, sampled in a window of turns starting at turn 1, 50, 100, 200 and 500
  (real `sursis serve` / `sursis worker` processes);
- the same turns through `sursis.Service` in this process (no HTTP, no other processes; queued
  work run with `run_once`, as a worker runs it), with the commits and SQL statements of each
  phase (suspend: message -> suspended; resume: resolve -> completed) counted by SQLAlchemy event
  listeners on `Engine`, and the storage the turns leave;
- the floor: one single-row INSERT + COMMIT on the same database, set up as the service sets it up;
- resolve: `POST /v1/pending/{correlation_id}/resolve` over HTTP, one at a time, `--resolve-samples`
  of them (default 200) on a quiet layout (SQLite: one `serve` with its worker; PostgreSQL: one
  `serve --no-worker` + one `worker`): p50, p95 and p99;
- throughput: approval turns per second with 1, 10 and 100 concurrent conversations, embedded
  SQLite and PostgreSQL with 1 and 2 worker processes, with the CPU per turn of the service's
  processes and of PostgreSQL's backends, and the load average; peak RSS of the processes afterwards.

    .venv/bin/python bench/bench.py [--quick] [--databases sqlite pg] [--skip-per-turn]
        [--skip-resolve] [--resolve-samples 200] [--skip-throughput]

It prints a table per part and, last, one JSON line with every figure (ratios end in `_ratio`;
`<db>_suspend_commits`, `<db>_resume_commits`, `<db>_suspend_statements`, `<db>_resume_statements`
are the medians per approval turn). It uses only the public API: `sursis` and HTTP.
PostgreSQL figures use a scratch database (BENCH_PG_URL, default .../bench), emptied first.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa
from common import Processes, engine_for, fresh_database, is_sqlite
from http_load import (
    THROUGHPUT_HEADER,
    http_turn,
    ms,
    new_conversation,
    p50,
    p95,
    p99,
    start_service,
    throughput,
)
from sqlalchemy.ext.asyncio import AsyncEngine
from turn_ours import OursSide, log_to_file

DEFAULT_PG_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/bench"
CHECKPOINTS = (1, 50, 100, 200, 500)
QUICK_CHECKPOINTS = (1, 20, 50)


@dataclass
class TurnSamples:
    """Latencies (ms) of the turns sampled in one window, and the commits and statements each
    phase made (suspend: message -> suspended; resume: resolve -> completed)."""

    suspend: list[float] = field(default_factory=list)
    resolve: list[float] = field(default_factory=list)
    resume: list[float] = field(default_factory=list)
    suspend_commits: list[int] = field(default_factory=list)
    resume_commits: list[int] = field(default_factory=list)
    suspend_statements: list[int] = field(default_factory=list)
    resume_statements: list[int] = field(default_factory=list)

    @property
    def turn(self) -> list[float]:
        return [s + r for s, r in zip(self.suspend, self.resume, strict=True)]

    def add(self, measured: Sequence[float]) -> None:
        """One turn's (suspend, resolve, resume[, suspend commits, resume commits, suspend
        statements, resume statements])."""
        self.suspend.append(measured[0])
        self.resolve.append(measured[1])
        self.resume.append(measured[2])
        if len(measured) > 3:
            self.suspend_commits.append(int(measured[3]))
            self.resume_commits.append(int(measured[4]))
            self.suspend_statements.append(int(measured[5]))
            self.resume_statements.append(int(measured[6]))


TurnFn = Callable[[Any], Awaitable[Sequence[float]]]
"""Runs one turn on a conversation; returns (suspend, resolve, resume[, commits, statements])."""


async def sample_turns(
    do_turn: TurnFn,
    new_conversation: Callable[[], Awaitable[Any]],
    checkpoints: Sequence[int],
    window: int,
    after_turn: Callable[[int], Awaitable[None]] | None = None,
) -> dict[int, TurnSamples]:
    """Turns of one long conversation, sampled in a window from each checkpoint.

    The middle checkpoints are sampled on the way. The first (turn 1) and the last are sampled
    interleaved: a turn on a fresh conversation, then one on the long one, and so on, so the
    ratio of the two is not skewed by the machine getting busier or quieter in between.
    """
    first, *middle, last = checkpoints
    owner = {t: c for c in middle for t in range(c, c + window)}
    samples = {c: TurnSamples() for c in checkpoints}
    long = await new_conversation()
    for turn in range(1, last):
        measured = await do_turn(long)
        if turn in owner:
            samples[owner[turn]].add(measured)
        if after_turn is not None:
            await after_turn(turn)
    fresh = await new_conversation()
    for _ in range(window):
        samples[first].add(await do_turn(fresh))
        samples[last].add(await do_turn(long))
    return samples


# --- end to end over HTTP -------------------------------------------------------------------


async def per_turn_http(
    url: str, checkpoints: Sequence[int], window: int, log_dir: Path
) -> dict[int, TurnSamples]:
    headers = await fresh_database(url)
    processes = Processes(url, log_dir)
    try:
        base = (await start_service(processes, url, workers=1)).bases[0]
        async with httpx.AsyncClient(headers=headers, timeout=60) as client:
            warm = await new_conversation(client, base)
            for _ in range(5):
                await http_turn(client, base, warm)

            async def do_turn(conversation_id: str) -> Sequence[float]:
                return await http_turn(client, base, conversation_id)

            return await sample_turns(do_turn, lambda: new_conversation(client, base), checkpoints, window)
    finally:
        processes.stop_all()


async def resolve_latency(url: str, samples: int, log_dir: Path) -> tuple[list[float], str]:
    """Latencies (ms) of `samples` resolve requests over HTTP, one at a time, each the approval of
    a turn (a new conversation every 50 turns), on a quiet layout: one API process and one worker
    (SQLite: `serve` with its worker). Returns them and the layout."""
    headers = await fresh_database(url)
    processes = Processes(url, log_dir)
    try:
        layout = await start_service(processes, url, workers=1)
        base = layout.bases[0]
        async with httpx.AsyncClient(headers=headers, timeout=60) as client:
            conversation = await new_conversation(client, base)
            for _ in range(5):
                await http_turn(client, base, conversation)
            resolves: list[float] = []
            for i in range(samples):
                if i % 50 == 0:
                    conversation = await new_conversation(client, base)
                resolves.append((await http_turn(client, base, conversation, wait_on_resolve=False))[1])
    finally:
        processes.stop_all()
    return resolves, layout.describe()


# --- through the service and runner, no HTTP -------------------------------------------------


NOT_SERVICE = {"alembic_version", "bench_floor"}
"""Tables in the database that are not the service's rows."""


@dataclass
class StorageMark:
    turn: int
    row_bytes: int
    rows: int
    database_bytes: int


async def storage(url: str) -> tuple[int, int, int]:
    """(row payload bytes, rows, database bytes) over every table of the service."""
    engine = engine_for(url)
    try:
        async with engine.connect() as conn:
            names = sorted(set(await conn.run_sync(lambda c: sa.inspect(c).get_table_names())) - NOT_SERVICE)
            rows = 0
            for name in names:
                rows += int((await conn.execute(sa.text(f"SELECT count(*) FROM {name}"))).scalar_one())
            if is_sqlite(url):
                listed = ", ".join(f"'{n}'" for n in names)
                row_bytes = (
                    await conn.execute(
                        sa.text(f"SELECT coalesce(sum(payload), 0) FROM dbstat WHERE name IN ({listed})")
                    )
                ).scalar_one()
                pages = (await conn.execute(sa.text("PRAGMA page_count"))).scalar_one()
                page_size = (await conn.execute(sa.text("PRAGMA page_size"))).scalar_one()
                database_bytes = pages * page_size
            else:
                row_bytes = 0
                for name in names:
                    query = sa.text(f"SELECT coalesce(sum(pg_column_size(x.*)), 0) FROM {name} x")
                    row_bytes += int((await conn.execute(query)).scalar_one())
                database_bytes = (
                    await conn.execute(sa.text("SELECT pg_database_size(current_database())"))
                ).scalar_one()
    finally:
        await engine.dispose()
    return int(row_bytes), rows, int(database_bytes)


def floor_engine(url: str) -> AsyncEngine:
    """An engine set up as the service sets up its own: on SQLite WAL, `synchronous=NORMAL` and
    transactions that start with `BEGIN IMMEDIATE`."""
    engine = engine_for(url)
    if is_sqlite(url):

        @sa.event.listens_for(engine.sync_engine, "connect")
        def _on_connect(dbapi_connection: Any, _record: Any) -> None:
            dbapi_connection.isolation_level = None
            cursor = dbapi_connection.cursor()
            for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "foreign_keys=ON", "busy_timeout=30000"):
                cursor.execute(f"PRAGMA {pragma}")
            cursor.close()

        @sa.event.listens_for(engine.sync_engine, "begin")
        def _on_begin(conn: Any) -> None:
            conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


async def commit_floor(url: str, repeat: int) -> list[float]:
    """Latencies (ms) of one single-row INSERT + COMMIT, on the service's own engine settings."""
    engine = floor_engine(url)
    key = "INTEGER PRIMARY KEY" if is_sqlite(url) else "BIGSERIAL PRIMARY KEY"
    latencies = []
    try:
        async with engine.begin() as conn:
            await conn.execute(sa.text("DROP TABLE IF EXISTS bench_floor"))
            await conn.execute(sa.text(f"CREATE TABLE bench_floor (id {key}, note TEXT NOT NULL)"))
        insert = sa.text("INSERT INTO bench_floor (note) VALUES (:note)")
        for i in range(repeat + 10):
            started = time.perf_counter()
            async with engine.begin() as conn:
                await conn.execute(insert, {"note": f"row {i}"})
            if i >= 10:
                latencies.append(ms(time.perf_counter() - started))
        async with engine.begin() as conn:
            await conn.execute(sa.text("DROP TABLE bench_floor"))
    finally:
        await engine.dispose()
    return latencies


async def per_turn_runner(
    url: str,
    checkpoints: Sequence[int],
    window: int,
    storage_marks: Sequence[int],
    history_turns: int | None = None,
) -> tuple[dict[int, TurnSamples], list[StorageMark]]:
    await fresh_database(url)
    side = OursSide(url, history_turns=history_turns)
    marks: list[StorageMark] = []
    await side.open()
    try:
        warm = await side.new_conversation()
        for _ in range(5):
            await side.turn(warm)
        base_bytes, base_rows, base_db = await storage(url)

        async def do_turn(conversation_id: uuid.UUID) -> Sequence[float]:
            measured = await side.turn(conversation_id)
            n = side.last
            return (
                *measured,
                n.suspend_commits,
                n.resume_commits,
                n.suspend_statements,
                n.resume_statements,
            )

        async def measure_storage(turn: int) -> None:
            if turn in storage_marks:
                row_bytes, rows, database_bytes = await storage(url)
                marks.append(
                    StorageMark(turn, row_bytes - base_bytes, rows - base_rows, database_bytes - base_db)
                )

        samples = await sample_turns(do_turn, side.new_conversation, checkpoints, window, measure_storage)
    finally:
        await side.close()
    return samples, marks


# --- report ----------------------------------------------------------------------------------


def print_turns(title: str, samples: dict[int, TurnSamples], with_commits: bool) -> None:
    print(f"\n{title}")
    header = (
        f"  {'turn':>5} {'n':>3} {'suspend p50':>12} {'p95':>8} {'resolve p50':>12} {'p95':>8} "
        f"{'resume p50':>11} {'p95':>8} {'turn p50':>9} {'p95':>8}"
    )
    if with_commits:
        header += f" {'commits s/r':>12} {'statements s/r':>15}"
    print(header)
    for checkpoint, s in samples.items():
        line = (
            f"  {checkpoint:>5} {len(s.suspend):>3} {p50(s.suspend):>12} {p95(s.suspend):>8} "
            f"{p50(s.resolve):>12} {p95(s.resolve):>8} {p50(s.resume):>11} {p95(s.resume):>8} "
            f"{p50(s.turn):>9} {p95(s.turn):>8}"
        )
        if with_commits:
            line += f" {statistics.median(s.suspend_commits):>6}/{statistics.median(s.resume_commits):<5}"
            line += (
                f" {statistics.median(s.suspend_statements):>8}/{statistics.median(s.resume_statements):<6}"
            )
        print(line)


def storage_marks_for(last: int) -> list[int]:
    """The long conversation is built up to turn `last - 1` before its last window is sampled."""
    return sorted({10, 20, last - 11, last - 1})


def per_turn_growth(marks: list[StorageMark], start: int, end: int) -> tuple[float, float]:
    """(row bytes, rows) added per turn between two marks."""
    by_turn = {m.turn: m for m in marks}
    first, second = by_turn[start], by_turn[end]
    turns = end - start
    return (second.row_bytes - first.row_bytes) / turns, (second.rows - first.rows) / turns


async def bench_database(
    name: str, url: str, args: argparse.Namespace, log_dir: Path, summary: dict[str, Any]
) -> None:
    checkpoints = QUICK_CHECKPOINTS if args.quick else CHECKPOINTS
    window = 5 if args.quick else args.window
    first, last = checkpoints[0], checkpoints[-1]
    print(f"\n=== {name}: {url}", flush=True)

    await fresh_database(url)
    floor = await commit_floor(url, 50 if args.quick else 300)
    floor_p50 = p50(floor)
    print(f"\ncommit floor (one-row INSERT + COMMIT): p50 {floor_p50} ms, p95 {p95(floor)} ms", flush=True)
    summary[f"{name}_commit_floor_p50_ms"] = floor_p50

    http = await per_turn_http(url, checkpoints, window, log_dir)
    print_turns(
        f"{name}: per turn over HTTP (ms; {window} turns from each; first and last interleaved)", http, False
    )
    summary[f"{name}_turn{first}_p50_ms"] = p50(http[first].turn)
    summary[f"{name}_turn{last}_p50_ms"] = p50(http[last].turn)
    summary[f"{name}_turn{last}_vs_turn{first}_ratio"] = round(
        p50(http[last].turn) / p50(http[first].turn), 3
    )
    resolves = [v for s in http.values() for v in s.resolve]
    summary[f"{name}_per_turn_resolve_p50_ms"] = p50(resolves)
    summary[f"{name}_per_turn_resolve_p95_ms"] = p95(resolves)

    marks_at = storage_marks_for(last)
    direct, marks = await per_turn_runner(url, checkpoints, window, marks_at)
    print_turns(
        f"{name}: per turn through the service in this process, no HTTP (ms; commits and statements of "
        "suspend = message -> suspended, and resume = resolve -> completed)",
        direct,
        True,
    )
    summary[f"{name}_runner_turn{first}_p50_ms"] = p50(direct[first].turn)
    summary[f"{name}_runner_turn{last}_p50_ms"] = p50(direct[last].turn)
    summary[f"{name}_runner_turn{last}_vs_turn{first}_ratio"] = round(
        p50(direct[last].turn) / p50(direct[first].turn), 3
    )
    suspend_commits = statistics.median(c for s in direct.values() for c in s.suspend_commits)
    resume_commits = statistics.median(c for s in direct.values() for c in s.resume_commits)
    path_ms = p50(direct[first].suspend) + p50(direct[first].resume) - p50(direct[first].resolve)
    suspend_statements = statistics.median(c for s in direct.values() for c in s.suspend_statements)
    resume_statements = statistics.median(c for s in direct.values() for c in s.resume_statements)
    summary[f"{name}_suspend_commits"] = suspend_commits
    summary[f"{name}_resume_commits"] = resume_commits
    summary[f"{name}_suspend_statements"] = suspend_statements
    summary[f"{name}_resume_statements"] = resume_statements
    summary[f"{name}_suspend_resume_ms"] = round(path_ms, 2)
    summary[f"{name}_suspend_resume_vs_floor_ratio"] = round(path_ms / floor_p50, 2)
    summary[f"{name}_per_commit_vs_floor_ratio"] = round(
        path_ms / (suspend_commits + resume_commits - 1) / floor_p50, 2
    )
    print(
        f"\n{name}: suspend + resume without HTTP and without the resolve request: {round(path_ms, 2)} ms "
        f"= {summary[f'{name}_suspend_resume_vs_floor_ratio']}x the commit floor "
        f"({suspend_commits} + {resume_commits - 1} commits, "
        f"{suspend_statements} + {resume_statements} statements per turn, "
        f"{summary[f'{name}_per_commit_vs_floor_ratio']}x the floor per commit)"
    )

    full, _ = await per_turn_runner(url, checkpoints, window, [], history_turns=0)
    print_turns(
        f"{name}: per turn through the service in this process with the whole history shown to the model "
        "(SURSIS_HISTORY_TURNS=0)",
        full,
        True,
    )
    summary[f"{name}_runner_full_history_turn{last}_p50_ms"] = p50(full[last].turn)
    summary[f"{name}_runner_full_history_turn{last}_vs_turn{first}_ratio"] = round(
        p50(full[last].turn) / p50(full[first].turn), 3
    )

    early_bytes, early_rows = per_turn_growth(marks, 10, 20)
    late_bytes, late_rows = per_turn_growth(marks, last - 11, last - 1)
    final = marks[-1]
    print(f"\n{name}: storage (one conversation; row payload bytes of every table)")
    print(f"  {'turns':>9} {'bytes/turn':>11} {'rows/turn':>10}")
    print(f"  {'10-20':>9} {early_bytes:>11.0f} {early_rows:>10.1f}")
    print(f"  {f'{last - 11}-{last - 1}':>9} {late_bytes:>11.0f} {late_rows:>10.1f}")
    print(
        f"  after {final.turn} turns: {final.row_bytes} row bytes ({final.row_bytes / final.turn:.0f}/turn), "
        f"{final.rows} rows ({final.rows / final.turn:.1f}/turn), database grew {final.database_bytes} bytes "
        f"({final.database_bytes / final.turn:.0f}/turn with indexes and free space)"
    )
    summary[f"{name}_bytes_per_turn"] = round(final.row_bytes / final.turn)
    summary[f"{name}_rows_per_turn"] = round(final.rows / final.turn, 2)
    summary[f"{name}_database_bytes_per_turn"] = round(final.database_bytes / final.turn)
    summary[f"{name}_storage_turn{last}_vs_turn10_ratio"] = round(late_bytes / early_bytes, 3)


async def bench_encryption(
    name: str, url: str, args: argparse.Namespace, log_dir: Path, summary: dict[str, Any]
) -> None:
    """CPU and wall time per approval turn with and without an encryption keyring, in one run:
    two services over one database, turns alternating between them so both see the same load."""
    turns = 20 if args.quick else args.encryption_turns
    await fresh_database(url)
    plain = OursSide(url, verify=False)
    sealed = OursSide(url, verify=False, encryption_keys=f"bench:{base64.b64encode(os.urandom(32)).decode()}")
    cpu: dict[str, list[float]] = {"off": [], "on": []}
    wall: dict[str, list[float]] = {"off": [], "on": []}
    await plain.open()
    await sealed.open()
    try:
        conversations = {"off": await plain.new_conversation(), "on": await sealed.new_conversation()}
        sides = {"off": plain, "on": sealed}
        for _ in range(5):
            for key, side in sides.items():
                await side.turn(conversations[key])
        for i in range(turns):
            for key in ("off", "on") if i % 2 == 0 else ("on", "off"):
                started_cpu, started = time.process_time(), time.perf_counter()
                await sides[key].turn(conversations[key])
                cpu[key].append((time.process_time() - started_cpu) * 1000)
                wall[key].append((time.perf_counter() - started) * 1000)
    finally:
        await sealed.close()
        await plain.close()
    load = os.getloadavg()[0]
    off_cpu, on_cpu = statistics.median(cpu["off"]), statistics.median(cpu["on"])
    ratio = round(on_cpu / off_cpu, 3)
    print(
        f"\n{name}: encryption at rest, {turns} approval turns each way, alternating, in this process "
        f"(median CPU ms per turn; wall p50 ms; 1-minute load average {load:.2f})"
    )
    print(f"  {'keyring':>8} {'CPU ms':>8} {'wall ms':>8}")
    for key in ("off", "on"):
        print(f"  {key:>8} {statistics.median(cpu[key]):>8.2f} {p50(wall[key]):>8.2f}")
    print(f"  on / off CPU: {ratio}")
    summary[f"{name}_encryption_off_cpu_ms"] = round(off_cpu, 2)
    summary[f"{name}_encryption_on_cpu_ms"] = round(on_cpu, 2)
    summary[f"{name}_encryption_cpu_ratio"] = ratio
    summary[f"{name}_encryption_load_average"] = round(load, 2)


async def bench_resolve(
    name: str, url: str, args: argparse.Namespace, log_dir: Path, summary: dict[str, Any]
) -> None:
    samples = 20 if args.quick else args.resolve_samples
    resolves, layout = await resolve_latency(url, samples, log_dir)
    load = round(os.getloadavg()[0], 2)
    targets = " (targets: p50 < 10, p99 < 30)" if not is_sqlite(url) else ""
    if len(resolves) < 100:
        targets += " (fewer than 100 samples: the p99 is only indicative)"
    print(
        f"\n{name}: resolve request over HTTP (POST /v1/pending/{{correlation_id}}/resolve), one at a time, "
        f"{len(resolves)} samples, {layout}:\n"
        f"  p50 {p50(resolves)} ms, p95 {p95(resolves)} ms, p99 {p99(resolves)} ms{targets}; "
        f"load average {load}",
        flush=True,
    )
    summary[f"{name}_resolve_samples"] = len(resolves)
    summary[f"{name}_resolve_layout"] = layout
    summary[f"{name}_resolve_p50_ms"] = p50(resolves)
    summary[f"{name}_resolve_p95_ms"] = p95(resolves)
    summary[f"{name}_resolve_p99_ms"] = p99(resolves)
    summary[f"{name}_resolve_load_average"] = load


async def bench_throughput(
    name: str, url: str, args: argparse.Namespace, log_dir: Path, summary: dict[str, Any]
) -> None:
    plan = [(1, 5), (10, 2), (100, 1)] if args.quick else [(1, 30), (10, 10), (100, 3)]
    modes = [("sqlite", 1)] if is_sqlite(url) else [("pg-1-worker", 1), ("pg-2-workers", 2)]
    for mode, workers in modes:
        rows, rss = await throughput(url, mode, workers, plan, log_dir)
        for row in rows:
            key = f"{mode.replace('-', '_')}_c{row.concurrency}"
            summary[f"{key}_turns_per_s"] = row.turns_per_s
            summary[f"{key}_retried_503"] = row.retried_503
            summary[f"{key}_service_cpu_ms_per_turn"] = row.service_cpu_ms_per_turn
            summary[f"{key}_postgres_cpu_ms_per_turn"] = row.postgres_cpu_ms_per_turn
            summary[f"{key}_load_average"] = row.load_average
        for process, mib in rss.items():
            summary[f"{mode.replace('-', '_')}_{process}_peak_rss_mib"] = mib
        print(
            f"  {mode}: peak RSS after the {plan[-1][0]}-conversation run: "
            + ", ".join(f"{p} {m} MiB" for p, m in rss.items()),
            flush=True,
        )


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="few turns: a smoke run of every part")
    parser.add_argument("--databases", nargs="+", choices=["sqlite", "pg"], default=["sqlite", "pg"])
    parser.add_argument("--window", type=int, default=15, help="turns sampled from each checkpoint")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument(
        "--skip-per-turn", action="store_true", help="skip the per-turn parts (HTTP, runner, floor, storage)"
    )
    parser.add_argument("--skip-resolve", action="store_true", help="skip the resolve latency part")
    parser.add_argument("--skip-encryption", action="store_true", help="skip the encryption cost part")
    parser.add_argument(
        "--encryption-turns", type=int, default=200, help="turns each way in the encryption part (quick: 20)"
    )
    parser.add_argument("--resolve-samples", type=int, default=200, help="resolve requests timed (quick: 20)")
    args = parser.parse_args()

    log_dir = Path(tempfile.mkdtemp(prefix="sursis-bench-"))
    # The in-process part logs as a worker would; keep it off the report.
    log_to_file(log_dir / "runner.log")
    urls = {
        "sqlite": f"sqlite+aiosqlite:///{log_dir / 'bench.db'}",
        "pg": os.environ.get("BENCH_PG_URL", DEFAULT_PG_URL),
    }
    summary: dict[str, Any] = {"quick": args.quick}
    started = time.perf_counter()
    for name in args.databases:
        if not args.skip_per_turn:
            await bench_database(name, urls[name], args, log_dir, summary)
        if not args.skip_resolve:
            await bench_resolve(name, urls[name], args, log_dir, summary)
        if not args.skip_encryption:
            await bench_encryption(name, urls[name], args, log_dir, summary)
    if not args.skip_throughput:
        print(
            "\nthroughput: approval turns per second (message -> suspended -> approve -> completed); CPU ms "
            "per turn of the service's processes, of PostgreSQL's backends and of this process (the load); "
            "1-minute load average at the end"
        )
        print(THROUGHPUT_HEADER, flush=True)
        for name in args.databases:
            await bench_throughput(name, urls[name], args, log_dir, summary)
    summary["seconds"] = round(time.perf_counter() - started, 1)
    print(f"\nprocess logs: {log_dir}")
    print(json.dumps(summary))


if __name__ == "__main__":
    asyncio.run(main())
