"""Volume: a turn, the inbox, the worker's claim and the sweeper on a database holding a year of
traffic, against a fresh empty database, interleaved in the same run (PostgreSQL).

    .venv/bin/python bench/volume.py [--scale 1] [--turns 30] [--reads 40] [--reuse]

The full database (BENCH_VOLUME_PG_URL, default .../bench_volume) is emptied, migrated and filled
(bench/volume_fill.py: 1,000,000 conversations at scale 1, 5,000 workspaces with a Zipf share);
`--reuse` keeps a fill of the same scale and only migrates it and puts back what an earlier run
changed. The empty one (BENCH_VOLUME_EMPTY_PG_URL, .../bench_volume_empty) is made anew each run.
Both get the demo dead letters and keys in the large workspace `ws-0000` and a small one `ws-2000`.

Measured over HTTP against a `sursis serve` per database: the approval turn, the inbox's first and
a deep page, a conversation's events replayed from the start, the audit search; in processes of
their own: the worker's claim (4 processes, `Service.run_once`); in this one: the sweeper's passes
(`Service.sweep`) over 50,000 awaiting calls of which 1,000 are overdue, and the outbox's due scan.
The plans of every statement go to `--plans` (default volume-plans.txt). Prints a table, then one
JSON line with every figure and each full/empty ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import multiprocessing
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa
import volume_fill as fill
from common import PLAIN_TURN, Processes, call, engine_for, fresh_database, percentile, script, send, settle
from volume_plans import Explained, StatementRecorder, explain, operator_reads

from sursis import Service, configure_logging

PG = "postgresql+asyncpg://postgres@127.0.0.1:5432/"
WORKSPACES = (fill.LARGE_WORKSPACE, fill.SMALL_WORKSPACE)
DEEP = 2000
"""How deep in the inbox the deep page is (or as deep as the workspace's awaiting calls go)."""
SERVER_SETTINGS = {"SURSIS_LOG_LEVEL": "WARNING", "SURSIS_SWEEP_SECONDS": "86400"}
CLAIM_PROCESSES = 4
CLAIM_ROUNDS = 3
"""The claim runs in rounds, full and empty alternating, so both see the same machine."""


@dataclass
class Target:
    """One database under test and what the measurements need in it."""

    name: str
    url: str
    admin: dict[str, str] = field(default_factory=dict)
    operators: dict[str, dict[str, str]] = field(default_factory=dict)
    turn_content: dict[str, str] = field(default_factory=dict)
    conversation: dict[str, str] = field(default_factory=dict)
    deep_cursor: dict[str, str] = field(default_factory=dict)
    deep_key: tuple[str, str] | None = None
    base: str = ""
    samples: dict[str, list[float]] = field(default_factory=dict)

    def add(self, metric: str, value: float) -> None:
        self.samples.setdefault(metric, []).append(value)


def bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


async def prepare_full(
    target: Target, shape: fill.Shape, scale: float, reuse: bool, migrate: bool = True
) -> dict[str, Any]:
    """Fill (or reuse a fill of the same scale); the fill's seconds and the sizes."""
    engine = engine_for(target.url)
    info: dict[str, Any] = {}
    try:
        if reuse:
            async with engine.connect() as conn:
                found = await conn.scalar(sa.text("SELECT to_regclass('bench_volume_fill') IS NOT NULL"))
                if found:
                    row = (await conn.execute(sa.text("SELECT scale, seconds FROM bench_volume_fill"))).one()
                    reuse = float(row[0]) == scale
                    info["fill_seconds"] = float(row[1])
                else:
                    reuse = False
        if reuse:
            print(f"reusing the fill at scale {scale}", flush=True)
            async with Service.open(target.url, migrate=migrate):
                pass
            async with engine.begin() as conn:
                await fill.restore(conn)
        else:
            print(f"filling {target.url.rsplit('/', 1)[1]} at scale {scale}", flush=True)
            await fresh_database(target.url)
            started = time.perf_counter()
            async with engine.begin() as conn:
                info["fill_steps"] = await fill.fill(conn, shape, lambda line: print(line, flush=True))
            async with engine.connect() as conn:
                auto = await conn.execution_options(isolation_level="AUTOCOMMIT")
                info["vacuum_analyze_seconds"] = await fill.vacuum_analyze(auto)
            info["fill_seconds"] = round(time.perf_counter() - started, 1)
            async with engine.begin() as conn:
                await conn.exec_driver_sql("CREATE TABLE bench_volume_fill (scale float8, seconds float8)")
                await conn.exec_driver_sql(
                    f"INSERT INTO bench_volume_fill VALUES ({scale}, {info['fill_seconds']})"
                )
        async with engine.connect() as conn:
            info.update(await fill.sizes(conn))
    finally:
        await engine.dispose()
    return info


async def prepare_keys(target: Target) -> None:
    """Demo dead letters and keys in both workspaces; the turn's message names the workspace's letter."""
    async with Service.open(target.url, actor="bench-setup") as svc:
        target.admin = bearer((await svc.create_api_key("admin", workspace="default")).secret)
        for ws in WORKSPACES:
            await svc.seed_demo(ws)
            target.operators[ws] = bearer((await svc.create_api_key("operator", workspace=ws)).secret)
            letter = f"{ws}:evt_1001"
            target.turn_content[ws] = script(
                [call("replay_dlq_event", event_id=letter, reason="bench")], "replayed"
            )


async def approval_turn(client: httpx.AsyncClient, target: Target, ws: str) -> float:
    """Post, wait for the suspension, approve, wait for the answer: milliseconds."""
    base, cid = target.base, target.conversation[ws]
    started = time.perf_counter()
    posted = await send(
        client,
        "POST",
        f"{base}/v1/conversations/{cid}/messages",
        json={"content": target.turn_content[ws]},
        params={"wait": 10},
    )
    run = posted.json()
    if run["status"] != "suspended":
        run = await settle(client, base, run["id"], "suspended")
    [pending] = run["pending"]
    await send(
        client, "POST", f"{base}/v1/pending/{pending['correlation_id']}/resolve", json={"decision": "approve"}
    )
    await settle(client, base, run["id"], "completed")
    return (time.perf_counter() - started) * 1000


async def setup_http(client: httpx.AsyncClient, target: Target) -> None:
    """A conversation per workspace for the turns, three calls left awaiting in each, the deep cursor."""
    for ws in WORKSPACES:
        for _ in range(3):
            created = await send(
                client, "POST", f"{target.base}/v1/conversations", json={"agent": "ops", "workspace": ws}
            )
            cid = created.json()["id"]
            posted = await send(
                client,
                "POST",
                f"{target.base}/v1/conversations/{cid}/messages",
                json={"content": target.turn_content[ws]},
                params={"wait": 10},
            )
            if posted.json()["status"] != "suspended":
                await settle(client, target.base, posted.json()["id"], "suspended")
        created = await send(
            client, "POST", f"{target.base}/v1/conversations", json={"agent": "ops", "workspace": ws}
        )
        target.conversation[ws] = created.json()["id"]
        target.deep_cursor[ws] = await deep_cursor(client, target, ws)


async def deep_cursor(client: httpx.AsyncClient, target: Target, ws: str) -> str:
    """The cursor of the inbox page DEEP calls down (or of the last page there is)."""
    headers, seen, cursor, last = target.operators[ws], 0, None, None
    while seen < DEEP:
        params: dict[str, Any] = {"limit": min(200, DEEP - seen)}
        if cursor:
            params["cursor"] = cursor
        page = (await send(client, "GET", f"{target.base}/v1/pending", params=params, headers=headers)).json()
        seen += len(page["items"])
        if page["items"]:
            last = page["items"][-1]
        if page["next_cursor"] is None:
            break
        cursor = page["next_cursor"]
    if cursor is None:
        page = (
            await send(client, "GET", f"{target.base}/v1/pending", params={"limit": 1}, headers=headers)
        ).json()
        cursor = page["next_cursor"]
        last = page["items"][-1]
    assert cursor is not None, f"no awaiting calls in {ws}"
    assert last is not None
    if ws == fill.LARGE_WORKSPACE:
        target.deep_key = (last["created_at"], last["correlation_id"])
    return str(cursor)


async def get_ms(
    client: httpx.AsyncClient, url: str, params: dict[str, Any], headers: dict[str, str]
) -> float:
    started = time.perf_counter()
    await send(client, "GET", url, params=params, headers=headers)
    return (time.perf_counter() - started) * 1000


async def measure_reads(client: httpx.AsyncClient, target: Target) -> None:
    """Each operator read once: both inbox pages of both workspaces, the audit search, the replay."""
    inbox = f"{target.base}/v1/pending"
    for ws in WORKSPACES:
        operator = target.operators[ws]
        target.add(f"inbox_first_{ws}", await get_ms(client, inbox, {"limit": 50}, operator))
        deep = {"limit": 50, "cursor": target.deep_cursor[ws]}
        target.add(f"inbox_deep_{ws}", await get_ms(client, inbox, deep, operator))
    operator = target.operators[fill.LARGE_WORKSPACE]
    audit = {"order": "desc", "limit": 100}
    target.add("audit_search", await get_ms(client, f"{target.base}/v1/audit", audit, operator))
    started = time.perf_counter()
    await replay_events(client, target, int(target.samples["events_in_replay"][0]))
    target.add("events_replay", (time.perf_counter() - started) * 1000)


async def replay_events(client: httpx.AsyncClient, target: Target, expected: int) -> None:
    """The large workspace's turn conversation's events from the start, over SSE, until all came."""
    seen = 0
    url = f"{target.base}/v1/conversations/{target.conversation[fill.LARGE_WORKSPACE]}/events"
    async with client.stream("GET", url, params={"after": 0}) as response:
        async for line in response.aiter_lines():
            if line.startswith("id:"):
                seen += 1
                if seen >= expected:
                    return


async def measure_http(targets: list[Target], turns: int, reads: int) -> None:
    """Turns, then reads, alternating between the databases request by request."""
    with tempfile.TemporaryDirectory() as logs:
        processes = [Processes(t.url, Path(logs), settings=SERVER_SETTINGS) for t in targets]
        try:
            for target, procs in zip(targets, processes, strict=True):
                _, target.base = await procs.serve(worker=True)
            clients = [httpx.AsyncClient(timeout=60, headers=t.admin) for t in targets]
            for target, client in zip(targets, clients, strict=True):
                await setup_http(client, target)
                for ws in WORKSPACES:
                    for _ in range(3):
                        await approval_turn(client, target, ws)
            for _ in range(turns):
                for target, client in zip(targets, clients, strict=True):
                    for ws in WORKSPACES:
                        target.add(f"turn_{ws}", await approval_turn(client, target, ws))
            for target in targets:
                engine = engine_for(target.url)
                async with engine.connect() as conn:
                    target.add(
                        "events_in_replay",
                        float(
                            await conn.scalar(
                                sa.text("SELECT count(*) FROM events WHERE conversation_id = :c"),
                                {"c": target.conversation[fill.LARGE_WORKSPACE]},
                            )
                            or 0
                        ),
                    )
                await engine.dispose()
            for _ in range(reads):
                for target, client in zip(targets, clients, strict=True):
                    await measure_reads(client, target)
            for client in clients:
                await client.aclose()
        finally:
            for procs in processes:
                procs.stop_all()


def claim_process(url: str, start: Any, results: Any) -> None:
    configure_logging("WARNING")
    asyncio.run(claim_loop(url, start, results))


async def claim_loop(url: str, start: Any, results: Any) -> None:
    """Claim and drive runs until none is queued: claims, claims that found nothing while runs
    were still queued, and when the last claim ended."""
    engine = engine_for(url)
    claims = empty = 0
    last = time.time()
    async with Service.open(url, actor="bench-claim") as svc:
        results.put(None)
        await asyncio.to_thread(start.wait)
        while True:
            if await svc.run_once():
                claims += 1
                last = time.time()
                continue
            async with engine.connect() as conn:
                queued = await conn.scalar(sa.text("SELECT count(*) FROM runs WHERE status = 'queued'"))
            if not queued:
                break
            empty += 1
    await engine.dispose()
    results.put((claims, empty, last))


async def measure_claims(target: Target, runs: int) -> None:
    """`runs` plain turns queued, then drained by CLAIM_PROCESSES processes started together."""
    async with Service.open(target.url, actor="bench-queue") as svc:
        for _ in range(runs):
            conversation = await svc.start_conversation("ops", workspace=fill.LARGE_WORKSPACE)
            await svc.send(conversation.id, PLAIN_TURN)
    context = multiprocessing.get_context("spawn")
    results, start = context.Queue(), context.Event()
    workers = [
        context.Process(target=claim_process, args=(target.url, start, results))
        for _ in range(CLAIM_PROCESSES)
    ]
    for worker in workers:
        worker.start()
    for _ in workers:
        await asyncio.to_thread(results.get, timeout=300)
    started = time.time()
    start.set()
    outcomes = [await asyncio.to_thread(results.get, timeout=600) for _ in workers]
    for worker in workers:
        worker.join()
    claims = sum(o[0] for o in outcomes)
    empty = sum(o[1] for o in outcomes)
    seconds = max(o[2] for o in outcomes) - started
    target.add("claims_per_s", claims / seconds if seconds > 0 else float("nan"))
    target.add("claim_empty_fraction", empty / (claims + empty) if claims + empty else 0.0)


async def measure_sweeper(target: Target, recorder: StatementRecorder) -> None:
    """Make the fill's 1,000 calls overdue (the empty database: add 1,000 overdue calls and nothing
    else, the same work), then sweep pass by pass until a pass finds nothing."""
    engine = engine_for(target.url)
    async with engine.begin() as conn:
        if target.name == "full":
            await conn.exec_driver_sql(fill.MAKE_OVERDUE)
        else:
            await fill.fill_overdue_only(conn, 1000)
    await engine.dispose()
    async with Service.open(target.url, actor="bench-sweep") as svc:
        expired = 0
        while True:
            started = time.perf_counter()
            with recorder.recording(f"sweeper pass ({target.name})"):
                changed = await svc.sweep()
            target.add("sweep_pass", (time.perf_counter() - started) * 1000)
            expired += changed
            if changed == 0:
                break
        target.add("sweep_changed", float(expired))


async def record_turn(target: Target, recorder: StatementRecorder) -> None:
    """One approval turn in this process, its statements recorded: a claim, a segment, the resolve."""
    ws = fill.LARGE_WORKSPACE
    async with Service.open(target.url, actor="bench-plans") as svc:
        conversation = await svc.start_conversation("ops", workspace=ws)
        with recorder.recording("turn: post the message"):
            run = await svc.send(conversation.id, target.turn_content[ws])
        with recorder.recording("turn: claim and run to the suspension"):
            assert await svc.run_once()
        view = await svc.get_run(run.id)
        with recorder.recording("turn: resolve"):
            await svc.resolve(view.pending[0].correlation_id, "approve")
        with recorder.recording("turn: claim and resume to the answer"):
            assert await svc.run_once()


async def measure_outbox(targets: list[Target], rounds: int) -> None:
    statement = operator_reads(fill.LARGE_WORKSPACE, None, "00000000-0000-0000-0000-000000000000")[-1][1]
    engines = {t.name: engine_for(t.url) for t in targets}
    for _ in range(rounds):
        for target in targets:
            explained = await explain(engines[target.name], "outbox due scan", statement)
            target.add("outbox_due_scan", explained.execution_ms or float("nan"))
    for engine in engines.values():
        await engine.dispose()


async def explain_all(target: Target, recorder: StatementRecorder) -> list[Explained]:
    engine = engine_for(target.url)
    explained = []
    try:
        for captured in recorder.captured:
            explained.append(await explain(engine, captured.label, captured.statement, captured.parameters))
        for ws in WORKSPACES:
            reads = operator_reads(
                ws,
                target.deep_key if ws == fill.LARGE_WORKSPACE else None,
                target.conversation[fill.LARGE_WORKSPACE],
            )
            for label, statement in reads[:2] if ws != fill.LARGE_WORKSPACE else reads:
                explained.append(await explain(engine, label, statement))
    finally:
        await engine.dispose()
    return explained


def _figure(samples: list[float], q: float, name: str) -> float:
    """A percentile of latencies; the mean of the claim rounds."""
    if name.startswith("claim"):
        return sum(samples) / len(samples) if samples else float("nan")
    return percentile(samples, q)


def summarise(full: Target, empty: Target) -> dict[str, float | None]:
    """p50/p95 of each sample set of both databases, and full/empty of each."""
    metrics: dict[str, tuple[str, float]] = {
        "turn_p50": (f"turn_{fill.LARGE_WORKSPACE}", 0.5),
        "turn_p95": (f"turn_{fill.LARGE_WORKSPACE}", 0.95),
        "turn_small_p50": (f"turn_{fill.SMALL_WORKSPACE}", 0.5),
        "turn_small_p95": (f"turn_{fill.SMALL_WORKSPACE}", 0.95),
        "inbox_first_page": (f"inbox_first_{fill.LARGE_WORKSPACE}", 0.5),
        "inbox_deep_page": (f"inbox_deep_{fill.LARGE_WORKSPACE}", 0.5),
        "inbox_first_page_small": (f"inbox_first_{fill.SMALL_WORKSPACE}", 0.5),
        "inbox_deep_page_small": (f"inbox_deep_{fill.SMALL_WORKSPACE}", 0.5),
        "events_replay": ("events_replay", 0.5),
        "audit_search": ("audit_search", 0.5),
        "claims_per_s": ("claims_per_s", 0.5),
        "claim_empty_fraction": ("claim_empty_fraction", 0.5),
        "sweep_pass_p50": ("sweep_pass", 0.5),
        "sweep_pass_max": ("sweep_pass", 1.0),
        "outbox_due_scan": ("outbox_due_scan", 0.5),
    }
    figures: dict[str, float | None] = {}
    for name, (samples, q) in metrics.items():
        values = {t.name: _figure(t.samples.get(samples, []), q, name) for t in (full, empty)}
        unit = "" if name.startswith("claim") else "_ms"
        figures[f"{name}{unit}_full"] = None if math.isnan(values["full"]) else round(values["full"], 3)
        figures[f"{name}{unit}_empty"] = None if math.isnan(values["empty"]) else round(values["empty"], 3)
        ratio = values["full"] / values["empty"] if values["empty"] else None
        figures[f"{name}_ratio"] = None if ratio is None or math.isnan(ratio) else round(ratio, 3)
    figures["sweep_changed_full"] = full.samples.get("sweep_changed", [0.0])[0]
    figures["sweep_passes_full"] = len(full.samples.get("sweep_pass", []))
    return figures


def print_table(figures: dict[str, float | None]) -> None:
    print(f"{'figure':<26} {'full':>12} {'empty':>12} {'full/empty':>11}")
    for key in figures:
        if key.endswith("_ratio"):
            name = key.removesuffix("_ratio")
            unit = "" if name.startswith("claim") else "_ms"
            full, empty = figures[f"{name}{unit}_full"], figures[f"{name}{unit}_empty"]
            print(f"{name + unit:<26} {full!s:>12} {empty!s:>12} {figures[key]!s:>11}")


def write_plans(path: Path, explained: list[Explained]) -> list[str]:
    """The plans, as text, into `path`; the sequential scans of big tables found, one line each."""
    found = []
    with path.open("w") as out:
        for item in explained:
            out.write(f"-- {item.label}\n{item.statement}\n\n{item.text}\n\n")
            found.extend(f"{item.label}: Seq Scan on {table}" for table in item.seq_scans)
    return found


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--reads", type=int, default=40)
    parser.add_argument("--claims", type=int, default=200, help="runs queued for the claim measurement")
    parser.add_argument("--reuse", action="store_true", help="keep a fill of the same scale")
    parser.add_argument("--plans", type=Path, default=Path("volume-plans.txt"))
    parser.add_argument(
        "--fill-only", action="store_true", help="fill (or keep) the full database, then stop"
    )
    parser.add_argument(
        "--keep-schema",
        action="store_true",
        help="with --reuse: do not migrate (to measure an older revision)",
    )
    args = parser.parse_args()
    full = Target("full", os.environ.get("BENCH_VOLUME_PG_URL", PG + "bench_volume"))
    empty = Target("empty", os.environ.get("BENCH_VOLUME_EMPTY_PG_URL", PG + "bench_volume_empty"))
    configure_logging("WARNING")
    load_before = os.getloadavg()
    info = await prepare_full(full, fill.Shape.at(args.scale), args.scale, args.reuse, not args.keep_schema)
    print(f"fill: {json.dumps(info)}", flush=True)
    if args.fill_only:
        return
    await fresh_database(empty.url)
    for target in (full, empty):
        await prepare_keys(target)
    targets = [full, empty]
    print("measuring the outbox scan, turns and reads", flush=True)
    await measure_outbox(targets, 20)
    await measure_http(targets, args.turns, args.reads)
    recorder = StatementRecorder()
    await record_turn(full, recorder)
    print("measuring claims", flush=True)
    for _ in range(CLAIM_ROUNDS):
        for target in targets:
            await measure_claims(target, max(1, args.claims // CLAIM_ROUNDS))
    print("measuring the sweeper", flush=True)
    for target in targets:
        await measure_sweeper(target, recorder)
    recorder.captured = [c for c in recorder.captured if not c.label.endswith("(empty)")]
    explained = await explain_all(full, recorder)
    seq_scans = write_plans(args.plans, explained)
    engine = engine_for(full.url)
    async with engine.begin() as conn:
        await fill.restore(conn)
    await engine.dispose()
    figures = summarise(full, empty)
    print_table(figures)
    print(
        f"plans: {args.plans} ({len(explained)} statements); sequential scans of big tables: {len(seq_scans)}"
    )
    for line in seq_scans:
        print(f"  {line}")
    result = {
        "scale": args.scale,
        **{k: v for k, v in info.items() if not isinstance(v, dict)},
        **figures,
        "seq_scans_big_tables": seq_scans,
        "statements_explained": len(explained),
        "loadavg_before": [round(x, 2) for x in load_before],
        "loadavg_after": [round(x, 2) for x in os.getloadavg()],
    }
    print(json.dumps(result))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    asyncio.run(main())
