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
import uuid
from pathlib import Path

import cedarpy
from common import percentile
from turn_ours import OursSide

from sursis.domain.authorization_cache import AuthorizationCache
from sursis.domain.clock import utcnow
from sursis.domain.policies import PolicyRule
from sursis.domain.policy_cache import PolicyCache
from sursis.domain.policy_decisions import ApprovalRoute, PolicyEffect
from sursis.domain.records import Principal
from sursis.infra.agents.run_deps import RunDeps
from sursis.infra.policy.cedar import CedarPolicies, ToolShape
from sursis.infra.policy.point import StoredPolicyPoint

RULES = [
    PolicyRule(
        "no-bulk",
        PolicyEffect.DENY,
        'context.arguments.reason == "bulk"',
        ("replay_dlq_event",),
        "no bulk replays",
    ),
    PolicyRule(
        "prod-replays",
        PolicyEffect.ASK,
        'context.arguments.event_id like "evt_1*"',
        ("replay_dlq_event",),
        route=ApprovalRoute(quorum=1),
    ),
    PolicyRule("reads", PolicyEffect.ALLOW, "", ("list_dlq_events",)),
    PolicyRule("night-triage", PolicyEffect.NOTIFY, "context.time.hour < 6", ("triage_cluster",)),
]
ADMIN = Principal(id="bench", role="admin", workspace=None)


def ms(values: list[float]) -> str:
    return f"p50 {percentile(values, 0.5) * 1000:.3f} ms, p95 {percentile(values, 0.95) * 1000:.3f} ms"


async def decisions(url: str, count: int) -> None:
    side = OursSide(url)
    await side.prepare(url)
    await side.open()
    assert side.service is not None
    try:
        container = side.service.container
        await container.policies.put(ADMIN, "default", RULES, "bench")
        cedar = CedarPolicies(
            ToolShape(d.spec.name, d.tool.function_schema.json_schema)
            for d in container.catalog.declared_tools()
        )
        point = StoredPolicyPoint(
            container.uow,
            cedar,
            rules=AuthorizationCache(3600, live=True),
            cache=PolicyCache(3600, live=True),
        )
        spec = container.catalog.spec("ops", "replay_dlq_event")
        assert spec is not None
        deps = RunDeps(
            conversation_id=uuid.uuid4(),
            run_id=uuid.uuid4(),
            workspace="default",
            agent_name="ops",
            uow=container.uow,
            clock=utcnow,
            policy=point,
        )
        args = {"event_id": "evt_1001", "reason": "retry"}
        decision = await point.decide(deps, spec, args)
        assert (decision.effect, decision.rule) == (PolicyEffect.ASK, "prod-replays"), decision
        state = await point.workspace_policy("default")
        facts = await point.facts(deps, spec, args, state)
        evaluate, whole = [], []
        for _ in range(count):
            t0 = time.perf_counter()
            cedar.evaluate(state, facts)
            t1 = time.perf_counter()
            await point.decide(deps, spec, args)
            t2 = time.perf_counter()
            evaluate.append(t1 - t0)
            whole.append(t2 - t1)
        compiled = cedar.compiled("default", state.conditions())
        requests = [cedar.request(facts)] * 100
        batch = []
        for _ in range(max(1, count // 100)):
            t0 = time.perf_counter()
            cedarpy.is_authorized_batch(requests, compiled.policies, [])
            batch.append((time.perf_counter() - t0) / len(requests))
        print(f"decision, Cedar evaluation of {len(RULES)} rules: {ms(evaluate)}")
        print(f"decision, cedarpy batch call, per request:  {ms(batch)}")
        print(f"decision, whole point (warm cache):         {ms(whole)}")
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
    await with_policy.service.container.policies.put(ADMIN, "default", RULES, "bench")
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
