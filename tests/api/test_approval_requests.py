"""Approval requests filed by agents Sursis does not host, over HTTP on SQLite and PostgreSQL: filed
through the policy point, shown and decided as pending calls, waited for, consumed once against
their digest, their outcome reported; the audit trail requested → decided → consumed → outcome."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import timedelta
from typing import Any

import sqlalchemy as sa
from litestar.testing import AsyncTestClient

from sursis.app.container import Container
from sursis.domain.access import Role
from sursis.domain.approvals.approval_request_records import Filing
from sursis.domain.clock import utcnow
from sursis.domain.records import Principal
from sursis.domain.retention.retention import RetentionPolicy, RetentionService
from sursis.domain.sanitize import args_hash
from sursis.infra.db.approval_request_tables import approval_requests
from sursis.infra.db.engine import create_engine
from sursis.infra.db.tables import pending_calls
from tests.conftest import KeyMaker, bearer
from tests.near_valid import every_variant

ADMIN = Principal(id="admin:retention", role=Role.ADMIN, workspace=None)
ARGS = {"account": "acme", "amount": 120}
FILING = {
    "tool_name": "wire_money",
    "args": ARGS,
    "agent": "billing-bot",
    "conversation": "thread-7",
    "idempotency_key": "thread-7:call-1",
    "expires_in_seconds": 600,
    "digest": args_hash("wire_money", ARGS),
}


def problem(response: Any, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json"), response.headers
    body: dict[str, Any] = response.json()
    assert body["code"] == code, body
    return body


async def count(url: str, table: sa.Table) -> int:
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            return int((await conn.execute(sa.select(sa.func.count()).select_from(table))).scalar_one())
    finally:
        await engine.dispose()


async def test_filed_decided_consumed_once_and_reported(client: AsyncTestClient[Any], keys: KeyMaker) -> None:
    agent = bearer(await keys.make(Role.USER, name="billing-bot"))
    filed = await client.post("/v1/approvals", json=FILING, headers=agent)
    assert filed.status_code == 201, filed.text
    request = filed.json()
    cid = request["correlation_id"]
    assert (request["state"], request["digest"]) == ("awaiting", FILING["digest"])
    assert request["pending"]["tool_name"] == "wire_money" and request["pending"]["status"] == "awaiting"

    again = await client.post("/v1/approvals", json=FILING, headers=agent)
    assert (again.status_code, again.json()["correlation_id"]) == (200, cid)
    other_args = {**FILING, "args": {"account": "acme", "amount": 999}, "digest": None}
    problem(await client.post("/v1/approvals", json=other_args, headers=agent), 409, "idempotency_key_reused")

    inbox = (await client.get("/v1/pending")).json()["items"]
    assert [p["correlation_id"] for p in inbox] == [cid]
    waited = await client.get(f"/v1/approvals/{cid}?wait=0.3", headers=agent)
    assert waited.json()["state"] == "awaiting"
    problem(
        await client.post(f"/v1/approvals/{cid}/consume", json={"digest": FILING["digest"]}, headers=agent),
        409,
        "not_approved",
    )
    # The agent's own key is not an operator: it cannot decide its own request.
    problem(
        await client.post(f"/v1/pending/{cid}/resolve", json={"decision": "approve"}, headers=agent),
        403,
        "forbidden",
    )
    decided = await client.post(f"/v1/pending/{cid}/resolve", json={"decision": "approve", "reason": "ok"})
    assert decided.status_code == 200, decided.text

    seen = (await client.get(f"/v1/approvals/{cid}?wait=5", headers=agent)).json()
    assert (seen["state"], seen["approved_args"]) == ("approved", ARGS)
    assert len(seen["answered_by"]) == 1
    consume = f"/v1/approvals/{cid}/consume"
    wrong = args_hash("wire_money", {"account": "acme", "amount": 121})
    problem(await client.post(consume, json={"digest": wrong}, headers=agent), 409, "digest_mismatch")
    consumed = await client.post(consume, json={"digest": FILING["digest"]}, headers=agent)
    assert (consumed.status_code, consumed.json()["state"]) == (200, "consumed"), consumed.text
    problem(
        await client.post(consume, json={"digest": FILING["digest"]}, headers=agent), 409, "already_consumed"
    )

    outcome = f"/v1/approvals/{cid}/outcome"
    reported = await client.post(outcome, json={"outcome": "ran", "detail": "wired"}, headers=agent)
    assert (reported.status_code, reported.json()["state"]) == (200, "ran"), reported.text
    problem(await client.post(outcome, json={"outcome": "failed"}, headers=agent), 409, "already_reported")

    audit = (await client.get(f"/v1/audit?correlation_id={cid}")).json()
    items = audit["items"] if isinstance(audit, dict) else audit
    actions = [row["action"] for row in sorted(items, key=lambda row: row["id"])]
    assert actions == ["approval.requested", "pending.approved", "approval.consumed", "approval.outcome"]


async def test_a_deny_and_a_policy_that_settles_at_once(client: AsyncTestClient[Any], keys: KeyMaker) -> None:
    agent = bearer(await keys.make(Role.USER))
    filing = {**FILING, "idempotency_key": None, "digest": None}
    cid = (await client.post("/v1/approvals", json=filing, headers=agent)).json()["correlation_id"]
    denied = await client.post(f"/v1/pending/{cid}/resolve", json={"decision": "deny", "reason": "no"})
    assert denied.status_code == 200, denied.text
    seen = (await client.get(f"/v1/approvals/{cid}", headers=agent)).json()
    assert (seen["state"], seen["pending"]["reason"], seen["approved_args"]) == ("denied", "no", None)
    problem(
        await client.post(
            f"/v1/approvals/{cid}/consume", json={"digest": args_hash("wire_money", ARGS)}, headers=agent
        ),
        409,
        "not_approved",
    )

    policy = {
        "rules": [
            {"id": "no-wires", "effect": "deny", "when": 'context.tool == "wire_money"', "reason": "never"},
            {"id": "reads", "effect": "allow", "when": 'context.tool == "read_ledger"'},
        ]
    }
    assert (await client.put("/v1/policies", json=policy)).status_code == 200
    refused = (await client.post("/v1/approvals", json=filing, headers=agent)).json()
    assert (refused["state"], refused["pending"]["resolved_by"]) == ("denied", "policy:no-wires")
    allowed = (
        await client.post("/v1/approvals", json={**filing, "tool_name": "read_ledger"}, headers=agent)
    ).json()
    assert (allowed["state"], allowed["answered_by"]) == ("approved", ["policy:reads"])
    assert (await client.get("/v1/pending")).json()["items"] == []


async def test_bad_bodies_are_refused_with_a_code_and_nothing_stored(
    client: AsyncTestClient[Any], keys: KeyMaker, seeded: str
) -> None:
    agent = bearer(await keys.make(Role.USER))
    json_headers = {**agent, "content-type": "application/json"}
    bad_digest = {**FILING, "digest": "0" * 64}
    problem(await client.post("/v1/approvals", json=bad_digest, headers=agent), 422, "invalid_digest")
    before = await count(seeded, approval_requests), await count(seeded, pending_calls)
    created = 0
    for variant in every_variant(FILING):
        response = await client.post("/v1/approvals", content=variant.body, headers=json_headers)
        if response.status_code == 201:
            created += 1  # still valid (an optional field dropped or changed): filed
            continue
        if response.status_code == 200:
            continue  # the same idempotency key: the request filed before
        assert 400 <= response.status_code < 500, (variant, response.text)
        assert response.json().get("code"), (variant, response.text)
    after = await count(seeded, approval_requests), await count(seeded, pending_calls)
    assert after == (before[0] + created, before[1] + created)


async def test_the_role_is_asked_before_the_body(client: AsyncTestClient[Any], keys: KeyMaker) -> None:
    platform = bearer(await keys.make(Role.SYSTEM))
    json_headers = {**platform, "content-type": "application/json"}
    problem(await client.post("/v1/approvals", content=b"{not json", headers=json_headers), 403, "forbidden")
    some = "00000000-0000-4000-8000-000000000000"
    for path in (f"/v1/approvals/{some}/consume", f"/v1/approvals/{some}/outcome"):
        problem(await client.post(path, content=b"[]", headers=json_headers), 403, "forbidden")
    problem(await client.get(f"/v1/approvals/{some}", headers=platform), 403, "forbidden")


async def test_retention_purges_a_request_with_its_conversation(
    client: AsyncTestClient[Any], keys: KeyMaker, container: Container, seeded: str
) -> None:
    agent = bearer(await keys.make(Role.USER))
    filed = await client.post("/v1/approvals", json=FILING, headers=agent)
    assert filed.status_code == 201
    assert await count(seeded, approval_requests) == 1
    retention = RetentionService(container.uow, lambda: utcnow() + timedelta(days=3))
    await retention.set_policy(ADMIN, RetentionPolicy("default", conversation_days=2))
    [report] = await retention.run(ADMIN, "default")
    assert report.rows["approval_requests"] == 1
    assert (await count(seeded, approval_requests), await count(seeded, pending_calls)) == (0, 0)


async def test_concurrent_filings_under_one_key_make_one_request(container: Container, seeded: str) -> None:
    """Filed at once (each past the look-up of the key before any is stored): one claims the key,
    the others find its request."""
    agent = Principal(id="agent:racer", role=Role.USER, workspace="default")
    filing = Filing(
        tool_name="wire_money",
        args=ARGS,
        agent="billing-bot",
        expires_in=timedelta(minutes=5),
        idempotency_key="raced",
    )
    found = await asyncio.gather(*(container.approvals.file(agent, filing) for _ in range(5)))
    assert sorted(f.created for f in found) == [False, False, False, False, True]
    assert len({f.request.correlation_id for f in found}) == 1
    assert (await count(seeded, approval_requests), await count(seeded, pending_calls)) == (1, 1)


class BrokenPolicy:
    async def decide_external(self, workspace: str, filing: Filing, requester: Principal) -> Any:
        raise RuntimeError("the policy store is unreachable")


async def test_a_policy_that_cannot_decide_asks(container: Container) -> None:
    """Fail closed: a filing the policy point cannot decide waits for a person."""
    service = dataclasses.replace(container.approvals, policy=BrokenPolicy())
    agent = Principal(id="agent:closed", role=Role.USER, workspace="default")
    filing = Filing(tool_name="read_ledger", args={}, agent="billing-bot", expires_in=timedelta(minutes=5))
    found = await service.file(agent, filing)
    assert found.call.status.value == "awaiting"
    assert found.call.policy is not None and "policy_unavailable" in found.call.policy.flags


async def test_a_sampled_rung_asks_every_filed_request(container: Container) -> None:
    """An agent outside could file again until a draw let it through: under a `sampled` rung each
    of its requests waits for a person."""
    from sursis.domain.policy.policies import LadderLevel

    await container.policies.move(
        ADMIN, "default", "replay_dlq_event", level=LadderLevel.SAMPLED, one_in=2, ceiling=LadderLevel.AUTO
    )
    agent = Principal(id="agent:sampled", role=Role.USER, workspace="default")
    for i in range(6):
        filing = Filing(
            tool_name="replay_dlq_event",
            args={"event_id": f"evt_{i}"},
            agent="billing-bot",
            expires_in=timedelta(minutes=5),
            idempotency_key=f"try-{i}",
        )
        found = await container.approvals.file(agent, filing)
        assert found.call.status.value == "awaiting"
        assert found.call.policy is not None and found.call.policy.flags == ("sampled",)
