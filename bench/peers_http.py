"""Over HTTP, side by side: Sursis's processes against LangGraph's Agent Server on its PostgreSQL
runtime, the same approval turn with a zero-latency model.

- Sursis: one `sursis serve --no-worker` and one `sursis worker` on PostgreSQL (BENCH_PG_URL); a
  turn is the message with `?wait=` (-> suspended), the resolve with `?wait=` (-> completed)
  (`http_load.http_turn`).
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
turns/s with `--http-clients` conversations at once, each side alone, with the same CPU split.

    .venv/bin/python bench/peers.py --http-only [--http-rounds 5] [--http-window 10]
        [--http-clients 10] [--http-turns 10] [--agent-server-layout split|single]
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
from agent_server import LAYOUTS, AgentServer
from common import Processes, fresh_database, percentile
from http_load import http_turn, new_conversation, seed_letters, start_service
from server_cpu import ZERO, BackendLister, CpuSplit, ServerCpu

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


async def agent_server_turn(
    client: httpx.AsyncClient, base: str, thread_id: str
) -> tuple[float, float, float]:
    """(message -> interrupted, 0 (the resume is the resolve), resume -> final answer) in ms."""
    url = f"{base}/threads/{thread_id}/runs/wait"
    message = {"role": "human", "content": "please replay evt_1001"}
    started = time.perf_counter()
    response = await client.post(url, json={"assistant_id": "agent", "input": {"messages": [message]}})
    response.raise_for_status()
    if "__interrupt__" not in response.json():
        raise RuntimeError(f"the graph did not interrupt: {response.text[:300]}")
    suspended = time.perf_counter()
    response = await client.post(url, json={"assistant_id": "agent", "command": {"resume": "approve"}})
    response.raise_for_status()
    if response.json()["messages"][-1]["content"] != "replayed":
        raise RuntimeError(f"unexpected answer {response.text[:300]}")
    completed = time.perf_counter()
    return (suspended - started) * 1000, 0.0, (completed - suspended) * 1000


@dataclass
class Side:
    turn: Callable[[str], Awaitable[tuple[float, float, float]]]
    new: Callable[[], Awaitable[str]]
    cpu: ServerCpu

    async def timed_turn(self, conversation: str) -> float:
        suspend, _, resume = await self.turn(conversation)
        return suspend + resume


def rng(values: list[float]) -> str:
    return f"{round(statistics.median(values), 3)} ({round(min(values), 3)}-{round(max(values), 3)})"


def split_text(cpu: CpuSplit, turns: int) -> str:
    per = cpu.per_turn_ms(turns)
    parts = f"processes {per['processes']} + postgres {per['postgres']}"
    if cpu.side:
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
        conversations = {n: await sides[n].new() for n in order}
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
            + "; ".join(f"{n} {percentile(turns[n], 0.5):.1f} ms, {split_text(cpu[n], w)}" for n in order)
            + f"; turn ratio {turn_ratios[-1]:.3f}, cpu ratio {cpu_ratios[-1]:.3f}",
            flush=True,
        )
    total = args.http_rounds * args.http_window
    for name in sides:
        summary[f"http_{name}_turn_p50_ms"] = round(percentile(all_turns[name], 0.5), 2)
        record_cpu(summary, f"http_{name}_server", all_cpu[name], total)
        p50 = summary[f"http_{name}_turn_p50_ms"]
        print(f" all rounds: {name} {p50} ms, {split_text(all_cpu[name], total)}")
    for key, values in (("http_turn_ratio", turn_ratios), ("http_cpu_ratio", cpu_ratios)):
        summary[key] = round(statistics.median(values), 3)
        summary[f"{key}_min"], summary[f"{key}_max"] = round(min(values), 3), round(max(values), 3)
    print(
        f" sursis / agent server: turn {rng(turn_ratios)}, server CPU per turn {rng(cpu_ratios)} "
        "(target <= 0.5)",
        flush=True,
    )


async def throughput(args: argparse.Namespace, sides: dict[str, Side], summary: dict[str, Any]) -> None:
    print(f"\nturns/s over HTTP, {args.http_clients} clients of {args.http_turns} turns, each side alone")
    rates: dict[str, float] = {}
    for name, side in sides.items():
        conversations = [await side.new() for _ in range(args.http_clients)]
        latencies: list[float] = []

        async def client(conversation: str, side: Side = side, into: list[float] = latencies) -> None:
            for _ in range(args.http_turns):
                into.append(await side.timed_turn(conversation))

        before = await side.cpu.sample()
        own = time.process_time()
        started = time.perf_counter()
        await asyncio.gather(*(client(c) for c in conversations))
        elapsed = time.perf_counter() - started
        own = time.process_time() - own
        await asyncio.sleep(SETTLE_S)
        cpu = ServerCpu.between(before, await side.cpu.sample())
        done = len(latencies)
        rates[name] = round(done / elapsed, 2)
        summary[f"http_{name}_turns_per_s"] = rates[name]
        summary[f"http_{name}_throughput_turn_p50_ms"] = round(percentile(latencies, 0.5), 2)
        record_cpu(summary, f"http_{name}_throughput", cpu, done)
        load = os.getloadavg()[0]
        print(
            f"  {name:<13} {done} turns in {elapsed:.2f} s: {rates[name]} turns/s, "
            f"p50 {percentile(latencies, 0.5):.1f} ms, p95 {percentile(latencies, 0.95):.1f} ms, "
            f"{split_text(cpu, done)}, client {own * 1000 / max(done, 1):.1f} ms/turn, load {load:.2f}",
            flush=True,
        )
    ratio = rates["sursis"] / rates["agent_server"]
    summary["http_throughput_ratio"] = round(ratio, 3)
    print(f" sursis / agent server turns/s = {ratio:.2f} (target >= 2)", flush=True)


async def run(args: argparse.Namespace, ours_url: str, log_dir: Path, summary: dict[str, Any]) -> None:
    if args.quick:
        args.http_rounds, args.http_window, args.http_turns = 1, 3, 2
    headers = await fresh_database(ours_url)
    await seed_letters(ours_url, args.http_clients)
    processes = Processes(ours_url, log_dir)
    server = AgentServer(log_dir, args.agent_server_layout)
    lister = BackendLister(ours_url)
    try:
        await lister.open()
        layout = await start_service(processes, ours_url, workers=1, apis=1)
        await server.start()
        base = layout.bases[0]
        limits = httpx.Limits(max_connections=args.http_clients + 10)
        async with (
            httpx.AsyncClient(headers=headers, timeout=120, limits=limits) as ours,
            httpx.AsyncClient(timeout=120, limits=limits) as peer,
        ):
            sides = {
                "sursis": Side(
                    lambda c: http_turn(ours, base, c),
                    lambda: new_conversation(ours, base),
                    ServerCpu(lister, layout.pids, ours_url.rsplit("/", 1)[1]),
                ),
                "agent_server": Side(
                    lambda c: agent_server_turn(peer, server.base, c),
                    lambda: new_thread(peer, server.base),
                    ServerCpu(lister, server.pids(), server.database, [server.redis_pid]),
                ),
            }
            for side in sides.values():  # warm up
                conversation = await side.new()
                for _ in range(5):
                    await side.timed_turn(conversation)
            print(
                f"\nover HTTP: Sursis {layout.describe()}; the Agent Server (PostgreSQL runtime) "
                f"{server.describe()}, Redis; {args.http_rounds} rounds of {args.http_window} turns per "
                "side, interleaved; turn p50 and server CPU per turn (processes + PostgreSQL backends "
                f"+ Redis); load {os.getloadavg()[0]:.2f}",
                flush=True,
            )
            summary["http_agent_server_layout"] = args.agent_server_layout
            await idle_cpu(sides, summary)
            await rounds(args, sides, summary)
            await throughput(args, sides, summary)
    finally:
        server.stop()
        processes.stop_all()
        await lister.close()
