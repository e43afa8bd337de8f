"""A customer sees only what is in force: the enshrined version of a rule, never a draft, a
pending request or a denied version — through the World Agent's tools and over HTTP."""

from __future__ import annotations

from typing import Any

from litestar.testing import AsyncTestClient

from sursis.domain.access import Role
from tests.conftest import KeyMaker, bearer, call, script
from tests.worlds.flow import (
    RULE_TEXT,
    candidate_until_request,
    create_world,
    open_session,
    record_history,
    results_of,
    say,
    wait_run,
)

DRAFT_TEXT = "Refund every parcel without asking for a photo"


async def enshrined_rule_with_a_newer_draft(client: AsyncTestClient[Any], world_id: str) -> tuple[str, str]:
    """(rule in force with a v2 draft, a rule that was only ever a candidate)."""
    await record_history(client, world_id)
    rule_id, run = await candidate_until_request(client, world_id)
    [pending] = run["pending"]
    approved = await client.post(
        f"/v1/pending/{pending['correlation_id']}/resolve", json={"decision": "approve"}
    )
    assert approved.status_code == 200, approved.text
    assert (await wait_run(client, run["id"]))["status"] == "completed"

    cid = (await open_session(client, world_id))["conversation"]["id"]
    edit = "def predicate(ctx):\n    return bool(ctx.get('parcel_damaged'))\n"
    out = await say(
        client,
        cid,
        script(
            [
                call("generate_predicate", rule_id=rule_id, code=edit),
                call("propose_rule_candidate", text=DRAFT_TEXT, evidence={}),
            ]
        ),
    )
    assert out["status"] == "completed", out
    [edited, proposed] = results_of(out["output"])
    assert edited["result"]["version"] == 2 and edited["result"]["state"] == "candidate", edited
    return rule_id, proposed["result"]["rule_id"]


async def test_a_customer_sees_the_version_in_force_while_an_operator_drafts(
    client: AsyncTestClient[Any], keys: KeyMaker
) -> None:
    world_id = await create_world(client)
    rule_id, draft_id = await enshrined_rule_with_a_newer_draft(client, world_id)
    decision = {"id": "d-cite", "rule_ids": [rule_id, draft_id], "context": {}, "outcome": "refund_refused"}
    assert (await client.post(f"/v1/worlds/{world_id}/decisions", json=decision)).status_code == 201

    user = bearer(await keys.make(Role.USER))
    opened = await client.post(f"/v1/worlds/{world_id}/conversations", headers=user)
    assert opened.status_code == 201 and opened.json()["mode"] == "customer"
    asked = await client.post(
        f"/v1/conversations/{opened.json()['conversation']['id']}/messages",
        params={"wait": 20},
        json={
            "content": script(
                [
                    call("get_rule", rule_id=rule_id),
                    call("get_rule", rule_id=draft_id),
                    call("explain_decision", decision_id="d-cite"),
                ]
            )
        },
        headers=user,
    )
    run = asked.json()
    assert run["status"] == "completed", run
    in_force, draft, explained = results_of(run["output"])
    assert in_force["ok"] is True, in_force
    assert (in_force["result"]["version"], in_force["result"]["state"]) == (1, "enshrined")
    assert draft["ok"] is False and "no rule" in draft["error"]["message"]
    cited = explained["result"]["rules"]
    assert cited[0] == {"rule_id": rule_id, "text": RULE_TEXT, "in_force": True}
    assert cited[1] == {"rule_id": draft_id, "text": None, "in_force": False}
    assert DRAFT_TEXT not in str(explained)

    operator_cid = (await open_session(client, world_id))["conversation"]["id"]
    out = await say(client, operator_cid, script([call("explain_decision", decision_id="d-cite")]))
    [operator_view] = results_of(out["output"])
    first, second = operator_view["result"]["rules"]
    assert (first["version"], first["state"], first["in_force"]) == (1, "enshrined", True)
    assert (second["text"], second["state"], second["in_force"]) == (DRAFT_TEXT, "candidate", False)


async def test_over_http_a_customer_reads_only_enshrined_versions(
    client: AsyncTestClient[Any], keys: KeyMaker
) -> None:
    world_id = await create_world(client)
    rule_id, draft_id = await enshrined_rule_with_a_newer_draft(client, world_id)
    user = bearer(await keys.make(Role.USER))

    versions = await client.get(f"/v1/worlds/{world_id}/rules/{rule_id}", headers=user)
    assert versions.status_code == 200, versions.text
    assert [(v["version"], v["state"]) for v in versions.json()["versions"]] == [(1, "enshrined")]
    hidden = await client.get(f"/v1/worlds/{world_id}/rules/{draft_id}", headers=user)
    assert hidden.status_code == 404 and hidden.json()["code"] == "not_found"
    listed = (await client.get(f"/v1/worlds/{world_id}/rules", headers=user)).json()["items"]
    assert {(r["rule_id"], r["state"]) for r in listed} == {(rule_id, "enshrined")}

    operator_view = (await client.get(f"/v1/worlds/{world_id}/rules/{rule_id}")).json()["versions"]
    assert [v["state"] for v in operator_view] == ["enshrined", "candidate"]
