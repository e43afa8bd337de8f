"""The World Agent's whole operator flow over HTTP against real processes, with the worker SIGKILLed
between the enshrinement request and the operator's approval (and once more right after the
enshrinement committed): the rule is enshrined exactly once."""

from __future__ import annotations

import signal
import time

import httpx
import sqlalchemy as sa

from sursis.infra.db.engine import create_engine
from tests.faults.processes import Cluster, wait_exit
from tests.worlds.flow import (
    candidate_until_request,
    check_refusal_then_acceptance,
    create_world,
    record_history,
    rule_versions,
    tool_calls,
)

KILLED = -signal.SIGKILL


async def enshrinement_counts(database_url: str, rule_id: str) -> tuple[int, int]:
    """(enshrined versions of the rule, recorded request_enshrinement effects)."""
    engine = create_engine(database_url)
    try:
        async with engine.connect() as conn:
            enshrined = await conn.scalar(
                sa.text("SELECT count(*) FROM world_rules WHERE id = :id AND state = 'enshrined'"),
                {"id": rule_id},
            )
            effects = await conn.scalar(
                sa.text("SELECT count(*) FROM tool_calls WHERE tool_name = 'request_enshrinement' AND ok")
            )
    finally:
        await engine.dispose()
    return int(enshrined or 0), int(effects or 0)


async def test_enshrined_exactly_once_across_worker_kills(cluster: Cluster) -> None:
    _, base = await cluster.api()
    first = cluster.worker()
    async with httpx.AsyncClient(base_url=base, timeout=60, headers=cluster.headers) as http:
        world_id = await create_world(http)
        await record_history(http, world_id)
        rule_id, run = await candidate_until_request(http, world_id)
        check_refusal_then_acceptance(await tool_calls(http, run["id"]))
        [pending] = run["pending"]
        assert pending["tool_name"] == "request_enshrinement"

        first.send_signal(signal.SIGKILL)
        assert await wait_exit(first) == KILLED
        [requested] = await rule_versions(http, world_id, rule_id)
        assert requested["state"] == "enshrined_pending"
        assert requested["gate"]["passed"] is True and requested["citations"]

        decided = await http.post(
            f"/v1/pending/{pending['correlation_id']}/resolve", json={"decision": "approve"}
        )
        assert decided.status_code == 200, decided.text
        again = await http.post(
            f"/v1/pending/{pending['correlation_id']}/resolve", json={"decision": "approve"}
        )
        assert again.status_code == 409 and again.json()["code"] == "stale"

        # The next worker dies right after the enshrinement and its idempotency record committed.
        doomed = cluster.worker(crash_at="tool_effect_committed:request_enshrinement")
        assert await wait_exit(doomed, seconds=60) == KILLED
        cluster.worker()
        deadline = time.monotonic() + 60
        while True:
            done = (await http.get(f"/v1/runs/{run['id']}", params={"wait": 2})).json()
            if done["status"] == "completed" or time.monotonic() > deadline:
                break
        assert done["status"] == "completed", done
        [enshrined] = await rule_versions(http, world_id, rule_id)
        assert enshrined["state"] == "enshrined"
        executed = [t["tool_name"] for t in await tool_calls(http, run["id"])]
        assert executed.count("request_enshrinement") == 1, executed
    assert await enshrinement_counts(cluster.database_url, rule_id) == (1, 1)
