"""Each MCP server of an agent fails on its own: a server that is missing, one that dies at start and
one that dies while a call runs fail only the calls of their own tools, by name, while the agent's
other server and its own tool keep working; a non-read call whose server died mid-call is "outcome
unknown", like a worker's death. Real servers (the `mcp` package) over stdio, SQLite and PostgreSQL."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import structlog

from sursis.app.main import print_mcp_banner
from sursis.domain.access import Role
from sursis.infra.agents.adopted import ToolOptions, adopt
from sursis.testing import ScriptedModel, expect_pending, settle
from tests.agents.mcp.desk import bank_agent, received, stdio_desk, stdio_flaky
from tests.agents.test_mcp_servers import served
from tests.conftest import KeyMaker, bearer

EVERY_TOOL = (
    ("balance", {"account": "A1"}),
    ("lookup_ticket", {"ticket_id": "T1"}),
    ("note", {"text": "hi"}),
)


def returns(model: ScriptedModel) -> dict[str, Any]:
    """What the model was last told of each tool call, by tool (a failure as pydantic-ai sends it)."""
    told: dict[str, Any] = {}
    for message in model.requests[-1]:
        for part in getattr(message, "parts", []):
            if getattr(part, "part_kind", "") in ("tool-return", "retry-prompt"):
                told[part.tool_name] = part.model_response_str()
    return told


async def _seen_once(database_url: str, keys: KeyMaker, tmp_path: Path) -> None:
    """A first start with both servers up: their tools are listed and pinned in the database."""
    model = ScriptedModel().text("hello")
    agent = bank_agent(stdio_desk(tmp_path / "desk.jsonl"), stdio_flaky(tmp_path / "ledger.jsonl"))
    async with served(database_url, adopt(agent), model, keys) as (svc, _):
        await svc.container.catalog.discover()


async def test_a_missing_server_fails_only_its_own_tools_by_name(
    database_url: str, keys: KeyMaker, tmp_path: Path
) -> None:
    await _seen_once(database_url, keys, tmp_path)
    missing = stdio_flaky(tmp_path / "ledger.jsonl", command=str(tmp_path / "no-such-python"))
    agent = bank_agent(stdio_desk(tmp_path / "desk.jsonl"), missing)
    model = ScriptedModel().calls(*EVERY_TOOL).text("done")
    admin = bearer(await keys.make(Role.ADMIN))
    async with served(database_url, adopt(agent), model, keys) as (svc, http):
        await svc.container.catalog.discover()
        with contextlib.redirect_stdout(io.StringIO()) as banner:
            print_mcp_banner(svc.container.catalog)
        assert banner.getvalue().startswith("mcp: unavailable bank/ledger: ")
        ready = (await http.get("/readyz")).json()
        assert (ready["status"], ready["mcp"]) == ("ready", "degraded")
        [line] = ready["mcp_unavailable"]
        assert line.startswith("bank/ledger: ") and "no-such-python" in line
        listed = (await http.get("/v1/agents", headers=admin)).json()
        assert {t["name"] for t in listed[0]["tools"]} >= {"lookup_ticket", "note"}
        conversation = await svc.start_conversation("bank")
        view = await settle(svc, (await svc.send(conversation.id, "check A1 and T1")).id)
        assert (view.run.status, view.run.output) == ("completed", "done")
    told = returns(model)
    assert told["lookup_ticket"] == "ticket T1: printer on fire"
    assert told["note"] == "noted: hi"
    error = told["balance"]
    assert "The MCP server 'ledger' is unavailable" in error
    assert "MCP_SERVER_UNAVAILABLE" in error and '\\"ok\\"' not in error  # encoded once
    assert "'ledger' is unavailable" in str(model.requests[-1][0].instructions)
    assert received(tmp_path / "desk.jsonl", "lookup_ticket") != []


async def test_a_server_dying_at_start_fails_only_its_own_tools(
    database_url: str, keys: KeyMaker, tmp_path: Path
) -> None:
    await _seen_once(database_url, keys, tmp_path)
    dying = stdio_flaky(tmp_path / "ledger.jsonl", mode="die_at_start")
    agent = bank_agent(stdio_desk(tmp_path / "desk.jsonl"), dying)
    model = ScriptedModel().calls(*EVERY_TOOL).text("done")
    async with served(database_url, adopt(agent), model, keys) as (svc, _):
        conversation = await svc.start_conversation("bank")
        view = await settle(svc, (await svc.send(conversation.id, "check A1 and T1")).id)
        assert (view.run.status, view.run.output) == ("completed", "done")
        assert svc.container.catalog.unavailable_servers()[0].startswith("bank/ledger: ")
    told = returns(model)
    assert (told["lookup_ticket"], told["note"]) == ("ticket T1: printer on fire", "noted: hi")
    assert "The MCP server 'ledger' is unavailable" in told["balance"]


async def test_a_server_dying_mid_call_leaves_an_outcome_unknown_call_and_the_other_tools_working(
    database_url: str, keys: KeyMaker, tmp_path: Path
) -> None:
    ledger = tmp_path / "ledger.jsonl"
    agent = bank_agent(stdio_desk(tmp_path / "desk.jsonl"), stdio_flaky(ledger, mode="die_mid_call"))
    model = ScriptedModel().call("charge", account="A1", amount=30).calls(*EVERY_TOOL[1:]).text("done")
    async with served(database_url, adopt(agent), model, keys) as (svc, http):
        conversation = await svc.start_conversation("bank")
        run = await svc.send(conversation.id, "charge A1 30")
        [asked] = await expect_pending(svc, tool_name="charge")
        assert asked.kind == "approval"
        await svc.resolve(asked.correlation_id, "approve")
        [unknown] = await expect_pending(svc, tool_name="charge")
        # The effect landed before the server died: a person is asked, the call is never sent again.
        assert [c["args"] for c in received(ledger, "charge")] == [{"account": "A1", "amount": 30}]
        assert unknown.kind == "elicitation" and unknown.correlation_id != asked.correlation_id
        shown = (await http.get(f"/v1/pending/{unknown.correlation_id}")).json()
        review = json.dumps(shown)
        assert "outcome_unknown" in review and "The MCP server 'ledger' stopped while this call ran" in review
        await svc.resolve(unknown.correlation_id, "answer", result="charged once, checked by hand")
        view = await settle(svc, run.id)
        assert (view.run.status, view.run.output) == ("completed", "done")
    assert len(received(ledger, "charge")) == 1
    told = returns(model)
    assert (told["lookup_ticket"], told["note"]) == ("ticket T1: printer on fire", "noted: hi")


async def test_a_read_call_whose_server_dies_is_an_error_naming_it(
    database_url: str, keys: KeyMaker, tmp_path: Path
) -> None:
    agent = bank_agent(stdio_desk(tmp_path / "desk.jsonl"), stdio_flaky(tmp_path / "l.jsonl", "die_mid_call"))
    model = ScriptedModel().calls(*EVERY_TOOL).text("done")
    async with served(database_url, adopt(agent), model, keys) as (svc, _):
        conversation = await svc.start_conversation("bank")
        view = await settle(svc, (await svc.send(conversation.id, "check A1")).id)
        assert (view.run.status, view.run.output) == ("completed", "done")
    told = returns(model)
    assert "The MCP server 'ledger' is unavailable (it stopped while this call ran)" in told["balance"]
    assert (told["lookup_ticket"], told["note"]) == ("ticket T1: printer on fire", "noted: hi")


async def test_options_for_the_tools_of_several_servers_are_not_warned_about(
    database_url: str, keys: KeyMaker, tmp_path: Path
) -> None:
    agent = bank_agent(stdio_desk(tmp_path / "desk.jsonl"), stdio_flaky(tmp_path / "ledger.jsonl"))
    options = {"charge": ToolOptions(effect="Charge {amount}"), "delete_ticket": ToolOptions(timeout=60)}
    model = ScriptedModel().text("hello")
    with structlog.testing.capture_logs() as logs:
        async with served(database_url, adopt(agent, tools=options), model, keys) as (svc, _):
            await svc.container.catalog.discover()
    assert [e for e in logs if e["event"] == "mcp.options_for_unknown_tools"] == []
    with structlog.testing.capture_logs() as logs:
        typo = adopt(bank_agent(stdio_desk(tmp_path / "d.jsonl")), tools={"chrage": ToolOptions()})
        async with served(database_url, typo, model, keys) as (svc, _):
            await svc.container.catalog.discover()
    [warned] = [e for e in logs if e["event"] == "mcp.options_for_unknown_tools"]
    assert warned["tools"] == ["chrage"]
