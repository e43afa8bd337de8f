"""An adopted agent's MCP servers, real ones written with the `mcp` package: their tools pass the one
tool wrapper (a read-only tool runs, a destructive one asks a person), are in the catalog, and the
server is connected once per process, again after it died; over stdio and streamable HTTP, on
SQLite and PostgreSQL."""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

import httpx
import pytest
from fastmcp.client.transports import StdioTransport
from pydantic_ai.mcp import MCPToolset

from sursis.app.main import create_app
from sursis.app.service import Service
from sursis.domain.access import Role
from sursis.domain.records import Conversation, PendingCall, Run
from sursis.domain.tools import Category
from sursis.infra.agents.adopted import ToolOptions, adopt
from sursis.infra.agents.declarations import AgentDefinition
from sursis.infra.agents.mcp_tools import schema_digest
from sursis.testing import ScriptedModel, expect_pending, settle
from tests.agents.mcp.desk import desk_agent, http_desk, received, stdio_desk
from tests.conftest import KeyMaker, bearer, make_settings


@asynccontextmanager
async def served(
    database_url: str, definition: AgentDefinition, model: ScriptedModel, keys: KeyMaker
) -> AsyncIterator[tuple[Service, httpx.AsyncClient]]:
    """The real app over a service the test drives (`run_until_idle`), with an operator's key.

    The app runs on the test's event loop: an MCP connection belongs to the loop that opened it."""
    settings = make_settings(database_url, run_worker=False)
    service = Service.from_settings(settings, agents=[definition], model=model.model)
    app = create_app(settings, service=service)
    headers = bearer(await keys.make(Role.OPERATOR))
    transport = httpx.ASGITransport(app=app)
    async with (
        app.lifespan(),
        httpx.AsyncClient(transport=transport, base_url="http://app", headers=headers) as http,
    ):
        yield service, http


def served_desk(
    database_url: str, calls: Path, model: ScriptedModel, keys: KeyMaker, variant: str = "1"
) -> AbstractAsyncContextManager[tuple[Service, httpx.AsyncClient]]:
    """`served` with the desk agent over a stdio desk server that logs to `calls`."""
    return served(database_url, adopt(desk_agent(stdio_desk(calls, variant=variant))), model, keys)


async def deny_to_rest(svc: Service, call: PendingCall, reason: str) -> None:
    """Deny `call` and run the resumed work to rest."""
    await svc.resolve(call.correlation_id, "deny", reason=reason)
    await svc.run_until_idle()


async def desk_deletion_asked(svc: Service, message: str) -> tuple[Conversation, Run, PendingCall]:
    """A new `desk` conversation sent `message`, run to rest, its `delete_ticket` call waiting:
    the conversation, its run and the call."""
    conversation = await svc.start_conversation("desk")
    run = await svc.send(conversation.id, message)
    [call] = await expect_pending(svc, tool_name="delete_ticket")
    return conversation, run, call


async def test_a_destructive_tool_asks_a_person_and_runs_once_approved_over_http(
    database_url: str, keys: KeyMaker, tmp_path: Path
) -> None:
    calls = tmp_path / "calls.jsonl"
    model = ScriptedModel().call("lookup_ticket", ticket_id="T1").call("delete_ticket", ticket_id="T1")
    model.text("Deleted.")
    async with served_desk(database_url, calls, model, keys) as (svc, http):
        _, run, call = await desk_deletion_asked(svc, "delete ticket T1")
        assert (call.kind, call.category, call.agent) == ("approval", Category.MUTATE, "desk")
        assert [c["args"] for c in received(calls, "lookup_ticket")] == [{"ticket_id": "T1"}]
        assert received(calls, "delete_ticket") == []
        resolved = await http.post(f"/v1/pending/{call.correlation_id}/resolve", json={"decision": "approve"})
        assert resolved.status_code == 200, resolved.text
        view = await settle(svc, run.id)
        assert (view.run.status, view.run.output) == ("completed", "Deleted.")
        assert [c["args"]["ticket_id"] for c in received(calls, "delete_ticket")] == ["T1"]
        # One server process served every segment: connected once, reused.
        assert len({c["pid"] for c in received(calls)}) == 1
        records = await svc.container.runs.list_tool_calls(svc.principal, run.id)
        assert sorted((r.metadata.tool_name, r.metadata.ok) for r in records) == [
            ("delete_ticket", True),
            ("lookup_ticket", True),
        ]
        seen = str([m.parts for m in model.requests[-1]])
        assert "deleted T1" in seen


