"""A burst of platform events on PostgreSQL with two worker processes: nothing lost, nothing doubled."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import events_burst  # noqa: E402

from tests.faults.processes import Cluster, check_invariants  # noqa: E402

EVENTS = 100


async def test_a_burst_yields_one_conversation_per_worthy_event_and_loses_no_run(cluster: Cluster) -> None:
    _, base = await cluster.api()
    cluster.worker(concurrency=4)
    cluster.worker(concurrency=4)
    headers = await events_burst.system_key(cluster.database_url)

    posted = await events_burst.post_burst(base, headers, EVENTS, connections=32)
    counts, _ = await events_burst.wait_settled(cluster.database_url, seconds=240)

    worthy = sum(1 for i in range(EVENTS) if events_burst.worthy(i))
    # New ids answer 202, re-sent ones 200 (a retried post that had been stored answers 200 too).
    assert set(posted["statuses"]) <= {200, 202}
    assert sum(posted["statuses"].values()) == EVENTS + EVENTS // 10
    if posted["retries"] == 0:
        assert posted["statuses"] == {202: EVENTS, 200: EVENTS // 10}
    assert counts["events"] == EVENTS
    assert counts["events_with_conversation"] == worthy
    assert counts["conversations"] == worthy
    assert counts["conversations_without_event"] == 0
    assert counts["runs"] == worthy
    assert counts["runs_completed"] == worthy
    await check_invariants(cluster.database_url)
