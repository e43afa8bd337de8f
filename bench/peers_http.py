"""Over HTTP, side by side: Sursis's processes against LangGraph's Agent Server, same approval turn.

- Sursis: one `sursis serve --no-worker` and one `sursis worker` on PostgreSQL (BENCH_PG_URL); a
  turn is the message with `?wait=` (-> suspended), the resolve, and the wait for `completed`
  (`http_load.http_turn`).
- LangGraph's Agent Server: `langgraph dev` (the in-memory runtime of `langgraph-cli[inmem]`: its
  PostgreSQL runtime needs a licensed image and Redis, which do not install here) serving
  `langgraph_graph.py`'s graph; a turn is `POST /threads/{id}/runs/wait` with the message (->
  interrupted) and again with `{"command": {"resume": "approve"}}` (-> final answer). The server
  needs versions of structlog and protobuf that the service's own venv cannot have, so it runs from
  a venv of its own (`AGENT_SERVER_VENV`, default `.venv-agent-server`; `make bench-peers` makes it).

Turns are interleaved one by one (the side that goes first alternates every round). Beside each
turn time: the server's CPU per turn (user + system time of its processes, read from /proc; for
Sursis the API and the worker, not PostgreSQL's backends, which are reported apart), then turns/s
with `--http-clients` conversations at once, each side alone.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
from common import Processes, free_port, fresh_database, percentile
from http_load import (
    THROUGHPUT_HEADER,
    CpuMeter,
    ThroughputRow,
    cpu_seconds,
    format_throughput,
    http_turn,
    new_conversation,
    seed_letters,
    start_service,
)

BENCH = Path(__file__).resolve().parent
DEFAULT_VENV = BENCH.parent / ".venv-agent-server"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--http",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="over HTTP: Sursis's processes against LangGraph's Agent Server",
    )
    parser.add_argument("--http-rounds", type=int, default=3)
    parser.add_argument("--http-window", type=int, default=10, help="turns per side in each round")
    parser.add_argument("--http-clients", type=int, default=10, help="conversations at once for turns/s")
    parser.add_argument("--http-turns", type=int, default=10, help="turns per conversation for turns/s")


def descendants(pid: int) -> list[int]:
    """`pid` and every process under it."""
    found = [pid]
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            children = (task / "children").read_text().split()
        except OSError:
            continue
        for child in children:
            found.extend(descendants(int(child)))
    return found


class AgentServer:
    """`langgraph dev` on a free port, its logs in `log_dir`."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.process: subprocess.Popen[bytes] | None = None
        self.base = ""

    async def start(self) -> None:
        venv = Path(os.environ.get("AGENT_SERVER_VENV", DEFAULT_VENV))
        command = venv / "bin" / "langgraph"
        if not command.exists():
            raise RuntimeError(f"no {command}: make bench-peers installs the Agent Server there")
        config = self.log_dir / "langgraph.json"
        config.write_text(
            json.dumps(
                {"dependencies": [str(BENCH)], "graphs": {"agent": f"{BENCH / 'langgraph_graph.py'}:graph"}}
            )
        )
        port = free_port()
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("SURSIS_", "OTEL_", "VIRTUAL_ENV"))},
            "PYTHONPATH": str(BENCH),
            "LANGSMITH_TRACING": "false",
            "LANGGRAPH_CLI_NO_ANALYTICS": "1",
            "LOG_LEVEL": "WARNING",
        }
        args = [str(command), "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1"]
        args += ["--port", str(port), "--config", str(config)]
        with (self.log_dir / "agent-server.log").open("wb") as log:
            self.process = subprocess.Popen(  # noqa: ASYNC220 (started once, before anything is measured)
                args, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=self.log_dir
            )
        self.base = f"http://127.0.0.1:{port}"
        async with httpx.AsyncClient(timeout=2) as client:
            for _ in range(600):
                if self.process.poll() is not None:
                    raise RuntimeError(f"the Agent Server exited; see {self.log_dir / 'agent-server.log'}")
                try:
                    if (await client.get(f"{self.base}/ok")).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.1)
        raise RuntimeError("the Agent Server did not start in 60 s")

    def pids(self) -> list[int]:
        assert self.process is not None
        return descendants(self.process.pid)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


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


def cpu_of(pids: list[int]) -> float:
    return sum(cpu_seconds(pid) or 0.0 for pid in pids)


def rng(values: list[float]) -> str:
    return f"{round(statistics.median(values), 3)} ({round(min(values), 3)}-{round(max(values), 3)})"


