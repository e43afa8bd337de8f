"""World Agent memory recall on PostgreSQL: p50/p95 of `recall` with 100k memory rows.

Fills a scratch database (BENCH_PG_URL, default .../bench, emptied first) with one world, a few
enshrined rules (so the rule-content trigger runs on every insert) and N memory rows of varied
text, then times the service's own recall (`Service.recall_memory`: what the agent's `recall` tool
runs, the pg_trgm GIN query).
Target: p50 under 20 ms at 100k rows. Prints a table and a JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import string
import time
import uuid
from datetime import UTC, datetime

import sqlalchemy as sa
from common import engine_for, fresh_database, percentile

from sursis import Service

DEFAULT_PG_URL = "postgresql+asyncpg://postgres@127.0.0.1:5432/bench"
TARGET_P50_MS = 20.0
ENSHRINED_RULE = (
    "INSERT INTO world_rules (id, version, world_id, state, text, tests, citations, evidence, "
    "created_at, updated_at) VALUES (:id, 1, :w, 'enshrined', :t, '[]', '[]', '{}', :now, :now)"
)
BATCH = 5000
COMMON = ["the", "operator", "asked", "about", "rule", "predicate", "candidate", "override", "when", "with"]


def vocabulary(rng: random.Random, size: int = 5000) -> list[str]:
    """Made-up words of 4-10 letters: as many distinct trigrams as a real vocabulary has."""
    words = {"".join(rng.choices(string.ascii_lowercase, k=rng.randint(4, 10))) for _ in range(size * 2)}
    ordered = sorted(words)
    rng.shuffle(ordered)
    return ordered[:size]


def zipf_word(rng: random.Random, words: list[str]) -> str:
    """Word ranks follow a Zipf-Mandelbrot law (weight 1 / (rank + 10)), as in natural text."""
    return rng.choices(words, cum_weights=_cumulative(len(words)))[0]


_CUMULATIVE: dict[int, list[float]] = {}


def _cumulative(size: int) -> list[float]:
    if size not in _CUMULATIVE:
        total, weights = 0.0, []
        for rank in range(size):
            total += 1 / (rank + 10)
            weights.append(total)
        _CUMULATIVE[size] = weights
    return _CUMULATIVE[size]


def memory_text(rng: random.Random, words: list[str]) -> str:
    """A note of 6-14 words: some common ones, the rest from a Zipf-distributed vocabulary."""
    picked = [
        rng.choice(COMMON) if rng.random() < 0.3 else zipf_word(rng, words) for _ in range(rng.randint(6, 14))
    ]
    return " ".join(picked)


def recall_query(rng: random.Random, words: list[str]) -> str:
    """Two or three words, like what the agent recalls by: at least one of them not common."""
    return " ".join([zipf_word(rng, words), *(rng.choice(COMMON + words) for _ in range(rng.randint(1, 2)))])


async def fill(url: str, rows: int, rng: random.Random, words: list[str]) -> uuid.UUID:
    engine = engine_for(url)
    world_id, now = uuid.uuid4(), datetime.now(UTC)
    async with engine.begin() as conn:
        await conn.execute(
            sa.text(
                "INSERT INTO worlds (id, workspace, domain, title, created_by, created_at) "
                "VALUES (:id, 'default', 'bench', 'bench', 'bench', :now)"
            ),
            {"id": world_id, "now": now},
        )
        for n in range(3):
            await conn.execute(
                sa.text(ENSHRINED_RULE),
                {
                    "id": uuid.uuid4(),
                    "w": world_id,
                    "t": f"refund a damaged parcel within {n + 7} days",
                    "now": now,
                },
            )
    insert = sa.text(
        "INSERT INTO memories (id, workspace, world_id, agent, tier, kind, text, created_at) "
        "VALUES (:id, 'default', :w, 'world', 'persistent', 'observation', :text, :now)"
    )
    for start in range(0, rows, BATCH):
        batch = [
            {"id": uuid.uuid4(), "w": world_id, "text": memory_text(rng, words), "now": now}
            for _ in range(min(BATCH, rows - start))
        ]
        async with engine.begin() as conn:
            await conn.execute(insert, batch)
    async with engine.begin() as conn:
        await conn.execute(sa.text("ANALYZE memories"))
    await engine.dispose()
    return world_id


async def measure(
    url: str, world_id: uuid.UUID, queries: int, rng: random.Random, words: list[str]
) -> list[float]:
    timings: list[float] = []
    hits = 0
    async with Service.open(url, actor="bench") as svc:
        for i in range(queries + 20):
            query = recall_query(rng, words)
            t0 = time.perf_counter()
            found = await svc.recall_memory("world", query, workspace="default", world_id=world_id, limit=10)
            elapsed = (time.perf_counter() - t0) * 1000
            if i >= 20:  # the first calls warm the pool and the caches
                timings.append(elapsed)
                hits += bool(found)
    print(f"  queries with at least one hit: {hits}/{queries}", flush=True)
    return timings


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    url = os.environ.get("BENCH_PG_URL", DEFAULT_PG_URL)
    rng = random.Random(17)
    words = vocabulary(rng)
    await fresh_database(url)
    t0 = time.perf_counter()
    world_id = await fill(url, args.rows, rng, words)
    filled = time.perf_counter() - t0
    timings = await measure(url, world_id, args.queries, rng, words)
    p50, p95 = percentile(timings, 0.5), percentile(timings, 0.95)
    print(f"World memory recall, PostgreSQL, {args.rows} rows (filled in {filled:.1f} s)")
    print(f"  recall p50 {p50:.2f} ms   p95 {p95:.2f} ms   target p50 < {TARGET_P50_MS:.0f} ms")
    result = {
        "bench": "world_memory_recall",
        "rows": args.rows,
        "queries": args.queries,
        "p50_ms": round(p50, 3),
        "p95_ms": round(p95, 3),
        "target_p50_ms": TARGET_P50_MS,
        "ok": p50 < TARGET_P50_MS,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    asyncio.run(main())
