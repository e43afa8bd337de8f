"""Where an approval turn's time goes: cProfile over many turns through the service, on PostgreSQL.

    .venv/bin/python bench/profile_turn.py [--turns 300] [--top 20]

Prints the functions with the most own time, then own time summed by package (the library a
function belongs to), both as a share of the profiled time.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import tempfile
import time
from collections import defaultdict
from pathlib import Path

from turn_ours import OursSide, log_to_file

DEFAULT_PG_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/bench"

PACKAGES = (
    "pydantic_ai",
    "pydantic_core",
    "pydantic",
    "sqlalchemy",
    "asyncpg",
    "structlog",
    "opentelemetry",
    "logging",
    "json",
    "asyncio",
    "sursis",
    "genai_prices",
    "uuid",
    "typing",
)


def package_of(filename: str) -> str:
    if filename.startswith("~") or filename.startswith("<"):
        return "builtins (C)"
    parts = Path(filename).parts
    for name in PACKAGES:
        if name in parts:
            return name
    if "site-packages" in parts:
        return parts[parts.index("site-packages") + 1]
    return "stdlib (other)"


async def run(url: str, turns: int) -> tuple[cProfile.Profile, float]:
    side = OursSide(url)
    await side.open()
    try:
        conversation = await side.new_conversation()
        for _ in range(5):
            await side.turn(conversation)
        profile = cProfile.Profile()
        started = time.perf_counter()
        profile.enable()
        for i in range(turns):
            if i % 10 == 0:
                conversation = await side.new_conversation()
            await side.turn(conversation)
        profile.disable()
        elapsed = time.perf_counter() - started
    finally:
        await side.close()
    return profile, elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args()
    url = os.environ.get("BENCH_PG_URL", DEFAULT_PG_URL)
    log_to_file(Path(tempfile.mkdtemp(prefix="sursis-profile-")) / "service.log")
    asyncio.run(OursSide.prepare(url))
    profile, elapsed = asyncio.run(run(url, args.turns))
    stats = pstats.Stats(profile)
    raw = stats.stats  # type: ignore[attr-defined]
    total = sum(tt for (_, _, tt, _, _) in raw.values())
    per_turn = elapsed / args.turns * 1000
    print(f"{args.turns} turns in {elapsed:.1f} s ({per_turn:.1f} ms/turn under the profiler)")
    print(f"\ntop {args.top} by own time (share of profiled time; calls per turn; cumulative ms per turn)")
    print(f"| {'function':<70} | own % | calls/turn | cum ms/turn |")
    print(f"| {'-' * 70} | ----- | ---------- | ----------- |")
    ranked = sorted(raw.items(), key=lambda kv: kv[1][2], reverse=True)[: args.top]
    for (filename, line, name), (_, calls, tt, ct, _) in ranked:
        where = f"{package_of(filename)}: {Path(filename).name}:{line} {name}"
        print(
            f"| {where[:70]:<70} | {100 * tt / total:5.1f} | {calls / args.turns:10.1f} "
            f"| {1000 * ct / args.turns:11.2f} |"
        )
    by_package: dict[str, float] = defaultdict(float)
    for (filename, _, _), (_, _, tt, _, _) in raw.items():
        by_package[package_of(filename)] += tt
    print("\nown time by package")
    print("| package | share | ms/turn |\n| --- | --- | --- |")
    for package, tt in sorted(by_package.items(), key=lambda kv: kv[1], reverse=True)[:15]:
        print(f"| {package} | {100 * tt / total:.1f}% | {1000 * tt / args.turns:.2f} |")


if __name__ == "__main__":
    main()
