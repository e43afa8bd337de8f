"""Approver groups, votes, delegations and reassignment over HTTP, on SQLite and PostgreSQL: the
routed call's votes, quorum and still needed in the pending call; 403 `self_approval` and
`not_an_approver`; permission decided before a body is read; near-valid bodies refused with a code
and nothing stored."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from litestar.testing import AsyncTestClient

from sursis.app.main import create_app
from sursis.app.service import Service
from sursis.domain.access import Role
from sursis.domain.clock import utcnow
from sursis.domain.policy_decisions import ApprovalRoute
from sursis.infra.db import approver_tables as ap
from sursis.infra.db.engine import create_engine
from tests.conftest import KeyMaker, bearer, call, make_settings, script
from tests.near_valid import every_variant
from tests.routing.kit import payments_agent

PROBLEM = "application/problem+json"
ROUTES = {"H1": ApprovalRoute(groups=("finance",), quorum=2)}


@pytest.fixture
async def http(seeded: str) -> AsyncIterator[AsyncTestClient[Any]]:
    settings = make_settings(seeded, agents=["assistant"], run_worker=True)
    service = Service.from_settings(settings, agents=[payments_agent(ROUTES)])
    async with AsyncTestClient(app=create_app(settings, service=service)) as client:
        yield client


async def count_rows(url: str) -> dict[str, int]:
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            return {
                table.name: int(
                    (await conn.execute(sa.select(sa.func.count()).select_from(table))).scalar_one()
                )
                for table in (ap.approver_groups, ap.approver_group_members, ap.approval_delegations)
            }
    finally:
        await engine.dispose()


async def test_a_routed_call_over_http(http: AsyncTestClient[Any], keys: KeyMaker) -> None:
    admin = bearer(await keys.make(Role.ADMIN))
    people = {name: await keys.issue(Role.OPERATOR, name=name) for name in ("ann", "bob", "rex", "out")}
    auth = {name: bearer(issued.secret) for name, issued in people.items()}
    members = [str(people[n].key.id) for n in ("ann", "bob")]
    created = await http.post(
        "/v1/groups", json={"workspace": "default", "name": "finance", "members": members}, headers=admin
    )
    assert created.status_code == 201, created.text
    assert sorted(created.json()["members"]) == sorted(members)
    again = await http.post("/v1/groups", json={"workspace": "default", "name": "finance"}, headers=admin)
    assert (again.status_code, again.json()["code"]) == (409, "group_exists")

    conversation = (
        await http.post("/v1/conversations", json={"agent": "payments"}, headers=auth["rex"])
    ).json()
    run = await http.post(
        f"/v1/conversations/{conversation['id']}/messages?wait=10",
        json={"content": script(call("refund", order_id="H1", amount=900))},
        headers=auth["rex"],
    )
    [pending] = run.json()["pending"]
    cid = pending["correlation_id"]
    assert (pending["quorum"], pending["still_needed"], pending["votes"]) == (
        2,
        2,
        [],
    )  # the run shows it too
    resolve = f"/v1/pending/{cid}/resolve"

    refused = await http.post(resolve, json={"decision": "approve"}, headers=auth["rex"])
    assert (refused.status_code, refused.json()["code"]) == (403, "self_approval")
    refused = await http.post(resolve, json={"decision": "approve"}, headers=auth["out"])
    assert (refused.status_code, refused.json()["code"]) == (403, "not_an_approver")

    first = await http.post(resolve, json={"decision": "approve", "reason": "fine"}, headers=auth["ann"])
    assert first.status_code == 200, first.text
    body = first.json()["pending"] if "pending" in first.json() else first.json()
    assert (body["status"], body["quorum"], body["still_needed"]) == ("awaiting", 2, 1)
    assert [(v["approver_name"], v["decision"], v["reason"]) for v in body["votes"]] == [
        ("ann", "approve", "fine")
    ]
    twice = await http.post(resolve, json={"decision": "approve"}, headers=auth["ann"])
    assert (twice.status_code, twice.json()["code"]) == (409, "already_voted")

    shown = (await http.get(f"/v1/pending/{cid}", headers=auth["bob"])).json()
    assert (shown["can_decide"], shown["approvers"], shown["escalation_level"]) == (
        True,
        ["group:finance"],
        0,
    )
    listed = (await http.get("/v1/pending", headers=auth["out"])).json()["items"]
    assert [(p["correlation_id"], p["can_decide"]) for p in listed] == [(cid, False)]

    # Near-valid reassignments: refused with a code, nothing changed.
    reassign = f"/v1/pending/{cid}/reassign"
    for body in (
        {"to": []},
        {"to": "group:finance"},
        {"to": ["group:"]},
        {"to": ["user:someone"]},
        {"to": ["key:not-a-key"]},
        {"to": ["group:finance"], "extra": 1},
        {"to": ["group:nope"]},
        {"to": [f"key:{people['rex'].key.id}", "group:finance"] * 11},
    ):
        answer = await http.post(reassign, json=body, headers=admin)
        assert answer.status_code == 422 and answer.json()["code"], (body, answer.text)
    assert (await http.get(f"/v1/pending/{cid}", headers=admin)).json()["approvers"] == ["group:finance"]

    second = await http.post(resolve, json={"decision": "approve"}, headers=auth["bob"])
    decided = second.json()["pending"] if "pending" in second.json() else second.json()
    assert (decided["status"], decided["still_needed"]) == ("approved", 0)


async def test_groups_delegations_and_reassignment_are_admin_or_approver_business(
    http: AsyncTestClient[Any], keys: KeyMaker, seeded: str
) -> None:
    operator = bearer(await keys.make(Role.OPERATOR))
    user = bearer(await keys.make(Role.USER))
    before = await count_rows(seeded)
    # Refused before the body is read: any body, even one that is not JSON, gets 403.
    for body in (b"{not json", json.dumps({"workspace": "default", "name": "x"}).encode()):
        answer = await http.post(
            "/v1/groups", content=body, headers={**operator, "Content-Type": "application/json"}
        )
        assert (answer.status_code, answer.json()["code"]) == (403, "forbidden")
    answer = await http.post(
        "/v1/delegations", content=b"{not json", headers={**user, "Content-Type": "application/json"}
    )
    assert (answer.status_code, answer.json()["code"]) == (403, "forbidden")
    answer = await http.post(
        "/v1/pending/00000000-0000-0000-0000-000000000000/reassign", content=b"[", headers=operator
    )
    assert (answer.status_code, answer.json()["code"]) == (403, "forbidden")
    assert await count_rows(seeded) == before


GROUP = {"workspace": "default", "name": "finance", "description": "money", "members": []}


async def check(http: AsyncTestClient[Any], path: str, body: bytes, headers: dict[str, str]) -> int:
    answer = await http.post(path, content=body, headers={**headers, "Content-Type": "application/json"})
    assert answer.status_code < 500, (body, answer.text)
    if answer.status_code >= 400:
        assert answer.headers["content-type"].startswith(PROBLEM) and answer.json()["code"], answer.text
    return answer.status_code


async def test_near_valid_bodies_are_refused_cleanly_and_store_nothing(
    http: AsyncTestClient[Any], keys: KeyMaker, seeded: str
) -> None:
    admin = bearer(await keys.make(Role.ADMIN))
    approver = await keys.issue(Role.OPERATOR, name="ann")
    delegate = await keys.issue(Role.OPERATOR, name="dee")
    ann = bearer(approver.secret)
    group_example = {**GROUP, "members": [str(approver.key.id)]}
    delegation_example = {
        "delegate": str(delegate.key.id),
        "ends_at": (utcnow() + timedelta(days=1)).isoformat(),
        "starts_at": utcnow().isoformat(),
    }
    assert (
        await http.post("/v1/groups", json={"workspace": "default", "name": "ops"}, headers=admin)
    ).status_code == 201
    member_example = {"key_id": str(approver.key.id)}
    cases = [
        ("/v1/groups", group_example, admin),
        ("/v1/delegations", delegation_example, ann),
        ("/v1/groups/default/ops/members", member_example, admin),
    ]
    for path, example, headers in cases:
        for variant in every_variant(example):
            before = await count_rows(seeded)
            status = await check(http, path, variant.body, headers)
            if status >= 400:
                assert await count_rows(seeded) == before, variant
            elif path == "/v1/groups":
                assert (await http.delete("/v1/groups/default/finance", headers=admin)).status_code == 204
            elif path.endswith("/members"):
                removed = await http.delete(
                    f"/v1/groups/default/ops/members/{approver.key.id}", headers=admin
                )
                assert removed.status_code == 200
    hostile = [
        ("/v1/groups", {**GROUP, "name": "no spaces"}),
        ("/v1/groups", {**GROUP, "name": "x" * 101}),
        ("/v1/groups", {**GROUP, "workspace": "other\x00"}),
        ("/v1/groups", {**GROUP, "members": ["not-a-key-id-but-36-characters-long!"]}),
        ("/v1/groups", {**GROUP, "members": ["00000000-0000-0000-0000-000000000000"]}),
        ("/v1/groups", {**GROUP, "members": [str(approver.key.id)] * 201}),
        ("/v1/delegations", {**delegation_example, "ends_at": "2020-01-01T00:00:00Z"}),
        ("/v1/delegations", {**delegation_example, "ends_at": "2026-11-25T06:00:00"}),
        ("/v1/delegations", {**delegation_example, "delegate": str(approver.key.id)}),
    ]
    before = await count_rows(seeded)
    for path, body in hostile:
        headers = admin if path == "/v1/groups" else ann
        assert 400 <= await check(http, path, json.dumps(body).encode(), headers) < 500, body
    assert await count_rows(seeded) == before


async def test_group_members_and_delegations_round_trip(http: AsyncTestClient[Any], keys: KeyMaker) -> None:
    admin = bearer(await keys.make(Role.ADMIN))
    ann = await keys.issue(Role.OPERATOR, name="ann")
    dee = await keys.issue(Role.OPERATOR, name="dee")
    user = await keys.issue(Role.USER, name="usr")
    assert (
        await http.post("/v1/groups", json={"workspace": "default", "name": "ops"}, headers=admin)
    ).status_code == 201
    added = await http.post("/v1/groups/default/ops/members", json={"key_id": str(ann.key.id)}, headers=admin)
    assert added.json()["members"] == [str(ann.key.id)]
    refused = await http.post(
        "/v1/groups/default/ops/members", json={"key_id": str(user.key.id)}, headers=admin
    )
    assert (refused.status_code, refused.json()["code"]) == (422, "invalid_member")
    assert [g["name"] for g in (await http.get("/v1/groups", headers=admin)).json()] == ["ops"]
    removed = await http.delete(f"/v1/groups/default/ops/members/{ann.key.id}", headers=admin)
    assert removed.json()["members"] == []
    missing = await http.delete(f"/v1/groups/default/ops/members/{ann.key.id}", headers=admin)
    assert missing.status_code == 404
    assert (await http.get("/v1/groups/default/nope", headers=admin)).status_code == 404
    assert (await http.get("/v1/groups/elsewhere/ops", headers=bearer(ann.secret))).status_code == 403

    made = await http.post(
        "/v1/delegations",
        json={"delegate": str(dee.key.id), "ends_at": (utcnow() + timedelta(hours=2)).isoformat()},
        headers=bearer(ann.secret),
    )
    assert made.status_code == 201, made.text
    delegation = made.json()
    assert (delegation["delegator"], delegation["delegate"]) == (str(ann.key.id), str(dee.key.id))
    seen = (await http.get("/v1/delegations", headers=bearer(dee.secret))).json()
    assert [d["id"] for d in seen] == [delegation["id"]]
    revoked = await http.delete(f"/v1/delegations/{delegation['id']}", headers=bearer(ann.secret))
    assert revoked.json()["revoked_at"] is not None