async def run(args: argparse.Namespace, ours_url: str, log_dir: Path, summary: dict[str, Any]) -> None:
    if args.quick:
        args.http_rounds, args.http_window, args.http_turns = 1, 3, 2
    headers = await fresh_database(ours_url)
    await seed_letters(ours_url, args.http_clients)
    processes = Processes(ours_url, log_dir)
    server = AgentServer(log_dir)
    try:
        layout = await start_service(processes, ours_url, workers=1, apis=1)
        await server.start()
        base = layout.bases[0]
        limits = httpx.Limits(max_connections=args.http_clients + 10)
        async with (
            httpx.AsyncClient(headers=headers, timeout=120, limits=limits) as ours,
            httpx.AsyncClient(timeout=120, limits=limits) as peer,
        ):
            sides: dict[str, Any] = {
                "sursis": (
                    lambda c: http_turn(ours, base, c),
                    lambda: new_conversation(ours, base),
                    layout.pids,
                ),
                "agent_server": (
                    lambda c: agent_server_turn(peer, server.base, c),
                    lambda: new_thread(peer, server.base),
                    server.pids(),
                ),
            }
            for turn, new, _ in sides.values():  # warm up
                conversation = await new()
                for _ in range(3):
                    await turn(conversation)
            print(
                f"\nover HTTP: {args.http_rounds} rounds of {args.http_window} turns per side, interleaved; "
                "turn p50 ms and server CPU ms per turn (Sursis: 1 API + 1 worker; PostgreSQL apart)"
            )
            turn_ratios: list[float] = []
            cpu_ratios: list[float] = []
            all_turns: dict[str, list[float]] = {n: [] for n in sides}
            all_cpu: dict[str, float] = dict.fromkeys(sides, 0.0)
            for r in range(args.http_rounds):
                order = list(sides) if r % 2 == 0 else list(reversed(sides))
                conversations = {n: await sides[n][1]() for n in order}
                turns: dict[str, list[float]] = {n: [] for n in order}
                cpu: dict[str, float] = dict.fromkeys(order, 0.0)
                for _ in range(args.http_window):
                    for name in order:
                        turn, _, pids = sides[name]
                        before = cpu_of(pids)
                        suspend, _, resume = await turn(conversations[name])
                        cpu[name] += cpu_of(pids) - before
                        turns[name].append(suspend + resume)
                per = {n: cpu[n] * 1000 / args.http_window for n in order}
                turn_ratios.append(percentile(turns["sursis"], 0.5) / percentile(turns["agent_server"], 0.5))
                cpu_ratios.append(per["sursis"] / max(per["agent_server"], 0.001))
                for name in order:
                    all_turns[name].extend(turns[name])
                    all_cpu[name] += cpu[name]
                print(
                    f" round {r + 1}: "
                    + ", ".join(f"{n} {percentile(turns[n], 0.5):.1f} ms, cpu {per[n]:.1f} ms" for n in order)
                    + f"; turn ratio {turn_ratios[-1]:.2f}, cpu ratio {cpu_ratios[-1]:.2f}",
                    flush=True,
                )
            total = args.http_rounds * args.http_window
            for name in sides:
                summary[f"http_{name}_turn_p50_ms"] = round(percentile(all_turns[name], 0.5), 2)
                summary[f"http_{name}_server_cpu_ms_per_turn"] = round(all_cpu[name] * 1000 / total, 2)
            summary["http_turn_ratio"] = round(statistics.median(turn_ratios), 3)
            summary["http_turn_ratio_min"], summary["http_turn_ratio_max"] = (
                round(min(turn_ratios), 3),
                round(max(turn_ratios), 3),
            )
            summary["http_cpu_ratio"] = round(statistics.median(cpu_ratios), 3)
            summary["http_cpu_ratio_min"], summary["http_cpu_ratio_max"] = (
                round(min(cpu_ratios), 3),
                round(max(cpu_ratios), 3),
            )
            print(
                f" sursis / agent server: turn {rng(turn_ratios)}, server CPU per turn {rng(cpu_ratios)} "
                "(targets <= 0.5)"
            )

            print(f"\nturns/s over HTTP with {args.http_clients} clients, {args.http_turns} turns each")
            print(THROUGHPUT_HEADER, flush=True)
            rows: dict[str, ThroughputRow] = {}
            for name, (turn, new, pids) in sides.items():
                conversations_ = [await new() for _ in range(args.http_clients)]
                latencies: list[float] = []

                async def client(conversation: Any, turn: Any = turn, into: list[float] = latencies) -> None:
                    for _ in range(args.http_turns):
                        suspend, _, resume = await turn(conversation)
                        into.append(suspend + resume)

                meter = CpuMeter(pids, ours_url if name == "sursis" else None)
                await meter.start()
                started = time.perf_counter()
                await asyncio.gather(*(client(c) for c in conversations_))
                elapsed = time.perf_counter() - started
                service, own, postgres, load = await meter.stop()
                rows[name] = ThroughputRow.measured(
                    f"{name} http", args.http_clients, latencies, elapsed, (service, postgres, own), load
                )
                print(format_throughput(rows[name]), flush=True)
                summary[f"http_{name}_turns_per_s"] = rows[name].turns_per_s
                summary[f"http_{name}_throughput_cpu_ms_per_turn"] = rows[name].service_cpu_ms_per_turn
            ratio = rows["sursis"].turns_per_s / rows["agent_server"].turns_per_s
            summary["http_throughput_ratio"] = round(ratio, 3)
            print(f" sursis / agent server turns/s = {ratio:.2f} (target >= 2)", flush=True)
    finally:
        server.stop()
        processes.stop_all()
