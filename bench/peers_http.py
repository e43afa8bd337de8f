"""Over HTTP, side by side: Sursis's processes against LangGraph's Agent Server on its PostgreSQL
runtime, the same approval turn with a zero-latency model.

- Sursis on PostgreSQL (BENCH_PG_URL), in one of two layouts (`--ours-layout`): `embedded` (the
  default, the service's own: `sursis serve` runs the API and its worker, so a message's or a
  decision's transaction hands its run to a free slot of that process's worker): two `sursis serve`
  processes, the conversations split between them (each stays on its process), the one-client
  turns on the first; `split`: one `sursis serve --no-worker` and one `sursis worker` (no hand-off,
  every run is claimed). A turn is the message with `?wait=` (-> suspended), the resolve with
  `?wait=` (-> completed) (`http_load.http_turn`).
- LangGraph's Agent Server (`agent_server.py`): `langgraph-api` with `langgraph-runtime-pg`, its
  own database on the same PostgreSQL server and a Redis of its own; by default an API process and
  a queue process (`--agent-server-layout split`), or the API running its queue (`single`). A turn
  is `POST /threads/{id}/runs/wait` with the message (-> interrupted) and again with
  `{"command": {"resume": "approve"}}` (-> final answer), `langgraph_graph.py`'s graph.

Turns are interleaved one by one (the side that goes first alternates every round). Server CPU
per turn is each side's CPU over the whole round divided by its turns (`server_cpu.py`): its
processes (API and workers or queue), the PostgreSQL backends of its database, and on the Agent
Server's side Redis. Over a round each side also idles while the other runs its turn; the idle
CPU per second, measured apart before the rounds, says how much of the figure that is. Then
turns/s with `--http-clients` conversations at once, one side at a time, in
`--http-throughput-rounds` rounds whose first side alternates, with the same CPU split.

    .venv/bin/python bench/peers.py --http-only [--http-rounds 5] [--http-window 10]
        [--http-clients 10] [--http-turns 10] [--http-throughput-rounds 3]
        [--ours-layout embedded|split] [--agent-server-layout split|single]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa
from agent_server import LAYOUTS, AgentServer
from common import Processes, call, engine_for, fresh_database, percentile, script
from http_load import http_turn, new_conversation, seed_letters, start_service
from server_cpu import ZERO, BackendLister, CpuSplit, ServerCpu

OURS_LAYOUTS = ("embedded", "split")
EMBEDDED_APIS = 2
"""`sursis serve` processes in the embedded layout: one per core of the bench machine."""
SETTLE_S = 0.3
"""Left after a round's last turn before the closing sample, for the work a turn leaves behind."""
IDLE_S = 3.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--http",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="over HTTP: Sursis's processes against LangGraph's Agent Server (PostgreSQL runtime)",
    )
    parser.add_argument("--http-only", action="store_true", help="only the part over HTTP")
    parser.add_argument("--http-rounds", type=int, default=5)
    parser.add_argument("--http-window", type=int, default=10, help="turns per side in each round")
    parser.add_argument("--http-clients", type=int, default=10, help="conversations at once for turns/s")
    parser.add_argument("--http-turns", type=int, default=10, help="turns per conversation for turns/s")
    parser.add_argument("--http-throughput-rounds", type=int, default=3, help="bursts per side for turns/s")
    parser.add_argument(
        "--ours-layout",
        choices=OURS_LAYOUTS,
        default="embedded",
        help="embedded: two `sursis serve`, each with its worker; split: `serve --no-worker` + `worker`",
    )
    parser.add_argument(
        "--agent-server-layout",
        choices=LAYOUTS,
        default="split",
        help="split: an API and a queue process; single: the API runs its queue",
    )


async def new_thread(client: httpx.AsyncClient, base: str) -> str:
    response = await client.post(f"{base}/threads", json={})
    response.raise_for_status()
    thread_id: str = response.json()["thread_id"]
    return thread_id


EARLY_ANSWERS = [0]
"""How many `runs/wait` answers came before their run had finished (the PostgreSQL runtime, under
load, sometimes answers with the thread's values mid-run); the turn then joins the run."""


async def wait_for(
    client: httpx.AsyncClient, base: str, response: httpx.Response, done: Callable[[Any], bool]
) -> Any:
    """The run's answer once `done` holds: `response`'s, or from joining the run (`Location`)."""
    response.raise_for_status()
    for _ in range(200):
        body = response.json()
        if done(body):
            return body
        EARLY_ANSWERS[0] += 1
        await asyncio.sleep(0.05)
        response = await client.get(f"{base}{response.headers['Location']}")
        response.raise_for_status()
    raise RuntimeError(f"the run did not finish: {response.text[:300]}")


