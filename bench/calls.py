"""Python function calls per approval turn: a cost figure that does not move with the machine's load.

    .venv/bin/python bench/calls.py [--sides ours streamed bare langgraph]

For each side, cProfile counts every function call (Python and C) made by this process during
`--long` turns and during `--short` turns; calls per turn = (long - short) / (long - short turns), so
start-up and first-use work cancel out. The same count comes out on every machine: only the code
that runs decides it. Split by the package each called function belongs to (a C function by the
module it is a method of); the totals are the calls of Python functions (the figure compared and
pinned) and all calls.

- `ours`: Sursis's whole durable turn through `sursis.Service` on PostgreSQL (message -> suspended,
  resolve, resolve -> completed), each segment run by `run_once` as a worker runs it; no background
  loops, so no poll lands in one turn and not another. The message is posted with `stream` off:
  the bench reads only the outcome, as every peer's client does. The agent is the peers' own
  (`bench_agent.py`: one gated tool that returns a dict).
- `ops`: the same turn on the built-in `ops` agent, whose `replay_dlq_event` reads the dead letter
  and writes the outbox in the run's transaction (the turn every bench ran before `bench_ops`).
- `streamed`: the same turn with the message posted with `stream` on (the model's text published as
  it arrives): what a client watching the event stream costs.
- `bare`: the same turn through a bare pydantic-ai agent (two `agent.run`s with `DeferredToolResults`,
  history in a list, pydantic-ai's instrumentation on, nothing stored): the agent loop's own count.
- `langgraph`: LangGraph with AsyncPostgresSaver, the whole durable turn (needs the `peers` extra).

The last line is one JSON object with every figure; `tests/kit/test_call_count.py` pins `ours` and
`streamed`.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any, Protocol

DEFAULT_PG_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/bench_calls"

PACKAGES = (
    "pydantic_ai",
    "pydantic_core",
    "pydantic",
    "sqlalchemy",
    "asyncpg",
    "psycopg",
    "langgraph",
    "langchain_core",
    "structlog",
    "opentelemetry",
    "anyio",
    "sursis",
    "genai_prices",
    "httpx",
    "asyncio",
    "contextlib",
    "copy",
    "json",
    "logging",
    "uuid",
    "typing",
    "dataclasses",
    "enum",
    "re",
)


TOTALS = ("python", "all calls")
"""Calls of Python functions (the figure pinned and compared), and of every function, C included."""


class Side(Protocol):
    async def open(self) -> None: ...
    async def close(self) -> None: ...
    async def new_conversation(self) -> Any: ...
    async def turn(self, conversation: Any) -> tuple[float, float, float]: ...


def package_of(filename: str, function: str) -> str:
    """The package a profiled function belongs to; C functions by the module cProfile names."""
    if filename == "~":  # a built-in: "<built-in method ...>" / "<method 'x' of 'y' objects>"
        # By the module that qualifies it ("re.Pattern", "_asyncio.Task"), never by the method's own
        # name: "<method 'remove' of 'set' objects>" is no call of `re`, nor a dict's 'copy' of `copy`.
        for name in PACKAGES:
            if f"{name}." in function:
                return name
        return "builtins (C)"
    parts = Path(filename).parts
    for name in PACKAGES:
        if name in parts or f"{name}.py" in parts:
            return name
    if "site-packages" in parts:
        return parts[parts.index("site-packages") + 1]
    return "stdlib (other)"


def calls_by_package(profile: cProfile.Profile) -> Counter[str]:
    counts: Counter[str] = Counter()
    raw = pstats.Stats(profile).stats  # type: ignore[attr-defined]
    for (filename, _line, function), (_cc, calls, _tt, _ct, _callers) in raw.items():
        counts[package_of(filename, function)] += calls
        counts["all calls" if filename == "~" else "python"] += calls
    counts["all calls"] += counts["python"]
    return counts


async def profiled_turns(side: Side, turns: int) -> Counter[str]:
    """Calls made during `turns` turns (a new conversation every 10, as the other benches do)."""
    profile = cProfile.Profile()
    conversation = await side.new_conversation()
    profile.enable()
    for i in range(turns):
        if i and i % 10 == 0:
            conversation = await side.new_conversation()
        await side.turn(conversation)
    profile.disable()
    return calls_by_package(profile)


async def per_turn(side: Side, short: int, long: int) -> dict[str, float]:
    """Calls per turn by package: (long run - short run) / (long - short), after two warm turns."""
    await side.open()
    try:
        warm = await side.new_conversation()
        for _ in range(2):
            await side.turn(warm)
        few = await profiled_turns(side, short)
        many = await profiled_turns(side, long)
    finally:
        await side.close()
    span = long - short
    packages = set(few) | set(many)
    return {name: (many[name] - few[name]) / span for name in packages}


async def make_side(name: str, url: str) -> Side:
    if name == "ours":
        from turn_ours import OursSide

        await OursSide.prepare(url)
        return OursSide(url, verify=False, hand_off=False)
    if name == "streamed":
        from turn_ours import OursSide

        await OursSide.prepare(url)
        return OursSide(url, verify=False, hand_off=False, stream=True)
    if name == "ops":
        from turn_ours import OursSide

        await OursSide.prepare(url)
        return OursSide(url, verify=False, hand_off=False, agent="ops")
    if name == "bare":
        from turn_agent import AgentOnlySide

        return AgentOnlySide()
    if name == "langgraph":
        from common import ensure_pg_database
        from turn_langgraph import LangGraphSide

        await ensure_pg_database(url)
        plain = url.replace("postgresql+asyncpg://", "postgresql://")
        return LangGraphSide(plain, durability="sync")
    raise ValueError(f"unknown side {name!r}")


async def measure(sides: list[str], url: str, short: int, long: int) -> dict[str, dict[str, float]]:
    results: dict[str, dict[str, float]] = {}
    for name in sides:
        side = await make_side(name, url)
        results[name] = await per_turn(side, short, long)
    return results


def table(results: dict[str, dict[str, float]]) -> str:
    sides = list(results)
    names = sorted(
        {p for figures in results.values() for p in figures if p not in TOTALS},
        key=lambda p: -max(results[s].get(p, 0.0) for s in sides),
    )
    head = "| package | " + " | ".join(sides) + " |"
    rule = "| --- |" + " ---: |" * len(sides)
    rows = [head, rule]
    for total in TOTALS:
        rows.append(f"| **{total}** | " + " | ".join(f"**{results[s][total]:,.0f}**" for s in sides) + " |")
    for package in names:
        cells = [results[s].get(package, 0.0) for s in sides]
        if max(cells) < 20:
            continue
        rows.append(f"| {package} | " + " | ".join(f"{round(c) or 0:,}" for c in cells) + " |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sides", nargs="+", default=["ours", "streamed", "bare", "langgraph"])
    parser.add_argument("--short", type=int, default=10)
    parser.add_argument("--long", type=int, default=50)
    args = parser.parse_args()
    from turn_ours import log_to_file

    log_to_file(Path(tempfile.mkdtemp(prefix="sursis-calls-")) / "service.log")
    url = os.environ.get("BENCH_PG_URL", DEFAULT_PG_URL)
    results = asyncio.run(measure(args.sides, url, args.short, args.long))
    print(f"function calls per approval turn ({args.long} turns minus {args.short}, cProfile)")
    print(table(results))
    if "ours" in results and "bare" in results:
        layer = results["ours"]["python"] - results["bare"]["python"]
        print(f"\nSursis's layer over the bare loop: {layer:,.0f} Python calls per turn")
    if "ours" in results and "langgraph" in results:
        print(f"ours / langgraph: {results['ours']['python'] / results['langgraph']['python']:.2f}x")
    print(json.dumps({side: round(figures["python"], 1) for side, figures in results.items()}))


if __name__ == "__main__":
    main()