async def test_a_denied_destructive_call_never_reaches_the_server(
    database_url: str, keys: KeyMaker, tmp_path: Path
) -> None:
    calls = tmp_path / "calls.jsonl"
    model = ScriptedModel().call("delete_ticket", ticket_id="T2").text("Kept.")
    async with served_desk(database_url, calls, model, keys) as (svc, http):
        _, run, call = await desk_deletion_asked(svc, "delete ticket T2")
        body = {"decision": "deny", "reason": "still open"}
        assert (await http.post(f"/v1/pending/{call.correlation_id}/resolve", json=body)).status_code == 200
        assert (await settle(svc, run.id)).run.status == "completed"
    assert received(calls, "delete_ticket") == []
    assert "APPROVAL_DENIED" in str([m.parts for m in model.requests[-1]])


async def test_the_catalog_lists_mcp_tools_with_schema_annotations_and_server(
    database_url: str, keys: KeyMaker, tmp_path: Path
) -> None:
    model = ScriptedModel()
    async with served(database_url, adopt(desk_agent(stdio_desk(tmp_path / "c"))), model, keys) as (_, http):
        response = await http.get("/v1/agents")
    assert response.status_code == 200, response.text
    [desk] = response.json()
    tools = {t["name"]: t for t in desk["tools"]}
    assert sorted(tools) == ["delete_ticket", "lookup_ticket", "server_pid"]
    lookup, delete = tools["lookup_ticket"], tools["delete_ticket"]
    assert (lookup["category"], lookup["approval"], lookup["server"]) == ("read", "auto", "desk")
    assert lookup["annotations"]["readOnlyHint"] is True
    assert lookup["input_schema"]["required"] == ["ticket_id"]
    assert lookup["description"] == "Look a support ticket up."
    assert lookup["schema_digest"] == schema_digest(lookup["description"], lookup["input_schema"])
    assert (delete["category"], delete["approval"], delete["server"]) == (
        "mutate",
        "requires_approval",
        "desk",
    )
    assert delete["annotations"]["destructiveHint"] is True
    assert delete["default_timeout_seconds"] == 86400.0
    # A tool without annotations changes the world as far as anyone knows: asked.
    assert tools["server_pid"]["category"] == "mutate"


async def test_tool_options_apply_to_mcp_tools(database_url: str, keys: KeyMaker, tmp_path: Path) -> None:
    calls = tmp_path / "calls.jsonl"
    definition = adopt(
        desk_agent(stdio_desk(calls)),
        tools={
            "delete_ticket": ToolOptions(effect="Delete ticket {ticket_id}", timeout=60),
            "lookup_ticket": ToolOptions(category="mutate"),
            "server_pid": ToolOptions(category="read"),
        },
    )
    model = ScriptedModel().calls(("lookup_ticket", {"ticket_id": "T3"}), ("server_pid", {}))
    model.text("Asked.")
    async with served(database_url, definition, model, keys) as (svc, _):
        conversation = await svc.start_conversation("desk")
        await svc.send(conversation.id, "look T3 up")
        await svc.run_until_idle()
        [call] = await expect_pending(svc, tool_name="lookup_ticket")
        assert call.effect_description == "Run lookup_ticket"
        assert received(calls, "lookup_ticket") == []
        assert definition.spec("delete_ticket") is not None
        delete = definition.spec("delete_ticket")
        assert delete is not None and delete.timeout is not None and delete.timeout.total_seconds() == 60
        assert delete.describe_effect({"ticket_id": "T9"}) == "Delete ticket T9"
        server_pid = definition.spec("server_pid")
        assert server_pid is not None and not server_pid.gated


def test_options_of_an_illegal_value_for_an_mcp_tool_fail_at_adoption(tmp_path: Path) -> None:
    from sursis.domain.errors import ToolDeclarationError

    with pytest.raises(ToolDeclarationError, match="delete_ticket"):
        adopt(desk_agent(stdio_desk(tmp_path / "c")), tools={"delete_ticket": ToolOptions(category="bogus")})
    with pytest.raises(ToolDeclarationError, match="run by its server"):
        adopt(desk_agent(stdio_desk(tmp_path / "c")), tools={"delete_ticket": ToolOptions(executor="human")})