async def agent_server_turn(
    client: httpx.AsyncClient, base: str, thread_id: str
) -> tuple[float, float, float]:
    """(message -> interrupted, 0 (the resume is the resolve), resume -> final answer) in ms."""
    url = f"{base}/threads/{thread_id}/runs/wait"
    message = {"role": "human", "content": "please replay evt_1001"}
    started = time.perf_counter()
    response = await client.post(url, json={"assistant_id": "agent", "input": {"messages": [message]}})
    await wait_for(client, base, response, lambda body: "__interrupt__" in body)
    suspended = time.perf_counter()
    response = await client.post(url, json={"assistant_id": "agent", "command": {"resume": "approve"}})
    await wait_for(client, base, response, lambda body: body["messages"][-1]["content"] == "replayed")
    completed = time.perf_counter()
    return (suspended - started) * 1000, 0.0, (completed - suspended) * 1000


def replay(client: int) -> str:
    """Sursis's turn for the `client`-th conversation: its own dead letter (`seed_letters`), so
    concurrent replays do not queue on one row; the Agent Server's tool touches no row."""
    return script([call("replay_dlq_event", event_id=f"evt_bench_{client}", reason="bench")], "replayed")


@dataclass
class Side:
    turn: Callable[[str, int], Awaitable[tuple[float, float, float]]]
    """(conversation, client index) -> the turn's phases in ms."""
    new: Callable[[int], Awaitable[str]]
    """(client index) -> a new conversation (on the process that client's turns go to)."""
    cpu: ServerCpu

    async def timed_turn(self, conversation: str, client: int = 0) -> float:
        suspend, _, resume = await self.turn(conversation, client)
        return suspend + resume


def rng(values: list[float]) -> str:
    return f"{round(statistics.median(values), 3)} ({round(min(values), 3)}-{round(max(values), 3)})"


def split_text(cpu: CpuSplit, turns: int, name: str) -> str:
    """The CPU per turn and its parts (Redis on the Agent Server's side only)."""
    per = cpu.per_turn_ms(turns)
    parts = f"processes {per['processes']} + postgres {per['postgres']}"
    if name == "agent_server":
        parts += f" + redis {per['redis']}"
    return f"cpu {per['total']} ms ({parts})"


def record_cpu(summary: dict[str, Any], key: str, cpu: CpuSplit, turns: int) -> None:
    per = cpu.per_turn_ms(turns)
    summary[f"{key}_cpu_ms_per_turn"] = per["total"]
    for part in ("processes", "postgres", "redis"):
        summary[f"{key}_cpu_{part}_ms_per_turn"] = per[part]


async def idle_cpu(sides: dict[str, Side], summary: dict[str, Any]) -> None:
    before = {n: await s.cpu.sample() for n, s in sides.items()}
    await asyncio.sleep(IDLE_S)
    after = {n: await s.cpu.sample() for n, s in sides.items()}
    text = []
    for name in sides:
        per_s = round(ServerCpu.between(before[name], after[name]).total * 1000 / IDLE_S, 2)
        summary[f"http_{name}_idle_cpu_ms_per_s"] = per_s
        text.append(f"{name} {per_s}")
    print(f" idle, server CPU ms per second: {', '.join(text)}", flush=True)


