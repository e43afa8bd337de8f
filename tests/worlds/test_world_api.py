"""The World Agent over HTTP, in process: the operator's flow, modes, workspaces, decisions and flags."""

from __future__ import annotations

from typing import Any

from litestar.testing import AsyncTestClient

from sursis.domain.access import Role
from tests.conftest import KeyMaker, bearer, call, script
from tests.worlds.flow import (
    PREDICATE,
    RULE_TEXT,
    candidate_until_request,
    check_refusal_then_acceptance,
    create_world,
    open_session,
    record_history,
    results_of,
    rule_versions,
    say,
    tool_calls,
    wait_run,
)


async def test_operator_flow_from_pattern_to_enshrined_rule(client: AsyncTestClient[Any]) -> None:
    world_id = await create_world(client)
    await record_history(client, world_id)
    rule_id, run = await candidate_until_request(client, world_id)

    calls = await tool_calls(client, run["id"])
    check_refusal_then_acceptance(calls)
    refused = calls[0]["result"]["error"]
    assert refused["code"] == "PREDICATE_REFUSED"
    assert "line 1, node Import" in refused["message"]
    gate = calls[3]["result"]["result"]
    assert gate["passed"] is True and len(gate["cases"]) == 3

    [pending] = run["pending"]
    assert pending["tool_name"] == "request_enshrinement"
    assert pending["effect_description"] == f"Enshrine rule {rule_id}"
    shown = (await client.get(f"/v1/pending/{pending['correlation_id']}")).json()
    assert shown["args"]["rule_id"] == rule_id
    review = shown["args"]["review"]
    assert review["predicate"] == PREDICATE and review["state"] == "enshrined_pending"
    assert (
        len(review["tests"]) == 3 and review["gate"]["passed"] is True and review["gate"]["current"] is True
    )
    assert review["citations"][0]["quote"] == "Damaged parcels are refunded."
    assert shown["args_summary"]["review"]["gate"]["passed"] is True
    [requested] = await rule_versions(client, world_id, rule_id)
    assert requested["state"] == "enshrined_pending"
    assert requested["predicate"] == PREDICATE
    assert requested["gate"]["passed"] is True and requested["gate"]["current"] is True
    assert requested["citations"][0]["locator"] == "section 4.2"

    decided = await client.post(
        f"/v1/pending/{pending['correlation_id']}/resolve", json={"decision": "approve"}
    )
    assert decided.status_code == 200, decided.text
    done = await wait_run(client, run["id"])
    assert done["status"] == "completed", done
    [enshrined] = await rule_versions(client, world_id, rule_id)
    assert enshrined["state"] == "enshrined" and enshrined["enshrined_at"] is not None
    listed = (await client.get(f"/v1/worlds/{world_id}/rules", params={"state": "enshrined"})).json()
    assert [r["rule_id"] for r in listed["items"]] == [rule_id]


async def test_a_denied_request_goes_back_to_candidate_with_the_reason(client: AsyncTestClient[Any]) -> None:
    world_id = await create_world(client)
    await record_history(client, world_id)
    rule_id, run = await candidate_until_request(client, world_id)
    [pending] = run["pending"]
    decided = await client.post(
        f"/v1/pending/{pending['correlation_id']}/resolve",
        json={"decision": "deny", "reason": "cite the 2027 policy"},
    )
    assert decided.status_code == 200
    assert (await wait_run(client, run["id"]))["status"] == "completed"
    [rule] = await rule_versions(client, world_id, rule_id)
    assert rule["state"] == "candidate"
    assert "denied" in rule["reason"] and "cite the 2027 policy" in rule["reason"]


async def test_an_enshrined_rule_is_edited_into_a_new_version(client: AsyncTestClient[Any]) -> None:
    world_id = await create_world(client)
    await record_history(client, world_id)
    rule_id, run = await candidate_until_request(client, world_id)
    [pending] = run["pending"]
    await client.post(f"/v1/pending/{pending['correlation_id']}/resolve", json={"decision": "approve"})
    await wait_run(client, run["id"])

    cid = (await open_session(client, world_id))["conversation"]["id"]
    edit = "def predicate(ctx):\n    return bool(ctx.get('parcel_damaged'))\n"
    out = await say(client, cid, script([call("generate_predicate", rule_id=rule_id, code=edit)]))
    [edited] = results_of(out["output"])
    assert edited["ok"] is True and edited["result"]["version"] == 2
    first, second = await rule_versions(client, world_id, rule_id)
    assert (first["version"], first["state"], first["predicate"]) == (1, "enshrined", PREDICATE)
    assert (second["version"], second["state"], second["predicate"]) == (2, "candidate", edit)
    assert second["text"] == RULE_TEXT

    restated = "remember: refund a damaged parcel reported within 14 days of delivery"
    note = "the operator wants predicates over delivery dates to default to refusal"
    out = await say(
        client,
        cid,
        script(
            [
                call("remember", text=restated, tier="persistent", kind="observation"),
                call("remember", text=note, tier="persistent", kind="pattern"),
            ]
        ),
    )
    refused, kept = results_of(out["output"])
    assert refused["ok"] is False and refused["error"]["code"] == "MEMORY_RULE_CONTENT"
    assert "trigram similarity" in refused["error"]["message"]
    assert kept["ok"] is True and kept["result"]["kind"] == "pattern"


