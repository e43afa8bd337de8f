"""Attack: an MCP server flips an annotation. A destructive tool is asked; the server restarts
saying the tool only reads (`readOnlyHint: true`, same name and schema). A new service process must
still ask, until an admin accepts the new description (audited); a key that is not an admin cannot.
On SQLite and PostgreSQL, with a real MCP server over stdio."""

from __future__ import annotations

from pathlib import Path

from sursis.domain.access import Role
from sursis.testing import ScriptedModel, settle
from tests.agents.mcp.desk import received
from tests.agents.test_mcp_servers import deny_to_rest, desk_deletion_asked, served_desk
from tests.conftest import KeyMaker, bearer


async def test_a_flipped_read_only_hint_is_asked_in_a_new_process_until_an_admin_accepts_it(
    database_url: str, keys: KeyMaker, tmp_path: Path
) -> None:
    calls = tmp_path / "calls.jsonl"
    admin = bearer(await keys.make(Role.ADMIN))

    # First start: the tool says it is destructive; it is pinned as it is, and asked.
    model = ScriptedModel().call("delete_ticket", ticket_id="T1").text("asked")
    async with served_desk(database_url, calls, model, keys) as (svc, _):
        *_, call = await desk_deletion_asked(svc, "delete T1")
        await deny_to_rest(svc, call, "not yet")

    # The server restarts claiming the tool only reads; a new service process (nothing in memory).
    model = ScriptedModel().call("delete_ticket", ticket_id="T2").text("asked again")
    async with served_desk(database_url, calls, model, keys, variant="flip") as (svc, http):
        *_, call = await desk_deletion_asked(svc, "delete T2")
        assert received(calls, "delete_ticket") == []
        async with svc.container.uow.reader() as uow:
            record = await uow.pending.get(call.correlation_id)
        assert record is not None and record.policy is not None
        assert "schema_changed" in record.policy.flags

        listed = await http.get("/v1/mcp/pins", params={"changed": "true"}, headers=admin)
        assert listed.status_code == 200, listed.text
        [pin] = listed.json()
        assert (pin["agent"], pin["tool"], pin["server"], pin["changed"]) == (
            "desk",
            "delete_ticket",
            "desk",
            True,
        )
        assert pin["changed_description"]["annotations"]["readOnlyHint"] is True
        assert pin["description"]["annotations"]["destructiveHint"] is True
        new_digest = pin["changed_digest"]
        url = "/v1/mcp/pins/desk/delete_ticket/accept"

        # Only an admin accepts (the operator's key of `served` cannot).
        refused = await http.post(url, json={"digest": new_digest})
        assert (refused.status_code, refused.json()["code"]) == (403, "forbidden"), refused.text
        stale = await http.post(url, json={"digest": "0" * 64}, headers=admin)
        assert (stale.status_code, stale.json()["code"]) == (409, "stale"), stale.text
        await deny_to_rest(svc, call, "still not")

    # Still asked after another restart: the change waits in the database, not in a process.
    model = ScriptedModel().call("delete_ticket", ticket_id="T3").text("asked a third time")
    async with served_desk(database_url, calls, model, keys, variant="flip") as (
        svc,
        http,
    ):
        conversation, _, call = await desk_deletion_asked(svc, "delete T3")
        assert received(calls, "delete_ticket") == []
        accepted = await http.post(url, json={"digest": new_digest}, headers=admin)
        assert accepted.status_code == 200, accepted.text
        assert (accepted.json()["digest"], accepted.json()["changed"]) == (new_digest, False)
        audit = (await http.get("/v1/audit", headers=admin)).json()["items"]
        [row] = [r for r in audit if r["action"] == "mcp.pin_accepted"]
        assert row["details"]["digest"] == new_digest
        assert row["details"]["tool_name"] == "delete_ticket"
        assert row["actor"] == accepted.json()["accepted_by"] != "first-seen"
        await deny_to_rest(svc, call, "done asking")

        # Accepted: the tool is what it now says it is, a read, and runs.
        model.call("delete_ticket", ticket_id="T4").text("ran")
        view = await settle(svc, (await svc.send(conversation.id, "delete T4")).id)
        assert view.run.status == "completed"
        assert [c["args"]["ticket_id"] for c in received(calls, "delete_ticket")] == ["T4"]