async def rounds(args: argparse.Namespace, sides: dict[str, Side], summary: dict[str, Any]) -> None:
    turn_ratios: list[float] = []
    cpu_ratios: list[float] = []
    all_turns: dict[str, list[float]] = {n: [] for n in sides}
    all_cpu: dict[str, CpuSplit] = dict.fromkeys(sides, ZERO)
    w = args.http_window
    for r in range(args.http_rounds):
        order = list(sides) if r % 2 == 0 else list(reversed(sides))
        conversations = {n: await sides[n].new(0) for n in order}
        turns: dict[str, list[float]] = {n: [] for n in order}
        before = {n: await sides[n].cpu.sample() for n in order}
        for _ in range(args.http_window):
            for name in order:
                turns[name].append(await sides[name].timed_turn(conversations[name]))
        await asyncio.sleep(SETTLE_S)
        cpu = {n: ServerCpu.between(before[n], await sides[n].cpu.sample()) for n in order}
        turn_ratios.append(percentile(turns["sursis"], 0.5) / percentile(turns["agent_server"], 0.5))
        cpu_ratios.append(cpu["sursis"].total / max(cpu["agent_server"].total, 1e-6))
        for name in order:
            all_turns[name].extend(turns[name])
            all_cpu[name] += cpu[name]
        print(
            f" round {r + 1}: "
            + "; ".join(f"{n} {percentile(turns[n], 0.5):.1f} ms, {split_text(cpu[n], w, n)}" for n in order)
            + f"; turn ratio {turn_ratios[-1]:.3f}, cpu ratio {cpu_ratios[-1]:.3f}",
            flush=True,
        )
    total = args.http_rounds * args.http_window
    for name in sides:
        summary[f"http_{name}_turn_p50_ms"] = round(percentile(all_turns[name], 0.5), 2)
        record_cpu(summary, f"http_{name}_server", all_cpu[name], total)
        p50 = summary[f"http_{name}_turn_p50_ms"]
        print(f" all rounds: {name} {p50} ms, {split_text(all_cpu[name], total, name)}")
    for key, values in (("http_turn_ratio", turn_ratios), ("http_cpu_ratio", cpu_ratios)):
        summary[key] = round(statistics.median(values), 3)
        summary[f"{key}_min"], summary[f"{key}_max"] = round(min(values), 3), round(max(values), 3)
    print(
        f" sursis / agent server: turn {rng(turn_ratios)}, server CPU per turn {rng(cpu_ratios)} "
        "(target <= 0.5)",
        flush=True,
    )


HAND_OFFS = sa.text(
    """
    SELECT count(*) AS segments,
           count(*) FILTER (WHERE EXISTS (
               SELECT 1 FROM audit_log q WHERE q.run_id = s.run_id AND q.at = s.at
               AND q.action IN ('run.queued', 'pending.approved'))) AS handed
    FROM audit_log s WHERE s.action IN ('run.started', 'run.resumed')
    """
)
"""Segments started, and those handed off: a hand-off writes its `run.started` / `run.resumed` row
in the transaction that queued the run (`run.queued`) or approved its call (`pending.approved`),
at the same instant; a claim writes it in a later transaction of its own."""


async def segments(url: str) -> tuple[int, int]:
    """Sursis's segments so far: (started, of them handed off)."""
    engine = engine_for(url)
    try:
        async with engine.connect() as conn:
            row = (await conn.execute(HAND_OFFS)).one()
    finally:
        await engine.dispose()
    return int(row.segments), int(row.handed)


def record_hand_offs(
    summary: dict[str, Any], phase: str, before: tuple[int, int], after: tuple[int, int]
) -> None:
    started, handed = after[0] - before[0], after[1] - before[1]
    summary[f"http_sursis_{phase}_segments"] = started
    summary[f"http_sursis_{phase}_handed_off"] = handed
    print(f" Sursis's segments in the {phase}: {handed} of {started} handed off, the rest claimed")


@dataclass
class Burst:
    turns: int
    seconds: float
    latencies: list[float]
    cpu: CpuSplit
    client_cpu: float

    @property
    def rate(self) -> float:
        return self.turns / self.seconds


async def burst(args: argparse.Namespace, side: Side) -> Burst:
    """`--http-clients` conversations at once, `--http-turns` turns each, on one side."""
    conversations = [await side.new(i) for i in range(args.http_clients)]
    latencies: list[float] = []

    async def client(conversation: str, index: int) -> None:
        for _ in range(args.http_turns):
            latencies.append(await side.timed_turn(conversation, index))

    before = await side.cpu.sample()
    own = time.process_time()
    started = time.perf_counter()
    await asyncio.gather(*(client(c, i) for i, c in enumerate(conversations)))
    elapsed = time.perf_counter() - started
    own = time.process_time() - own
    await asyncio.sleep(SETTLE_S)
    cpu = ServerCpu.between(before, await side.cpu.sample())
    return Burst(len(latencies), elapsed, latencies, cpu, own)