async def test_enshrinement_needs_a_passed_gate_and_provenance(client: AsyncTestClient[Any]) -> None:
    world_id = await create_world(client)
    cid = (await open_session(client, world_id))["conversation"]["id"]
    out = await say(client, cid, script([call("propose_rule_candidate", text=RULE_TEXT, evidence={})]))
    rule_id = results_of(out["output"])[0]["result"]["rule_id"]
    out = await say(
        client,
        cid,
        script(
            [call("generate_predicate", rule_id=rule_id, code=PREDICATE)],
            [call("request_enshrinement", rule_id=rule_id)],
        ),
    )
    assert out["status"] == "completed", out
    [refused] = results_of(out["output"])
    assert refused["ok"] is False
    assert refused["error"]["code"] == "NOT_READY_FOR_ENSHRINEMENT"
    assert (await rule_versions(client, world_id, rule_id))[0]["state"] == "candidate"
    assert (await client.get("/v1/pending", params={"status": "awaiting"})).json()["items"] == []

    good = "def applies_when(ctx):\n    return 'parcel_damaged' in ctx\n"
    out = await say(
        client,
        cid,
        script(
            [
                call(
                    "generate_applies_when",
                    rule_id=rule_id,
                    code="def applies_when(ctx):\n    return ctx.x\n",
                ),
                call("generate_applies_when", rule_id=rule_id, code=good),
            ]
        ),
    )
    refused, accepted = results_of(out["output"])
    assert refused["error"]["code"] == "PREDICATE_REFUSED" and "node Attribute" in refused["error"]["message"]
    assert accepted["result"]["applies_when"] == good


async def test_worlds_are_one_per_domain_and_admin_made(client: AsyncTestClient[Any], keys: KeyMaker) -> None:
    await create_world(client)
    again = await client.post("/v1/worlds", json={"domain": "refunds", "title": "again"})
    assert again.status_code == 409 and again.json()["code"] == "world_exists"
    shouted = await client.post("/v1/worlds", json={"domain": "REFUNDS", "title": "again, louder"})
    assert shouted.status_code == 409 and shouted.json()["code"] == "world_exists", shouted.text
    assert [w["domain"] for w in (await client.get("/v1/worlds")).json()["items"]] == ["refunds"]
    operator = bearer(await keys.make(Role.OPERATOR))
    refused = await client.post("/v1/worlds", json={"domain": "other", "title": "x"}, headers=operator)
    assert refused.status_code == 403 and refused.json()["code"] == "forbidden"
    bad = await client.post("/v1/worlds", json={"domain": "has space", "title": ""})
    assert bad.status_code == 422 and bad.json()["code"] == "validation_failed"


async def test_decisions_and_flags_are_idempotent_on_the_client_id(
    client: AsyncTestClient[Any], keys: KeyMaker
) -> None:
    world_id = await create_world(client)
    decision = {"id": "d-1", "rule_ids": ["R1"], "context": {"a": 1}, "outcome": "refused"}
    first = await client.post(f"/v1/worlds/{world_id}/decisions", json=decision)
    again = await client.post(f"/v1/worlds/{world_id}/decisions", json=decision)
    assert (first.status_code, again.status_code) == (201, 200)
    assert first.json() == again.json()
    other = await client.post(f"/v1/worlds/{world_id}/decisions", json={**decision, "outcome": "granted"})
    assert other.status_code == 409 and other.json()["code"] == "idempotency_conflict"

    user = bearer(await keys.make(Role.USER))
    flag = {"id": "f-1", "kind": "noteworthy", "reason": "odd"}
    flagged = await client.post(f"/v1/worlds/{world_id}/decisions/d-1/flags", json=flag, headers=user)
    assert flagged.status_code == 201, flagged.text
    assert (await client.post(f"/v1/worlds/{world_id}/decisions/d-1/flags", json=flag)).status_code == 200
    missing = await client.post(f"/v1/worlds/{world_id}/decisions/nope/flags", json=flag)
    assert missing.status_code == 404 and missing.json()["code"] == "not_found"
    bad_kind = await client.post(f"/v1/worlds/{world_id}/decisions/d-1/flags", json={**flag, "kind": "angry"})
    assert bad_kind.status_code == 422
    by_user = await client.post(
        f"/v1/worlds/{world_id}/decisions", json={**decision, "id": "d-2"}, headers=user
    )
    assert by_user.status_code == 403


async def test_another_workspace_sees_neither_the_world_nor_its_conversations(
    client: AsyncTestClient[Any], keys: KeyMaker
) -> None:
    world_id = await create_world(client)
    cid = (await open_session(client, world_id))["conversation"]["id"]
    stranger = bearer(await keys.make(Role.OPERATOR, workspace="elsewhere"))
    for path in (f"/v1/worlds/{world_id}", f"/v1/worlds/{world_id}/rules", f"/v1/conversations/{cid}"):
        response = await client.get(path, headers=stranger)
        assert response.status_code == 404, path
        assert response.json()["code"] == "not_found"
    opened = await client.post(f"/v1/worlds/{world_id}/conversations", headers=stranger)
    assert opened.status_code == 404
    assert (await client.get("/v1/worlds", headers=stranger)).json()["items"] == []
