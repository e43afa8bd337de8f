"""A real MCP server under the workspace's policy: its destructive tool asks by default, a rule that
allows it pins the digest of what the server says about it, and when the server later describes the
tool differently the call asks again, flagged `schema_changed` in the policy's tool catalog (tool
poisoning), on SQLite and PostgreSQL."""

from __future__ import annotations

from pathlib import Path

from sursis.domain.access import Role
from sursis.testing import ScriptedModel, settle
from tests.agents.mcp.desk import received
from tests.agents.test_mcp_servers import deny_to_rest, desk_deletion_asked, served_desk
from tests.conftest import KeyMaker, bearer

ALLOW_DELETES = {"rules": [{"id": "desk-cleanup", "effect": "allow", "tools": ["delete_ticket"]}]}


async def test_a_rule_allows_the_tool_it_saw_and_asks_again_once_the_server_changed_it(
    database_url: str, keys: KeyMaker, tmp_path: Path
) -> None:
    calls = tmp_path / "calls.jsonl"
    admin = bearer(await keys.make(Role.ADMIN))
    model = ScriptedModel().call("delete_ticket", ticket_id="T1").text("asked")
    async with served_desk(database_url, calls, model, keys) as (svc, http):
        # Asked by default: a destructive MCP tool is `mutate`.
        *_, call = await desk_deletion_asked(svc, "delete T1")
        await deny_to_rest(svc, call, "not yet")
        [desk] = [a for a in (await http.get("/v1/agents")).json() if a["name"] == "desk"]
        digest = {t["name"]: t["schema_digest"] for t in desk["tools"]}["delete_ticket"]
        stored = await http.put("/v1/policies", json=ALLOW_DELETES, headers=admin)
        assert stored.status_code == 200, stored.text
        assert stored.json()["rules"][0]["pins"] == {"delete_ticket": digest}

    model = ScriptedModel().call("delete_ticket", ticket_id="T2").text("ran")
    async with served_desk(database_url, calls, model, keys) as (svc, http):
        conversation = await svc.start_conversation("desk")
        view = await settle(svc, (await svc.send(conversation.id, "delete T2")).id)
        assert view.run.status == "completed"
        assert [c["args"]["ticket_id"] for c in received(calls, "delete_ticket")] == ["T2"]

    model = ScriptedModel().call("delete_ticket", ticket_id="T3").text("asked again")
    async with served_desk(database_url, calls, model, keys, variant="2") as (svc, http):
        *_, call = await desk_deletion_asked(svc, "delete T3")
        async with svc.container.uow.reader() as uow:
            record = await uow.pending.get(call.correlation_id)
        assert record is not None
        assert record.policy is not None
        assert (record.policy.rule, record.policy.flags) == ("desk-cleanup", ("schema_changed",))
        assert [c["args"]["ticket_id"] for c in received(calls, "delete_ticket")] == ["T2"]
        tools = (await http.get("/v1/policies/tools", headers=admin)).json()
        flagged = {t["name"]: t["flags"] for t in tools}
        assert flagged["delete_ticket"] == ["schema_changed"]
        assert flagged["lookup_ticket"] == []