async def throughput(args: argparse.Namespace, sides: dict[str, Side], summary: dict[str, Any]) -> None:
    """Bursts of `--http-clients` conversations, one side at a time, the order alternating."""
    print(
        f"\nturns/s over HTTP, {args.http_clients} clients of {args.http_turns} turns, one side at a time, "
        f"{args.http_throughput_rounds} rounds, the side that goes first alternating"
    )
    bursts: dict[str, list[Burst]] = {n: [] for n in sides}
    ratios: list[float] = []
    for r in range(args.http_throughput_rounds):
        order = list(sides) if r % 2 == 0 else list(reversed(sides))
        for name in order:
            b = await burst(args, sides[name])
            bursts[name].append(b)
            print(
                f"  round {r + 1} {name:<13} {b.turns} turns in {b.seconds:.2f} s: {b.rate:.2f} turns/s, "
                f"p50 {percentile(b.latencies, 0.5):.1f} ms, p95 {percentile(b.latencies, 0.95):.1f} ms, "
                f"{split_text(b.cpu, b.turns, name)}, "
                f"client {b.client_cpu * 1000 / max(b.turns, 1):.1f} ms/turn, "
                f"load {os.getloadavg()[0]:.2f}",
                flush=True,
            )
        ratios.append(bursts["sursis"][-1].rate / bursts["agent_server"][-1].rate)
    for name, runs in bursts.items():
        turns = sum(b.turns for b in runs)
        cpu = sum((b.cpu for b in runs), ZERO)
        summary[f"http_{name}_turns_per_s"] = round(statistics.median(b.rate for b in runs), 2)
        latencies = [x for b in runs for x in b.latencies]
        summary[f"http_{name}_throughput_turn_p50_ms"] = round(percentile(latencies, 0.5), 2)
        record_cpu(summary, f"http_{name}_throughput", cpu, turns)
        rate = summary[f"http_{name}_turns_per_s"]
        print(f" all rounds: {name} {rate} turns/s (median), {split_text(cpu, turns, name)}")
    summary["http_throughput_ratio"] = round(statistics.median(ratios), 3)
    summary["http_throughput_ratio_min"] = round(min(ratios), 3)
    summary["http_throughput_ratio_max"] = round(max(ratios), 3)
    print(f" sursis / agent server turns/s = {rng(ratios)} (target >= 2)", flush=True)


async def run(args: argparse.Namespace, ours_url: str, log_dir: Path, summary: dict[str, Any]) -> None:
    if args.quick:
        args.http_rounds, args.http_window, args.http_turns, args.http_throughput_rounds = 1, 3, 2, 1
    headers = await fresh_database(ours_url)
    await seed_letters(ours_url, args.http_clients)
    processes = Processes(ours_url, log_dir)
    server = AgentServer(log_dir, args.agent_server_layout)
    lister = BackendLister(ours_url)
    try:
        await lister.open()
        embedded = args.ours_layout == "embedded"
        apis = EMBEDDED_APIS if embedded else 1
        layout = await start_service(processes, ours_url, workers=1, apis=apis, embedded=embedded)
        await server.start()

        def base(client: int) -> str:
            return layout.bases[client % len(layout.bases)]

        limits = httpx.Limits(max_connections=args.http_clients + 10)
        async with (
            httpx.AsyncClient(headers=headers, timeout=120, limits=limits) as ours,
            httpx.AsyncClient(timeout=120, limits=limits) as peer,
        ):
            sides = {
                "sursis": Side(
                    lambda c, i: http_turn(ours, base(i), c, replay(i)),
                    lambda i: new_conversation(ours, base(i)),
                    ServerCpu(lister, layout.pids, ours_url.rsplit("/", 1)[1]),
                ),
                "agent_server": Side(
                    lambda c, _: agent_server_turn(peer, server.base, c),
                    lambda _: new_thread(peer, server.base),
                    ServerCpu(lister, server.pids(), server.database, [server.redis_pid]),
                ),
            }
            for name, side in sides.items():  # warm up, each of Sursis's API processes
                for client in range(len(layout.bases) if name == "sursis" else 1):
                    conversation = await side.new(client)
                    for _ in range(5):
                        await side.timed_turn(conversation, client)
            print(
                f"\nover HTTP: Sursis {layout.describe()}; the Agent Server (PostgreSQL runtime) "
                f"{server.describe()}, Redis; {args.http_rounds} rounds of {args.http_window} turns per "
                "side, interleaved; turn p50 and server CPU per turn (processes + PostgreSQL backends "
                f"+ Redis); load {os.getloadavg()[0]:.2f}",
                flush=True,
            )
            summary["http_ours_layout"] = args.ours_layout
            summary["http_agent_server_layout"] = args.agent_server_layout
            await idle_cpu(sides, summary)
            warm = await segments(ours_url)
            await rounds(args, sides, summary)
            after_rounds = await segments(ours_url)
            await throughput(args, sides, summary)
            record_hand_offs(summary, "rounds", warm, after_rounds)
            record_hand_offs(summary, "throughput", after_rounds, await segments(ours_url))
            summary["http_agent_server_early_answers"] = EARLY_ANSWERS[0]
            print(f" the Agent Server's answers before their run had ended (joined): {EARLY_ANSWERS[0]}")
    finally:
        server.stop()
        processes.stop_all()
        await lister.close()
