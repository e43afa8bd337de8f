"""What the policy point costs: one decision, and an approval turn with a policy in place against
one without, side by side.

    .venv/bin/python bench/policy.py [--decisions 3000] [--turns 30] [--url sqlite+aiosqlite:///...]

1. Decisions: a workspace policy of four rules (Cedar conditions on arguments, the tool and the
   time), parsed once and cached, decided for a call whose rules all apply. Printed: p50 and p95 of
   the Cedar evaluation alone, of `cedarpy.is_authorized_batch` per request, and of the whole
   point (`StoredPolicyPoint.decide`, its workspace cache warm, as a worker runs it).
2. Turns: two services, each on its own fresh SQLite database, one with the policy stored and
   one without, run approval turns in alternation, each pair in turn order then reversed
   (message -> suspended -> approved -> completed). Printed: p50 of each, wall and CPU time of the
   process, and the ratios (of the medians, and the median of the pairs' ratios).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from common import percentile
from turn_ours import OursSide

from sursis.testing import store_policy, time_policy_decisions

POLICY = {
    "rules": [
        {
            "id": "no-bulk",
            "effect": "deny",
            "when": 'context.arguments.reason == "bulk"',
            "tools": ["replay_dlq_event"],
            "reason": "no bulk replays",
        },
        {
            "id": "prod-replays",
            "effect": "ask",
            "when": 'context.arguments.event_id like "evt_1*"',
            "tools": ["replay_dlq_event"],
            "route": {"quorum": 1},
        },
        {"id": "reads", "effect": "allow", "tools": ["list_dlq_events"]},
        {
            "id": "night-triage",
            "effect": "notify",
            "when": "context.time.hour < 6",
            "tools": ["triage_cluster"],
        },
    ]
}


def ms(values: list[float]) -> str:
    return f"p50 {percentile(values, 0.5) * 1000:.3f} ms, p95 {percentile(values, 0.95) * 1000:.3f} ms"


async def decisions(url: str, count: int) -> None:
    side = OursSide(url)
    await side.prepare(url)
    await side.open()
    assert side.service is not None
    try:
        await store_policy(side.service, POLICY)
        args = {"event_id": "evt_1001", "reason": "retry"}
        timed = await time_policy_decisions(
            side.service, agent="ops", tool="replay_dlq_event", args=args, count=count
        )
        assert timed.decision == ("ask", "prod-replays"), timed.decision
        rules = len(POLICY["rules"])
        print(f"decision, Cedar evaluation of {rules} rules: {ms(timed.evaluation)}")
        print(f"decision, cedarpy batch call, per request:  {ms(timed.batch_per_request)}")
        print(f"decision, whole point (warm cache):         {ms(timed.whole_point)}")
    finally:
        await side.close()


async def turns(base: Path, count: int) -> None:
    without = OursSide(f"sqlite+aiosqlite:///{base / 'without.db'}")
    with_policy = OursSide(f"sqlite+aiosqlite:///{base / 'with.db'}")
    sides = {"without a policy": without, "with a policy": with_policy}
    for side in sides.values():
        await side.prepare(side.url)
        await side.open()
    assert with_policy.service is not None
    await store_policy(with_policy.service, POLICY)
    try:
        conversations = {name: await side.new_conversation() for name, side in sides.items()}
        for name, side in sides.items():  # warm-up: caches, compiled policies, first statements
            for _ in range(3):
                await side.turn(conversations[name])
        totals: dict[str, list[float]] = {name: [] for name in sides}
        cpu: dict[str, list[float]] = {name: [] for name in sides}
        for i in range(count):
            # Each pair in turn order, then reversed: neither side always runs first.
            for name, side in list(sides.items())[:: 1 if i % 2 == 0 else -1]:
                used = time.process_time()
                suspended, _answered, completed = await side.turn(conversations[name])
                cpu[name].append((time.process_time() - used) * 1000)
                totals[name].append(suspended + completed)
        for name in sides:
            print(
                f"approval turn {name:<17} p50 {statistics.median(totals[name]):.2f} ms wall, "
                f"{statistics.median(cpu[name]):.2f} ms CPU, over {count} turns"
            )
        for label, figures in (("wall", totals), ("CPU", cpu)):
            with_median = statistics.median(figures["with a policy"])
            ratio = with_median / statistics.median(figures["without a policy"])
            paired = statistics.median(
                w / o for w, o in zip(figures["with a policy"], figures["without a policy"], strict=True)
            )
            print(f"approval turn ratio with/without, {label}: {ratio:.3f} (median of pairs {paired:.3f})")
    finally:
        for side in sides.values():
            await side.close()


async def main(argv: list[str]) -> None:
    options = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    options.add_argument("--decisions", type=int, default=3000)
    options.add_argument("--turns", type=int, default=30)
    parsed = options.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        await decisions(f"sqlite+aiosqlite:///{base / 'decisions.db'}", parsed.decisions)
        await turns(base, parsed.turns)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