async def test_a_server_killed_between_turns_is_connected_again(
    database_url: str, keys: KeyMaker, tmp_path: Path
) -> None:
    calls = tmp_path / "calls.jsonl"
    model = ScriptedModel().call("lookup_ticket", ticket_id="A").text("first")
    model.call("lookup_ticket", ticket_id="B").text("second")
    async with served_desk(database_url, calls, model, keys) as (svc, _):
        conversation = await svc.start_conversation("desk")
        first = await svc.send(conversation.id, "look A up")
        assert (await settle(svc, first.id)).run.status == "completed"
        [before] = {c["pid"] for c in received(calls)}
        os.kill(before, signal.SIGKILL)
        second = await svc.send(conversation.id, "look B up")
        view = await settle(svc, second.id)
        assert (view.run.status, view.run.output) == ("completed", "second")
        [after] = [c["pid"] for c in received(calls, "lookup_ticket") if c["args"]["ticket_id"] == "B"]
        assert after != before
        assert "ticket B: printer on fire" in str([m.parts for m in model.requests[-1]])


async def test_a_server_over_streamable_http(database_url: str, keys: KeyMaker, tmp_path: Path) -> None:
    calls = tmp_path / "calls.jsonl"
    with http_desk(calls) as url:
        agent = desk_agent(MCPToolset(url, id="desk-http"))
        model = ScriptedModel().call("lookup_ticket", ticket_id="H1").call("delete_ticket", ticket_id="H1")
        model.text("Done.")
        async with served(database_url, adopt(agent), model, keys) as (svc, http):
            listed = {t["name"]: t for t in (await http.get("/v1/agents")).json()[0]["tools"]}
            assert listed["delete_ticket"]["server"] == "desk-http"
            _, run, call = await desk_deletion_asked(svc, "delete H1")
            assert [c["args"] for c in received(calls, "lookup_ticket")] == [{"ticket_id": "H1"}]
            approve = {"decision": "approve"}
            assert (
                await http.post(f"/v1/pending/{call.correlation_id}/resolve", json=approve)
            ).status_code == 200
            assert (await settle(svc, run.id)).run.status == "completed"
            assert len(received(calls, "delete_ticket")) == 1


async def test_edited_arguments_of_an_mcp_call_are_checked_against_the_servers_schema(
    database_url: str, keys: KeyMaker, tmp_path: Path
) -> None:
    calls = tmp_path / "calls.jsonl"
    model = ScriptedModel().call("delete_ticket", ticket_id="T4").text("Deleted another.")
    async with served_desk(database_url, calls, model, keys) as (svc, http):
        conversation, run, call = await desk_deletion_asked(svc, "delete T4")
        url = f"/v1/pending/{call.correlation_id}/resolve"
        for bad in ({"ticket_id": 5}, {"reason": "no ticket id"}):
            refused = await http.post(url, json={"decision": "approve", "args": bad})
            assert (refused.status_code, refused.json()["code"]) == (422, "validation_failed"), refused.text
        [still] = await svc.pending(conversation_id=conversation.id)
        assert (still.correlation_id, still.status) == (call.correlation_id, "awaiting")
        edited = await http.post(url, json={"decision": "approve", "args": {"ticket_id": "T5"}})
        assert edited.status_code == 200, edited.text
        assert (await settle(svc, run.id)).run.status == "completed"
    assert [c["args"]["ticket_id"] for c in received(calls, "delete_ticket")] == ["T5"]


async def test_a_server_that_cannot_start_leaves_the_catalog_answering_and_the_agent_running(
    database_url: str, keys: KeyMaker, tmp_path: Path
) -> None:
    missing = MCPToolset(StdioTransport(str(tmp_path / "no-such-server"), []), id="gone")
    model = ScriptedModel().text("answered without it")
    settings = make_settings(database_url, run_worker=False, lease_seconds=1, max_segment_attempts=2)
    service = Service.from_settings(settings, agents=[adopt(desk_agent(missing))], model=model.model)
    app = create_app(settings, service=service)
    headers = bearer(await keys.make(Role.OPERATOR))
    transport = httpx.ASGITransport(app=app)
    async with (
        app.lifespan(),
        httpx.AsyncClient(transport=transport, base_url="http://a", headers=headers) as http,
    ):
        response = await http.get("/v1/agents")
        assert response.status_code == 200, response.text
        assert response.json()[0]["tools"] == []
        conversation = await service.start_conversation("desk")
        run = await service.send(conversation.id, "hello")
        # Only the server's own tools fail: the run goes on without them, told which server is down.
        view = await settle(service, run.id)
        assert (view.run.status, view.run.output) == ("completed", "answered without it")
        assert "'gone' is unavailable" in str(model.requests[-1][0].instructions)
        ready = (await http.get("/readyz")).json()
        assert (ready["status"], ready["mcp"]) == ("ready", "degraded")
        assert ready["mcp_unavailable"][0].startswith("desk/gone: ")
