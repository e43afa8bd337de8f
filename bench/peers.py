"""Side by side: one approval turn through Sursis and through LangGraph's PostgreSQL checkpointer.

The same turn on both sides, with a zero-latency model so that only the frameworks are measured:
a user message makes the model propose the gated `replay_dlq_event`, the run suspends, an operator
approves, the tool runs, the model answers.

- Sursis: the service and its runner in this process (message -> suspended; resolve; the resumed
  run to `completed`), on PostgreSQL (BENCH_PG_URL).
- pydantic-ai alone (`agent_only`): the same turn through a bare pydantic-ai agent of the same
  shape, nothing stored (`turn_agent.py`): the floor under Sursis's turn, since the service runs
  its turns on pydantic-ai. Measured at turn 1 only (it keeps the whole history in a list).
- LangGraph: a tool-calling graph (model node + `ToolNode`) whose tool calls `interrupt()`,
  resumed with `Command(resume=...)`, checkpointed by `AsyncPostgresSaver` on the same PostgreSQL
  server, in its own database (PEERS_PG_URL); `turn_langgraph.py`.
- pydantic-ai on DBOS: the same agent as `agent_only` with pydantic-ai's `DBOSDurability`
  capability inside a `@DBOS.workflow`, the approval published with `DBOS.set_event` and received
  with `DBOS.recv` (`turn_dbos.py`), DBOS's system database on the same server (DBOS_PG_URL).
- pydantic-ai on pgtask and on Absurd (`--pg-peers`, the default; `peer_process.py`): the same
  agent with pydantic-ai-harness's `PGTaskDurability` inside a pgtask task that waits for the
  decision with `wait_for_signal` (`turn_pgtask.py`, PGTASK_PG_URL), and with its
  `AbsurdDurability` inside an Absurd task that waits with `await_event` (`turn_absurd.py`,
  ABSURD_PG_URL); each in a child process from a venv of its own (`.venv-pgtask`, `.venv-absurd`),
  its engine's client and worker both in it, interleaved with the sides above. The operator's side
  polls the task's state every `--poll-ms` (neither engine notifies a waiting task). Both engines
  run a tool again if the process died after its effect (at least once); Sursis runs it once.
- Over HTTP (`--http`, the default; `--http-only` for this part alone; `peers_http.py`): Sursis's
  processes (`--ours-layout`: two `serve` with their workers, or `serve --no-worker` + `worker`)
  against LangGraph's Agent Server on its PostgreSQL runtime (`langgraph-api` with
  `langgraph-runtime-pg` and Redis, in its own venv; `agent_server.py`), turn time, server CPU per
  turn (processes, PostgreSQL backends, Redis), and turns/s with 10 clients.
- Throughput (`--throughput`, the default; `peers_throughput.py`): approval turns/s with 10
  conversations at once through Sursis's processes over HTTP (2 API + 2 workers, then 4 workers)
  and through LangGraph with a pooled `AsyncPostgresSaver`, with the CPU per turn and the load.

Turns are interleaved one by one (the side that goes first alternates every round), so a busy
machine slows both alike. Beside each turn's time and its process's CPU (for a child process, the
child's), the CPU of the PostgreSQL backends of the side's own database over the turn (`/proc`, when
the server is local; a mean, as it comes in clock ticks). Transactions are counted on the server
(`pg_stat_database` of each side's own database, read after the side's connections have closed,
so every backend flushed its counters) and statements on the client (SQLAlchemy's
`before_cursor_execute`; a counting psycopg cursor). Needs the `peers` extra:
`pip install -e '.[peers]'` (`make bench-peers` does it).

    .venv/bin/python bench/peers.py [--rounds 5] [--window 10] [--long 200] [--durability sync]
        [--no-throughput] [--throughput-turns 20] [--throughput-seconds 120] [--quick]
        [--http-only] [--no-http] [--http-rounds 5] [--ours-layout embedded|split]
        [--agent-server-layout split|single] [--no-pg-peers] [--poll-ms 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import peers_http
import peers_throughput
import psycopg
from peer_process import BackendSampler, asyncpg_url, mean, peer_specs, print_pg_peers
from peers_rounds import ATTRS, HEADER, Samples, interleaved, p50, row
from turn_agent import AgentOnlySide
from turn_dbos import DbosSide
from turn_langgraph import LangGraphSide
from turn_ours import OursSide, ensure_database, log_to_file

DEFAULT_BENCH_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/bench"
DEFAULT_PEERS_URL = "postgresql://postgres@127.0.0.1:5432/peers"
DEFAULT_DBOS_URL = "postgresql://postgres@127.0.0.1:5432/peers_dbos"


# --- counting transactions on the server -----------------------------------------------------


async def server_transactions(url: str, database: str) -> tuple[int, int]:
    """(xact_commit, xact_rollback) of `database`, read over a connection to another database."""
    admin = url.replace("+asyncpg", "").rsplit("/", 1)[0] + "/postgres"
    async with await psycopg.AsyncConnection.connect(admin, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT xact_commit, xact_rollback FROM pg_stat_database WHERE datname = %s", (database,)
        )
        row = await cur.fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


Side = Any
Phase = Callable[[Side, Any], Awaitable[None]]


async def transactions_per_turn(
    make_side: Callable[[], Side], url: str, database: str, phase: str, turns: int = 10
) -> float:
    """Server transactions (commits + rollbacks) per `phase` ("suspend" or "turn").

    Two passes with fresh connections, of 2 and of 2 + `turns` turns; the difference divided by
    `turns`, so connecting, start-up and the first turns' warm-up cancel out. Each pass closes its
    connections, so their backends flush their counters when they exit.
    """

    async def one_pass(count: int) -> int:
        before = sum(await server_transactions(url, database))
        side = make_side()
        await side.open()
        try:
            for _ in range(count):
                conversation = await side.new_conversation()
                if phase == "suspend":
                    await side.suspend_only(conversation)
                else:
                    await side.turn(conversation)
        finally:
            await side.close()
        for _ in range(50):  # backends flush on exit, asynchronously
            await asyncio.sleep(0.1)
            after = sum(await server_transactions(url, database))
            await asyncio.sleep(0.3)
            if sum(await server_transactions(url, database)) == after:
                break
        return after - before

    small = await one_pass(2)
    large = await one_pass(2 + turns)
    return round((large - small) / turns, 1)


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--window", type=int, default=10, help="turns per side in each round")
    parser.add_argument("--long", type=int, default=200, help="the later turn compared (0: skip)")
    parser.add_argument(
        "--durability",
        choices=["sync", "async", "exit"],
        default=None,
        help="LangGraph's checkpoint durability (default: LangGraph's own default)",
    )
    parser.add_argument("--quick", action="store_true", help="a smoke run: few turns of every part")
    parser.add_argument(
        "--pg-peers",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="pydantic-ai on pgtask and on Absurd (their venvs; peer_process.py)",
    )
    parser.add_argument(
        "--poll-ms", type=float, default=5.0, help="pgtask, Absurd: how often a task's state is read"
    )
    peers_throughput.add_arguments(parser)
    peers_http.add_arguments(parser)
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.window, args.long, args.throughput_turns = 1, 2, 0, 2

    log_dir = Path(tempfile.mkdtemp(prefix="sursis-peers-"))
    log_path = log_dir / "service.log"
    log_to_file(log_path)
    ours_url = os.environ.get("BENCH_PG_URL", DEFAULT_BENCH_URL)
    peers_url = os.environ.get("PEERS_PG_URL", DEFAULT_PEERS_URL)
    dbos_url = os.environ.get("DBOS_PG_URL", DEFAULT_DBOS_URL)
    if args.http_only:
        summary_http: dict[str, Any] = {}
        started = time.perf_counter()
        await peers_http.run(args, ours_url, log_dir, summary_http)
        summary_http["load_average"] = os.getloadavg()[0]
        summary_http["seconds"] = round(time.perf_counter() - started, 1)
        print(f"logs: {log_dir}")
        print(json.dumps(summary_http))
        return
    specs = peer_specs() if args.pg_peers else []
    for url in (peers_url, dbos_url, *(spec.url for spec in specs)):
        await ensure_database(asyncpg_url(url))
    await OursSide.prepare(ours_url)

    def make_ours(verify: bool = True) -> OursSide:
        return OursSide(ours_url, verify=verify)

    def make_peer() -> LangGraphSide:
        return LangGraphSide(peers_url, args.durability)

    summary: dict[str, Any] = {"rounds": args.rounds, "window": args.window, "durability": args.durability}
    started = time.perf_counter()
    print("transactions per turn on the server (commits + rollbacks; reads count too):", flush=True)
    counted: tuple[tuple[str, Callable[[], Side], str], ...] = (
        ("sursis", lambda: make_ours(verify=False), ours_url),
        ("langgraph", make_peer, peers_url),
    )
    for name, make, url in counted:
        database = url.rsplit("/", 1)[1]
        counted_turns = 3 if args.quick else 10
        suspend = await transactions_per_turn(make, url, database, "suspend", counted_turns)
        turn = await transactions_per_turn(make, url, database, "turn", counted_turns)
        summary[f"{name}_transactions_suspend"] = suspend
        summary[f"{name}_transactions_resume"] = round(turn - suspend, 1)
        summary[f"{name}_transactions_turn"] = turn
        print(f"  {name:<10} suspend {suspend}, resolve + resume {round(turn - suspend, 1)}, turn {turn}")

    sides: dict[str, Side] = {"sursis": make_ours(), "langgraph": make_peer()}
    turn1_sides: dict[str, Side] = {
        **sides,
        "dbos": DbosSide(dbos_url),
        **{spec.name: spec.side(log_dir, args.poll_ms) for spec in specs},
        "agent_only": AgentOnlySide(),
    }
    databases = {
        "sursis": ours_url.rsplit("/", 1)[1],
        "langgraph": peers_url.rsplit("/", 1)[1],
        "dbos": dbos_url.rsplit("/", 1)[1],
        **{spec.name: spec.database for spec in specs},
    }
    sampler = await BackendSampler.open(ours_url)
    for side in turn1_sides.values():
        await side.open()
    try:
        for side in turn1_sides.values():  # warm them up
            conversation = await side.new_conversation()
            for _ in range(3):
                await side.turn(conversation)
        if isinstance(sides["sursis"], OursSide):
            commits = sides["sursis"].commit_counts()
            print(f"\nsursis commits (SQLAlchemy): suspend {commits[0]}, resolve + resume {commits[1]}")
            summary["sursis_commits_suspend"], summary["sursis_commits_resume"] = commits

        print(f"\nturn 1: {args.rounds} rounds of {args.window} turns per side, interleaved (p50, ms)")
        ratios: list[float] = []
        dbos_ratios: list[float] = []
        cpu_ratios: dict[str, list[float]] = {"langgraph": [], "dbos": []}
        peer_turn_ratios: dict[str, list[float]] = {spec.name: [] for spec in specs}
        cpu_ratios.update({spec.name: [] for spec in specs})
        all_samples: dict[str, Samples] = {n: Samples() for n in turn1_sides}
        for r in range(args.rounds):
            first = "sursis" if r % 2 == 0 else "langgraph"
            samples = await interleaved(turn1_sides, None, args.window, first, (sampler, databases))
            ratio = p50(samples["sursis"].turn) / p50(samples["langgraph"].turn)
            ratios.append(ratio)
            dbos_ratios.append(p50(samples["sursis"].turn) / p50(samples["dbos"].turn))
            for peer, into in cpu_ratios.items():
                into.append(p50(samples["sursis"].cpu) / p50(samples[peer].cpu))
            for peer, into in peer_turn_ratios.items():
                into.append(p50(samples["sursis"].turn) / p50(samples[peer].turn))
            print(
                f" round {r + 1}: sursis / langgraph = {ratio:.2f}, sursis / dbos = {dbos_ratios[-1]:.2f}"
                f"\n{HEADER}",
                flush=True,
            )
            for name, s in samples.items():
                print(row(name, s))
                for attr in ATTRS:
                    getattr(all_samples[name], attr).extend(getattr(s, attr))
        print(f" all rounds:\n{HEADER}")
        for name, s in all_samples.items():
            print(row(name, s))
            summary[f"{name}_turn1_p50_ms"] = p50(s.turn)
            summary[f"{name}_suspend_p50_ms"] = p50(s.suspend)
            summary[f"{name}_resume_p50_ms"] = p50(s.resume)
            summary[f"{name}_statements_per_turn"] = statistics.median(s.statements) if s.statements else None
            summary[f"{name}_cpu_ms_per_turn"] = p50(s.cpu)
            summary[f"{name}_postgres_cpu_ms_per_turn"] = mean(s.postgres)
        floor = p50(all_samples["agent_only"].turn)
        summary["agent_only_vs_langgraph_ratio"] = round(floor / p50(all_samples["langgraph"].turn), 3)
        summary["sursis_beyond_agent_loop_ms"] = round(p50(all_samples["sursis"].turn) - floor, 2)
        summary["turn1_ratio"] = round(statistics.median(ratios), 3)
        summary["turn1_ratio_min"] = round(min(ratios), 3)
        summary["turn1_ratio_max"] = round(max(ratios), 3)
        summary["dbos_turn1_ratio"] = round(statistics.median(dbos_ratios), 3)
        summary["dbos_turn1_ratio_min"] = round(min(dbos_ratios), 3)
        summary["dbos_turn1_ratio_max"] = round(max(dbos_ratios), 3)
        for peer, values in cpu_ratios.items():
            summary[f"{peer}_cpu_ratio"] = round(statistics.median(values), 3)
            summary[f"{peer}_cpu_ratio_min"] = round(min(values), 3)
            summary[f"{peer}_cpu_ratio_max"] = round(max(values), 3)
        summary["sursis_beyond_agent_loop_ratio"] = round(summary["sursis_beyond_agent_loop_ms"] / floor, 3)
        print(
            f" turn 1: sursis / langgraph = {summary['turn1_ratio']} "
            f"(rounds {summary['turn1_ratio_min']}-{summary['turn1_ratio_max']}; target <= 1.0); "
            f"CPU {summary['langgraph_cpu_ratio']} "
            f"({summary['langgraph_cpu_ratio_min']}-{summary['langgraph_cpu_ratio_max']})"
        )
        print(
            f" turn 1: sursis / pydantic-ai on DBOS = {summary['dbos_turn1_ratio']} "
            f"(rounds {summary['dbos_turn1_ratio_min']}-{summary['dbos_turn1_ratio_max']}; target <= 0.5); "
            f"CPU {summary['dbos_cpu_ratio']} "
            f"({summary['dbos_cpu_ratio_min']}-{summary['dbos_cpu_ratio_max']})"
        )
        print_pg_peers(summary, all_samples, peer_turn_ratios, cpu_ratios)
        print(
            f" pydantic-ai alone / langgraph = {summary['agent_only_vs_langgraph_ratio']}: the agent loop's "
            f"floor; sursis beyond it: {summary['sursis_beyond_agent_loop_ms']} ms per turn, "
            f"{summary['sursis_beyond_agent_loop_ratio']}x the loop (target <= 2)"
        )

        if args.long:
            long = {n: await side.new_conversation() for n, side in sides.items()}
            for _ in range(args.long - 1):
                for name, side in sides.items():
                    await side.turn(long[name])
            per_round = args.window // 2 or 1
            print(f"\nturn {args.long}: {args.rounds} rounds of {per_round} turns per side (p50, ms)")
            long_ratios = []
            long_samples: dict[str, Samples] = {n: Samples() for n in sides}
            for r in range(args.rounds):
                first = "sursis" if r % 2 == 0 else "langgraph"
                samples = await interleaved(sides, long, per_round, first)
                long_ratios.append(p50(samples["sursis"].turn) / p50(samples["langgraph"].turn))
                for name, s in samples.items():
                    for attr in ATTRS:
                        getattr(long_samples[name], attr).extend(getattr(s, attr))
            print(HEADER)
            for name, s in long_samples.items():
                print(row(name, s))
                summary[f"{name}_turn{args.long}_p50_ms"] = p50(s.turn)
                summary[f"{name}_turn{args.long}_vs_turn1_ratio"] = round(
                    p50(s.turn) / summary[f"{name}_turn1_p50_ms"], 2
                )
            summary[f"turn{args.long}_ratio"] = round(statistics.median(long_ratios), 3)
            summary[f"turn{args.long}_ratio_min"] = round(min(long_ratios), 3)
            summary[f"turn{args.long}_ratio_max"] = round(max(long_ratios), 3)
            print(
                f" turn {args.long}: sursis / langgraph = {summary[f'turn{args.long}_ratio']} "
                f"(rounds {summary[f'turn{args.long}_ratio_min']}-{summary[f'turn{args.long}_ratio_max']};"
                " target <= 0.3)"
            )
    finally:
        for side in turn1_sides.values():
            await side.close()
        await sampler.close()
        DbosSide.shutdown()
    if args.http:
        await peers_http.run(args, ours_url, log_dir, summary)
    if args.throughput:
        await peers_throughput.run(args, ours_url, peers_url, log_dir, summary, specs)
    summary["load_average"] = os.getloadavg()[0]
    summary["seconds"] = round(time.perf_counter() - started, 1)
    print(f"logs: {log_dir}")
    print(json.dumps(summary))


if __name__ == "__main__":
    asyncio.run(main())
